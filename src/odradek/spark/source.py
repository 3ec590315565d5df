"""The ``odradek`` data source: batch and streaming readers.

Planning (``partitions()``) runs on the driver and talks to the broker through a cached
``Admin``; ``read()`` runs in executor processes on a pickled reader and pulls Arrow record
batches from ``odradek.client.read_range_arrow``. Readers hold only picklable state (the
parsed options and a few integers).

Streaming offsets are Kafka's source format ``{"topic": {"partition": next_offset}}``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.spark import _client
from odradek.spark import avro as _avro
from odradek.spark._faults import fault
from odradek.spark.options import (
    OffsetSpec,
    OptionError,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from odradek.spark.planning import (
    DataLoss,
    OffsetRange,
    TopicPartition,
    apply_rate_limit,
    check_data_loss,
    offset_queries,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    resolve_offsets,
    split_ranges,
)
from odradek.spark.schema import arrow_schema, source_ddl, source_struct, spark_arrow_schema
from odradek.spark.sink import OdradekBatchWriter, OdradekStreamWriter

__all__ = ["OdradekBatchReader", "OdradekDataSource", "OdradekStreamReader", "RangePartition"]

log = logging.getLogger("odradek.spark")


class RangePartition(InputPartition):
    """One Spark input partition: records ``[start, end)`` of ``topic``-``partition``."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"RangePartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def _to_input_partitions(ranges: Sequence[OffsetRange]) -> list[RangePartition]:
    return [RangePartition(r.topic, r.partition, r.start, r.end) for r in ranges]


def _report(problems: list[str], fail: bool) -> None:
    if not problems:
        return
    if fail:
        raise DataLoss("; ".join(problems))
    for p in problems:
        log.warning("odradek source (failOnDataLoss=false): %s", p)


def _partitions(opts: SourceOptions) -> list[TopicPartition]:
    return _client.subscribed_partitions(
        opts.config, subscribe=opts.subscribe, pattern=opts.subscribe_pattern, assign=opts.assign
    )


