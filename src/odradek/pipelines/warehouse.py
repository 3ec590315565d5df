"""Warehouse loader: topics -> Parquet, partitioned by topic, date and hour (UTC) of the
record timestamp.

Layout under ``output``::

    output/topic=<t>/date=<yyyy-mm-dd>/hour=<0..23>/part-....parquet
    output/_spark_metadata/        the file sink's log: which files each micro-batch committed
    output/_checkpoint/            Spark's checkpoint (source offsets per micro-batch), default

Columns: ``topic, partition, offset, timestamp, timestampType, key`` (binary), the value
(``value`` binary for ``raw``; ``value`` string plus ``data`` struct for ``json``;
``schema_id`` int, ``value`` JSON string and, with a schema, ``data`` struct for ``avro``),
and the partition columns ``date`` (date) and ``hour`` (int).

Exactly once: the offsets read by each micro-batch are in the checkpoint beside the data and
the file sink commits each micro-batch's files in ``_spark_metadata`` under the same batch id,
so a rerun or a crash neither skips nor duplicates a record — for readers that go through
Spark (``spark.read.parquet(output)`` honours ``_spark_metadata``; files of a batch that
crashed before its commit are ignored). Tools that list Parquet files directly may see such
orphans.

Avro values use the Confluent wire format: magic byte 0, a 4-byte big-endian schema id, then
the Avro binary encoding; schemas come from a JSON file ``{"<id>": <avro schema>}``, or — with
``schema_registry_url`` — from a schema registry: the source then decodes each value by its id
to the subject's latest schema (``value.format avro``), and ``value`` is a typed struct column
(typed Parquet columns, nested) followed by ``_corrupt_record`` (string: why a value did not
decode; null for good records). Raw bytes stay the default. Decoding needs ``fastavro``.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from odradek.pipelines._streaming import Trigger, with_client_options, with_trigger

__all__ = ["avro_decoder", "build_warehouse_query", "warehouse_frame"]

ValueFormat = Literal["raw", "json", "avro"]


def avro_decoder(schemas: Mapping[int, Any]) -> Any:
    """A function bytes -> (schema id, JSON text) for Confluent-framed Avro values."""
    # lazy: fastavro only for Avro values
    import fastavro

    parsed = {int(k): fastavro.parse_schema(v) for k, v in schemas.items()}

    def decode(raw: bytes | None) -> tuple[int | None, str | None]:
        if raw is None or len(raw) < 5 or raw[0] != 0:
            return None, None
        (schema_id,) = struct.unpack(">i", raw[1:5])
        schema = parsed.get(schema_id)
        if schema is None:
            return schema_id, None
        record = fastavro.schemaless_reader(io.BytesIO(raw[5:]), schema, None)
        return schema_id, json.dumps(record, default=str, sort_keys=True)

    return decode


def warehouse_frame(
    df: Any,
    *,
    value_format: ValueFormat = "raw",
    value_schema: str | None = None,
    avro_schemas: Mapping[int, Any] | None = None,
) -> Any:
    """Turn a DataFrame with the odradek source schema into the warehouse's columns."""
    # lazy: pyspark is optional and slow to import
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    micros = F.unix_micros(F.col("timestamp"))
    typed = value_format == "avro" and isinstance(df.schema["value"].dataType, StructType)
    out = df.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "key",
        "value",
        *(["_corrupt_record"] if typed and "_corrupt_record" in df.columns else []),
        F.date_from_unix_date(F.floor(micros / 86_400_000_000).cast("int")).alias("date"),
        (F.floor(micros / 3_600_000_000) % 24).cast("int").alias("hour"),
    )
    if value_format == "raw":
        return out
    if value_format == "json":
        out = out.withColumn("value", F.col("value").cast("string"))
        if value_schema:
            out = out.withColumn("data", F.from_json("value", value_schema))
        return out
    if typed:  # decoded by the source (value.format avro): typed columns as they are
        return out
    if value_format == "avro":
        if not avro_schemas:
            raise ValueError("value format 'avro' needs the Avro schemas by id")
        decode = avro_decoder(avro_schemas)
        udf = F.udf(
            decode,
            StructType(
                [StructField("schema_id", IntegerType()), StructField("json", StringType())]
            ),
            useArrow=False,  # Arrow-optimised Python UDFs need pandas
        )
        out = out.withColumn("_avro", udf(F.col("value")))
        out = out.withColumn("schema_id", F.col("_avro.schema_id")).withColumn(
            "value", F.col("_avro.json")
        )
        out = out.drop("_avro")
        if value_schema:
            out = out.withColumn("data", F.from_json("value", value_schema))
        return out
    raise ValueError(f"unknown value format {value_format!r} (raw, json, avro)")


def build_warehouse_query(
    spark: Any,
    *,
    bootstrap_servers: str,
    output: str | Path,
    subscribe: str | None = None,
    subscribe_pattern: str | None = None,
    checkpoint: str | Path | None = None,
    trigger: Trigger = "available-now",
    interval: str = "30 seconds",
    value_format: ValueFormat = "raw",
    value_schema: str | None = None,
    avro_schemas: Mapping[int, Any] | None = None,
    schema_registry_url: str | None = None,
    schema_registry_config: Mapping[str, str] | None = None,
    value_subject: str | None = None,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    client_options: Mapping[str, str] | None = None,
    query_name: str | None = None,
) -> Any:
    """Start the loader; returns the StreamingQuery (``awaitTermination()`` for availableNow).

    ``checkpoint`` defaults to ``<output>/_checkpoint`` so that the offsets live with the data.
    ``schema_registry_url`` (with ``value_format="avro"``): typed ``value`` columns decoded by
    schema id (module doc); ``value_subject`` overrides ``<topic>-value``;
    ``schema_registry_config``: the registry client's credentials and TLS settings
    (``basic.auth.user.info``, ...), passed as the options ``schema.registry.<key>``.
    """
    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("startingOffsets", starting_offsets)
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
    )
    if (subscribe is None) == (subscribe_pattern is None):
        raise ValueError("give exactly one of subscribe, subscribe_pattern")
    if subscribe is not None:
        reader = reader.option("subscribe", subscribe)
    else:
        reader = reader.option("subscribePattern", subscribe_pattern)
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    if schema_registry_url:
        if value_format != "avro":
            raise ValueError("schema_registry_url needs value_format 'avro'")
        reader = reader.option("value.format", "avro").option(
            "schema.registry.url", schema_registry_url
        )
        if value_subject:
            reader = reader.option("value.subject", value_subject)
        for key, setting in (schema_registry_config or {}).items():
            reader = reader.option(f"schema.registry.{key}", setting)
    reader = with_client_options(reader, client_options)
    frame = warehouse_frame(
        reader.load(),
        value_format=value_format,
        value_schema=value_schema,
        avro_schemas=avro_schemas,
    )
    output = str(output)
    checkpoint = str(checkpoint) if checkpoint is not None else f"{output.rstrip('/')}/_checkpoint"
    writer = (
        frame.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .partitionBy("topic", "date", "hour")
        .outputMode("append")
    )
    if query_name:
        writer = writer.queryName(query_name)
    return with_trigger(writer, trigger, interval).start()
