"""The ``odradek`` sink: batch and streaming Arrow writers over the idempotent producer.

Input columns, as Spark's Kafka sink: ``value`` (string or binary, required); ``key`` (string
or binary), ``topic`` (string; required unless the ``topic`` option is set, which overrides
it), ``partition`` (int), ``headers`` (array<struct<key: string, value: binary>>) optional.
Other columns are ignored.

Streaming writes are fenced against replays (``exactlyOnce``, default true; design and the
remaining duplicate window in docs/spark.md):

* every task of micro-batch B (query q, Spark partition t) first looks for a marker of
  (q, B, t) — or a commit marker of (q, B) — on the commit topic (``commitTopic``, default
  ``__odradek_sink_commits``, one partition), scanning backwards from its end until the commit
  marker of an earlier batch of q; if found, the task's rows were already written by an earlier
  attempt and it writes nothing;
* otherwise it produces its rows with the idempotent producer, flushes (all acknowledged),
  then appends its task marker ``{"sink": q, "batch": B, "task": t, "kind": "task", ...}``;
* ``commit(messages, batchId)`` on the driver appends ``{"sink": q, "batch": B, "kind":
  "commit", ...}``.

Marker records: key = the query id (UTF-8), value = JSON as above.
Duplicates remain possible only for a task that dies after its rows were acknowledged and
before its marker was: that task's rows of the replayed batch are written twice.
"""

from __future__ import annotations

import collections
import json
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from odradek.spark import _client
from odradek.spark._faults import fault
from odradek.spark.options import OptionError, SinkOptions

__all__ = ["OdradekBatchWriter", "OdradekStreamWriter", "SinkCommitMessage", "validate_sink_schema"]

MARKER_SCAN_INITIAL = 256


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver."""

    rows: int = 0
    skipped: bool = False
    sink: str | None = None
    batch: int | None = None
    task: int | None = None
    per_partition: dict[str, int] = field(default_factory=dict)


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Check the input columns like Spark's Kafka sink; OptionError names the problem."""
    fields = {f.name.lower(): f for f in schema.fields}
    value = fields.get("value")
    if value is None:
        raise OptionError("required attribute 'value' not found in the input of the odradek sink")
    if not isinstance(value.dataType, StringType | BinaryType):
        raise OptionError(
            f"attribute 'value' must be string or binary, got {value.dataType.simpleString()}"
        )
    key = fields.get("key")
    if key is not None and not isinstance(key.dataType, StringType | BinaryType):
        raise OptionError(
            f"attribute 'key' must be string or binary, got {key.dataType.simpleString()}"
        )
    topic = fields.get("topic")
    if topic is None and opts.topic is None:
        raise OptionError("option 'topic' is required when the input has no 'topic' attribute")
    if topic is not None and not isinstance(topic.dataType, StringType):
        raise OptionError(f"attribute 'topic' must be string, got {topic.dataType.simpleString()}")
    partition = fields.get("partition")
    if partition is not None and not isinstance(partition.dataType, IntegerType):
        raise OptionError(
            f"attribute 'partition' must be int, got {partition.dataType.simpleString()}"
        )
    headers = fields.get("headers")
    if headers is not None:
        dt = headers.dataType
        ok = (
            isinstance(dt, ArrayType)
            and isinstance(dt.elementType, StructType)
            and [f.name for f in dt.elementType.fields] == ["key", "value"]
            and isinstance(dt.elementType.fields[0].dataType, StringType)
            and isinstance(dt.elementType.fields[1].dataType, BinaryType | StringType)
        )
        if not ok:
            raise OptionError(
                "attribute 'headers' must be array<struct<key: string, value: binary>>, got "
                f"{dt.simpleString()}"
            )


def _arrow_column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    names = [n.lower() for n in batch.schema.names]
    if name not in names:
        return None
    return batch.column(names.index(name))


def _check(fut: Any) -> None:
    exc = fut.exception() if hasattr(fut, "exception") else None
    if exc is not None:
        raise exc


def _split_by_topic(opts: SinkOptions, batch: pa.RecordBatch) -> list[tuple[str, pa.RecordBatch]]:
    """(target topic, its rows) of one input batch: the ``topic`` option, else the column."""
    if opts.topic:
        return [(opts.topic, batch)]
    col = _arrow_column(batch, "topic")
    assert col is not None  # validate_sink_schema: no topic option -> a topic column
    if col.null_count:
        raise ValueError("row has a null 'topic' and no 'topic' option is set (odradek sink)")
    uniq = pc.unique(col).to_pylist()
    if len(uniq) == 1:
        return [(uniq[0], batch)]
    return [(t, batch.filter(pc.equal(col, t))) for t in uniq]


def produce_batches(opts: SinkOptions, batches: Iterable[pa.RecordBatch]) -> dict[str, int]:
    """Send every row with one idempotent producer; flush; raise on any failed send.

    One ``Producer.send_batch`` call per input Arrow batch (and target topic): the columns go
    to the client as Arrow arrays — value, key, partition, headers (with ``includeHeaders``) —
    and are partitioned and batched there exactly as per-row ``send`` would.
    Returns rows per target topic.
    """
    client = _client.client_module()
    config = {"enable.idempotence": "true", "acks": "all", **opts.config}
    producer = client.Producer(config)
    pending: collections.deque[Any] = collections.deque()
    counts: dict[str, int] = collections.Counter()
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            for topic, rows in _split_by_topic(opts, batch):
                values = _arrow_column(rows, "value")
                assert values is not None
                pending.append(
                    producer.send_batch(
                        topic,
                        values,
                        keys=_arrow_column(rows, "key"),
                        partitions=_arrow_column(rows, "partition"),
                        headers=_arrow_column(rows, "headers") if opts.include_headers else None,
                    )
                )
                counts[topic] += rows.num_rows
            while pending and pending[0].done():
                _check(pending.popleft())
        producer.flush()
        while pending:
            _check(pending.popleft())
    finally:
        if hasattr(producer, "close"):
            producer.close(30)
    return dict(counts)


