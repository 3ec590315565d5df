"""Schema types the registry parses: ``AVRO`` (``avro``) and ``JSON`` (``jsonschema``).

``parse(schema_type, text, references)`` returns a ``ParsedSchema`` (see ``compatibility``) or
raises ``ValueError`` with the parser's reason; ``references`` are the referenced schemas' texts,
dependencies first.
"""

from __future__ import annotations

from collections.abc import Sequence

from .compatibility import ParsedSchema

__all__ = ["SCHEMA_TYPES", "parse"]

SCHEMA_TYPES = ("JSON", "AVRO")
"""What ``GET /schemas/types`` answers (Confluent lists JSON, PROTOBUF, AVRO)."""


def parse(schema_type: str, text: str, references: Sequence[str] = ()) -> ParsedSchema:
    if schema_type == "AVRO":
        from .avro_format import parse_avro

        return parse_avro(text, references)
    if schema_type == "JSON":
        from .json_format import parse_json

        return parse_json(text, references)
    raise ValueError(f"Invalid schema type {schema_type}")
