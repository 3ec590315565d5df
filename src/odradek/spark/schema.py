"""Schemas of the ``odradek`` source: exactly those of Spark's Kafka source.

Spark DDL (``includeHeaders`` false / true)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>]

With ``key.format`` / ``value.format`` avro the column's type is the reader schema's
(odradek.spark.avro) and, in PERMISSIVE mode, ``_corrupt_record string`` comes last.

The Arrow schema that ``read()`` yields must match it field for field: ``partition`` int32,
``offset`` int64, ``timestamp`` ``timestamp('us', tz='UTC')``, ``timestampType`` int32.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from odradek.client.columnar import SCHEMA, SCHEMA_WITH_HEADERS

__all__ = [
    "SOURCE_DDL",
    "SOURCE_DDL_WITH_HEADERS",
    "arrow_schema",
    "source_ddl",
    "source_struct",
    "spark_arrow_schema",
]

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


def source_struct(include_headers: bool, typed: Mapping[str, Any], corrupt_record: bool) -> Any:
    """The source's ``StructType`` with the Spark types of ``typed`` columns (``key`` /
    ``value``) in place of binary, and ``_corrupt_record string`` last when asked."""
    from pyspark.sql import types as T

    fields = [
        T.StructField("key", typed.get("key", T.BinaryType())),
        T.StructField("value", typed.get("value", T.BinaryType())),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("timestampType", T.IntegerType()),
    ]
    if include_headers:
        header = T.StructType(
            [T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]
        )
        fields.append(T.StructField("headers", T.ArrayType(header)))
    if corrupt_record:
        fields.append(T.StructField("_corrupt_record", T.StringType()))
    return T.StructType(fields)


def spark_arrow_schema(struct: Any) -> pa.Schema:
    """The Arrow schema Spark expects of a Python data source's batches for ``struct``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct, timezone="UTC")