class OdradekBatchWriter(DataSourceArrowWriter):
    """``df.write.format("odradek")``: each task produces its rows and flushes."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        counts = produce_batches(self.opts, iterator)
        return SinkCommitMessage(rows=sum(counts.values()), per_partition=counts)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


# -- the replay fence -------------------------------------------------------------------------
_ensured: set[tuple[tuple[tuple[str, str], ...], str]] = set()


def ensure_commit_topic(opts: SinkOptions) -> None:
    key = (opts.client_config, opts.commit_topic)
    if key in _ensured:
        return
    admin = _client.admin(opts.config)
    names = _client._topic_names(admin.list_topics())
    if opts.commit_topic not in names:
        try:
            _create_topic(admin, opts.commit_topic, 1)
        except Exception as exc:
            if "exist" not in str(exc).lower() and "36" not in str(getattr(exc, "code", "")):
                raise
    _ensured.add(key)


def _create_topic(admin: Any, name: str, partitions: int) -> None:
    new_topic = getattr(_client.client_module(), "NewTopic", None)
    if new_topic is not None:
        admin.create_topics([new_topic(name, partitions)], raise_on_exists=False)
    else:
        admin.create_topics([(name, partitions)])


def _task_identity() -> tuple[str, int, int, int]:
    """(query id, batch id, Spark partition id, attempt) of the running streaming task."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        raise RuntimeError("the odradek streaming sink must run inside a Spark task")
    query = tc.getLocalProperty("sql.streaming.queryId")
    batch = tc.getLocalProperty("streaming.sql.batchId")
    if query is None or batch is None:
        raise RuntimeError("no streaming query id / batch id in the task's local properties")
    return query, int(batch), tc.partitionId(), tc.attemptNumber()


def read_markers_back(opts: SinkOptions, sink: str, batch: int) -> tuple[bool, set[int]]:
    """Scan the commit topic backwards for markers of (sink, batch).

    Returns (batch committed, tasks with a marker). Stops at the commit marker of an earlier
    batch of this sink (nothing older can concern this batch) or at the log start.
    """
    client = _client.client_module()
    tp = (opts.commit_topic, 0)
    lo = _client.list_offsets(opts.config, {tp: "earliest"}).get(tp, 0)
    hi = _client.list_offsets(opts.config, {tp: "latest"}).get(tp, 0)
    tasks: set[int] = set()
    window = MARKER_SCAN_INITIAL
    end = hi
    key = sink.encode()
    while end > lo:
        begin = max(lo, end - window)
        found_older_commit = False
        consumer_config = _client.config_for("consumer", opts.config)
        for rb in client.read_range_arrow(consumer_config, opts.commit_topic, 0, begin, end):
            keys = rb.column("key").to_pylist()
            values = rb.column("value").to_pylist()
            for k, v in zip(keys, values, strict=True):
                if k != key or v is None:
                    continue
                try:
                    m = json.loads(v)
                except ValueError:
                    continue
                b = m.get("batch")
                if m.get("kind") == "commit":
                    if b is not None and b >= batch:
                        return True, tasks
                    found_older_commit = True
                elif m.get("kind") == "task" and b == batch:
                    tasks.add(int(m["task"]))
        if found_older_commit:
            break
        end = begin
        window *= 2
    return False, tasks


def _append_marker(opts: SinkOptions, sink: str, marker: dict[str, Any]) -> None:
    client = _client.client_module()
    producer = client.Producer({"enable.idempotence": "true", "acks": "all", **opts.config})
    try:
        fut = producer.send(
            opts.commit_topic,
            json.dumps(marker, sort_keys=True).encode(),
            key=sink.encode(),
            partition=0,
        )
        producer.flush()
        if hasattr(fut, "result"):
            fut.result()
    finally:
        if hasattr(producer, "close"):
            producer.close(30)


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("odradek")``: idempotent producer + replay fence (module doc)."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, opts)
        self.opts = opts
        if opts.exactly_once:
            ensure_commit_topic(opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        opts = self.opts
        if not opts.exactly_once:
            counts = produce_batches(opts, iterator)
            return SinkCommitMessage(rows=sum(counts.values()), per_partition=counts)
        sink, batch, task, attempt = _task_identity()
        committed, done_tasks = read_markers_back(opts, sink, batch)
        if committed or task in done_tasks:
            for _ in iterator:  # drain: Spark expects the input consumed
                pass
            return SinkCommitMessage(skipped=True, sink=sink, batch=batch, task=task)
        counts = produce_batches(opts, iterator)
        fault(f"after-flush-{batch}-{task}")
        _append_marker(
            opts,
            sink,
            {
                "sink": sink,
                "batch": batch,
                "task": task,
                "kind": "task",
                "attempt": attempt,
                "rows": sum(counts.values()),
                "host": socket.gethostname(),
            },
        )
        return SinkCommitMessage(
            rows=sum(counts.values()), sink=sink, batch=batch, task=task, per_partition=counts
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if not self.opts.exactly_once:
            return
        fault(f"commit-{batchId}")
        sinks = {m.sink for m in messages if isinstance(m, SinkCommitMessage) and m.sink}
        for sink in sinks:
            _append_marker(
                self.opts,
                sink,
                {
                    "sink": sink,
                    "batch": batchId,
                    "kind": "commit",
                    "tasks": len(messages),
                    "rows": sum(m.rows for m in messages if isinstance(m, SinkCommitMessage)),
                },
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