def _earliest_latest(
    opts: SourceOptions, parts: Sequence[TopicPartition]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    earliest = _client.list_offsets(opts.config, dict.fromkeys(parts, "earliest"))
    latest = _client.list_offsets(opts.config, dict.fromkeys(parts, "latest"))
    return earliest, latest


def _resolve(
    opts: SourceOptions,
    spec: OffsetSpec,
    parts: Sequence[TopicPartition],
    latest: dict[TopicPartition, int],
    earliest: dict[TopicPartition, int],
    *,
    option: str,
    strict: bool,
) -> dict[TopicPartition, int]:
    try:
        known, queries = offset_queries(spec, parts, option=option, strict=strict)
        cached = {"earliest": earliest, "latest": latest}
        answers: dict[TopicPartition, int] = {}
        timestamp_queries = {tp: q for tp, q in queries.items() if isinstance(q, int)}
        for tp, q in queries.items():
            if isinstance(q, str):
                answers[tp] = cached[q][tp]
        answers.update(_client.list_offsets(opts.config, timestamp_queries))
        return resolve_offsets(
            known, queries, answers, latest, option=option, strategy=spec.strategy
        )
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def _topics(opts: SourceOptions) -> tuple[str, ...] | None:
    if opts.assign is not None:
        return tuple(sorted({t for t, _ in opts.assign}))
    return opts.subscribe


def reader_schemas(opts: SourceOptions) -> dict[str, str]:
    """The reader schema text of each Avro column (driver side): ``<column>.schema`` when
    given, else the latest version of the column's subject. A registry that cannot be reached
    raises RuntimeError naming its URL."""
    formats = opts.formats
    out: dict[str, str] = {}
    for column in formats.avro_columns:
        given = formats.schema(column)
        if given is not None and given != "latest":
            try:
                _avro.check_schema(given)
            except ValueError as exc:
                raise OptionError(f"option '{column}.schema': {exc}") from None
            out[column] = given
            continue
        subject = formats.subject(column, _topics(opts))
        assert formats.registry_url is not None  # parse_source_options checked it
        # lazy: the client loads only for Avro columns
        from odradek.client.avro import SchemaRegistryError

        try:
            _id, text = _avro.registry(formats.registry_url, formats.registry_config).latest(
                subject, self_contained=True
            )
        except SchemaRegistryError as exc:
            raise RuntimeError(
                f"odradek source: cannot get the latest schema of subject {subject!r} for "
                f"column '{column}' from the schema registry {formats.registry_url}: {exc}"
            ) from None
        out[column] = text
    return out


def source_schema(opts: SourceOptions, schemas: dict[str, str]) -> StructType:
    """The DataFrame schema for Avro columns decoded with ``schemas``."""
    typed = {c: _avro.avro_spark_type(text) for c, text in schemas.items()}
    result: StructType = source_struct(
        opts.include_headers, typed, corrupt_record=opts.mode == "PERMISSIVE"
    )
    return result


def avro_plan(
    opts: SourceOptions, schema: StructType
) -> tuple[_avro.AvroRead | None, pa.Schema | None]:
    """For a reader (driver side): what executors need to decode, and the exact Arrow schema
    of the batches; (None, None) without Avro columns. The reader schemas are resolved again
    here: if the subject got a new latest version since ``load()``, the DataFrame's schema is
    stale and the query fails, saying so."""
    if not opts.formats.avro_columns:
        return None, None
    schemas = reader_schemas(opts)
    expected = source_schema(opts, schemas)
    if expected.simpleString() != schema.simpleString():
        raise RuntimeError(
            "odradek source: the DataFrame's schema does not match the Avro reader schema(s) "
            f"(a new latest version since the DataFrame was created?): expected "
            f"{expected.simpleString()}, got {schema.simpleString()}; load() it again"
        )
    assert opts.formats.registry_url is not None
    avro = _avro.AvroRead(
        opts.formats.registry_url,
        opts.mode,
        tuple(sorted(schemas.items())),
        opts.formats.registry_config,
    )
    return avro, spark_arrow_schema(schema)


def read_range(
    opts: SourceOptions,
    topic: str,
    partition: int,
    start: int,
    end: int,
    avro: _avro.AvroRead | None = None,
    decoded_schema: pa.Schema | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches of ``[start, end)``; handles records deleted while reading.
    With ``avro``, its columns are decoded and the batches have ``decoded_schema``."""
    fault(f"read-{topic}-{partition}-{start}")
    client = _client.client_module()
    schema = arrow_schema(opts.include_headers)
    position = start
    while position < end:
        try:
            for batch in client.read_range_arrow(
                opts.config,
                topic,
                partition,
                position,
                end,
                include_headers=opts.include_headers,
                max_rows_per_batch=opts.max_rows_per_batch,
            ):
                if batch.num_rows == 0:
                    continue
                if batch.schema != schema:
                    batch = batch.cast(schema)
                offsets = batch.column("offset")
                position = int(offsets[len(offsets) - 1].as_py()) + 1
                if avro is not None:
                    assert decoded_schema is not None
                    batch = _avro.decode_batch(batch, topic, partition, avro, decoded_schema)
                yield batch
            return
        except Exception as exc:
            if not _client.is_offset_out_of_range(exc):
                raise
            earliest = _client.list_offsets(opts.config, {(topic, partition): "earliest"})
            lo = earliest.get((topic, partition), position)
            if lo <= position:
                raise
            problem = (
                f"cannot read {topic}-{partition} from offset {position}: records up to offset "
                f"{lo - 1} were deleted while the query ran; skipping {min(lo, end) - position} "
                "record(s)"
            )
            _report([problem], opts.fail_on_data_loss)
            position = lo


class OdradekBatchReader(DataSourceReader):
    """Batch reads: one input partition per topic-partition offset range (split by
    ``minPartitions`` / ``maxRecordsPerPartition``)."""

    def __init__(
        self, opts: SourceOptions, schema: StructType | None = None
    ) -> None:
        self.opts = opts
        self.avro, self.decoded_schema = (
            avro_plan(opts, schema) if schema is not None else (None, None)
        )

    def plan(self) -> list[OffsetRange]:
        opts = self.opts
        parts = _partitions(opts)
        if not parts:
            return []
        earliest, latest = _earliest_latest(opts, parts)
        start = _resolve(
            opts, opts.starting, parts, latest, earliest, option="startingOffsets", strict=True
        )
        end = _resolve(
            opts, opts.ending, parts, latest, earliest, option="endingOffsets", strict=True
        )
        for tp in parts:
            if start[tp] > end[tp]:
                raise OptionError(
                    f"option 'startingOffsets': starting offset {start[tp]} of {tp[0]}-{tp[1]} is "
                    f"after its ending offset {end[tp]} (endingOffsets)"
                )
        start, problems = check_data_loss(start, earliest, latest)
        _report(problems, opts.fail_on_data_loss)
        end = {tp: min(e, latest[tp]) for tp, e in end.items() if tp in start}
        return split_ranges(
            plan_ranges(start, end), opts.min_partitions, opts.max_records_per_partition
        )

    def partitions(self) -> Sequence[InputPartition]:
        return _to_input_partitions(self.plan())

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # Spark's stand-in when partitions() planned nothing
            return
        topic, part, start, end = partition.value
        yield from read_range(
            self.opts, topic, part, start, end, self.avro, self.decoded_schema
        )


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Structured-streaming reads.

    * ``initialOffset``: ``startingOffsets`` (default latest) for the partitions subscribed now.
    * ``latestOffset(start, limit)``: discovers new partitions and pattern-matched topics (they
      start at earliest), caps the end at the ``availableNow`` target, honours
      ``maxOffsetsPerTrigger`` (shared in proportion to backlogs, never exceeded) and
      ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` (not under availableNow: it would wait
      for data that is not coming).
    * ``partitions(start, end)``: checks for data loss (``failOnDataLoss``), then one range per
      partition, split by ``minPartitions``.
    """

    def __init__(self, opts: SourceOptions, schema: StructType | None = None) -> None:
        self.opts = opts
        self.avro, self.decoded_schema = (
            avro_plan(opts, schema) if schema is not None else (None, None)
        )
        self._target: dict[str, dict[str, int]] | None = None
        self._last_trigger_ms: float | None = None

    # -- offsets ---------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        opts = self.opts
        parts = _partitions(opts)
        if not parts:
            return {}
        earliest, latest = _earliest_latest(opts, parts)
        start = _resolve(
            opts, opts.starting, parts, latest, earliest, option="startingOffsets", strict=False
        )
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        parts = _partitions(self.opts)
        latest = _client.list_offsets(self.opts.config, dict.fromkeys(parts, "latest"))
        self._target = offsets_to_json(latest)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        opts = self.opts
        begin = offsets_from_json(start)
        parts = _partitions(opts)
        latest = _client.list_offsets(opts.config, dict.fromkeys(parts, "latest"))
        if self._target is not None:
            target = offsets_from_json(self._target)
            latest = {tp: min(o, target[tp]) for tp, o in latest.items() if tp in target}
            latest.update({tp: o for tp, o in begin.items() if tp not in latest})
        new = [tp for tp in latest if tp not in begin]
        if new:
            earliest_new = _client.list_offsets(opts.config, dict.fromkeys(new, "earliest"))
            begin = {**begin, **{tp: earliest_new.get(tp, 0) for tp in new}}
        max_rows: int | None
        min_rows: int | None
        if isinstance(limit, ReadAllAvailable):
            max_rows = min_rows = None
        elif isinstance(limit, ReadMaxRows):
            max_rows, min_rows = limit.max_rows, opts.min_offsets_per_trigger
        elif isinstance(limit, ReadMinRows):
            max_rows, min_rows = opts.max_offsets_per_trigger, limit.min_rows
        else:
            max_rows, min_rows = opts.max_offsets_per_trigger, opts.min_offsets_per_trigger
        if self._target is not None:
            min_rows = None
        # Partitions that vanished stay at their start offset; partitions() reports the loss.
        end = {**begin, **latest}
        if min_rows is not None:
            backlog = sum(max(0, latest[tp] - begin.get(tp, 0)) for tp in latest)
            now = time.monotonic() * 1000
            if self._last_trigger_ms is None:
                self._last_trigger_ms = now
            if backlog < min_rows and now - self._last_trigger_ms < opts.max_trigger_delay_ms:
                return start
        if max_rows is not None:
            end = {**end, **apply_rate_limit(begin, latest, max_rows)}
        if min_rows is not None:
            self._last_trigger_ms = time.monotonic() * 1000
        return offsets_to_json(end)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        opts = self.opts
        begin = offsets_from_json(start)
        stop = offsets_from_json(end)
        if begin == stop:
            return []
        parts = sorted(set(begin) | set(stop))
        earliest = _client.list_offsets(opts.config, dict.fromkeys(parts, "earliest"))
        latest = _client.list_offsets(opts.config, dict.fromkeys(parts, "latest"))
        full_begin = {tp: begin.get(tp, earliest.get(tp, 0)) for tp in stop}
        problems: list[str] = []
        for tp in begin:
            if tp not in stop or tp not in latest:
                problems.append(f"partition {tp[0]}-{tp[1]} no longer exists")
        for tp, e in stop.items():
            if e < full_begin[tp]:
                problems.append(
                    f"offset of {tp[0]}-{tp[1]} went back from {full_begin[tp]} to {e} "
                    "(topic deleted and recreated?)"
                )
                full_begin[tp] = e
        adjusted, more = check_data_loss(
            {tp: o for tp, o in full_begin.items() if tp in latest},
            earliest,
            {tp: max(latest[tp], stop[tp]) for tp in latest if tp in stop},
        )
        _report(problems + more, opts.fail_on_data_loss)
        ranges = plan_ranges(adjusted, {tp: e for tp, e in stop.items() if tp in adjusted})
        return _to_input_partitions(
            split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # Spark's stand-in when partitions() planned nothing
            return
        topic, part, start, end = partition.value
        yield from read_range(
            self.opts, topic, part, start, end, self.avro, self.decoded_schema
        )

    def commit(self, end: dict) -> None:
        """Spark's checkpoint holds the offsets (as with Kafka's source); with
        ``commitOffsetsToGroup`` they are also committed to that consumer group, for lag
        tools only (the query never reads them back). A failed commit is logged, not raised:
        it must not fail the query."""
        group = self.opts.commit_offsets_to_group
        if group is None:
            return
        try:
            _client.commit_group_offsets(self.opts.config, group, offsets_from_json(end))
        except Exception as exc:
            log.warning("odradek source: committing offsets to group %r failed: %s", group, exc)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "opts": self.opts,
            "avro": self.avro,
            "decoded_schema": self.decoded_schema,
            "_target": self._target,
            "_last_trigger_ms": None,
        }


class OdradekDataSource(DataSource):
    """``format("odradek")``: Spark's Kafka source and sink, over odradek.client.

    Options are validated when the DataFrame is created (``load()`` calls ``schema()``):
    an invalid option raises an error whose message names it.
    """

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def _source_options(self, streaming: bool | None) -> SourceOptions:
        return parse_source_options(self.options, streaming=streaming)

    def schema(self) -> str | StructType:
        opts = self._source_options(None)
        if opts.formats.avro_columns:
            return source_schema(opts, reader_schemas(opts))
        return source_ddl(opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return OdradekBatchReader(self._source_options(False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OdradekStreamReader(self._source_options(True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return OdradekBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return OdradekStreamWriter(parse_sink_options(self.options), schema)
