"""Schema types the registry parses: ``AVRO`` (``avro``), ``JSON`` (``jsonschema``) and
``PROTOBUF`` (``proto-schema-parser``, ``protobuf``).

``parse(schema_type, text, references)`` returns a ``ParsedSchema`` (see ``compatibility``) or
raises ``ValueError`` with the parser's reason; ``references`` are the referenced schemas' texts,
dependencies first.
"""

from __future__ import annotations

from collections.abc import Sequence

from .compatibility import ParsedSchema

__all__ = ["SCHEMA_TYPES", "parse"]

SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")
"""What ``GET /schemas/types`` answers, in Confluent's order."""


def parse(schema_type: str, text: str, references: Sequence[str] = ()) -> ParsedSchema:
    if schema_type == "AVRO":
        from .avro_format import parse_avro

        return parse_avro(text, references)
    if schema_type == "JSON":
        from .json_format import parse_json

        return parse_json(text, references)
    if schema_type == "PROTOBUF":
        from .protobuf_format import parse_protobuf

        return parse_protobuf(text, references)
    raise ValueError(f"Invalid schema type {schema_type}")
