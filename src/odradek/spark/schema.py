"""Schemas of the ``odradek`` source: exactly those of Spark's Kafka source.

Spark DDL (``includeHeaders`` false / true)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>]

The Arrow schema that ``read()`` yields must match it field for field: ``partition`` int32,
``offset`` int64, ``timestamp`` ``timestamp('us', tz='UTC')``, ``timestampType`` int32.
"""

from __future__ import annotations

import pyarrow as pa

from odradek.client.columnar import SCHEMA, SCHEMA_WITH_HEADERS

__all__ = ["SOURCE_DDL", "SOURCE_DDL_WITH_HEADERS", "arrow_schema", "source_ddl"]

SOURCE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
SOURCE_DDL_WITH_HEADERS = SOURCE_DDL + ", headers array<struct<key: string, value: binary>>"


def source_ddl(include_headers: bool) -> str:
    return SOURCE_DDL_WITH_HEADERS if include_headers else SOURCE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the rows ``read()`` yields: the client's columnar schema."""
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA
