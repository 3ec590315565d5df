"""The ``odradek`` sink: batch and streaming Arrow writers over odradek.client's producer.

Input columns, as Spark's Kafka sink: ``value`` (string or binary, required); ``key`` (string
or binary), ``topic`` (string; required unless the ``topic`` option is set, which overrides
it), ``partition`` (int), ``headers`` (array<struct<key: string, value: binary>>) optional.
Other columns are ignored.

With ``value.format`` / ``key.format`` avro (and ``schema.registry.url``) the column may be of
any Spark type (usually a struct): each value is encoded in Avro with a registered schema and
framed with its id (odradek.spark.avro). The subject is ``value.subject`` / ``key.subject``, else
``<topic>-value`` / ``<topic>-key`` of the row's target topic.

Streaming writes are exactly once (``exactlyOnce``, default true) by a two-phase commit over
Kafka transactions, tied to Spark's ``commit(messages, batchId)`` (docs/spark.md):

* phase 1, each write task of micro-batch B (query q, Spark partition t): unless the commit
  topic already says how B ended (below), it writes its rows in one transaction with
  ``transactional.id`` ``odradek-sink-<q>-<t>`` — ``init_transactions()`` first, which fences
  any earlier attempt of the task and aborts its open transaction — flushes, and leaves the
  transaction open, reporting (transactional id, producer id, epoch) to the driver;
* phase 2, ``commit(messages, B)`` on the driver: appends an *intent* record naming every
  task's transaction, commits each one (EndTxn), then appends the *commit* record of B;
  ``abort(messages, B)`` aborts them.

A replayed batch B (Spark replays it when its commit did not reach Spark's commit log) reads
the commit topic (``commitTopic``, default ``__odradek_sink_commits``, one partition) backwards
to the commit record of an earlier batch: a commit record of B — every row is in: write
nothing; an intent of B — the batch was decided: the task rolls its own transaction of that
intent forward (EndTxn commit, a no-op if it was committed) and writes nothing, or, if that
transaction was aborted meanwhile (``transaction.timeout.ms``), writes its rows again; neither —
write (the new ``init_transactions()`` aborts the earlier attempt). Rows become visible to
read_committed readers only when the driver commits, all tasks' at once.

Commit-topic records: key = the query id (UTF-8), value = JSON
``{"sink": q, "batch": B, "kind": "intent", "txns": {"<t>": [transactional id, producer id, epoch]}}``
or ``{"sink": q, "batch": B, "kind": "commit", ...}``; written by the driver, not transactional.
"""

from __future__ import annotations

import collections
import json
import logging
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
from odradek.spark import avro as _avro
from odradek.spark._faults import fault
from odradek.spark.options import OptionError, SinkOptions

__all__ = [
    "BatchOutcome",
    "OdradekBatchWriter",
    "OdradekStreamWriter",
    "SinkCommitMessage",
    "read_batch_outcome",
    "transactional_id",
    "validate_sink_schema",
]

MARKER_SCAN_INITIAL = 256

log = logging.getLogger("odradek.spark")


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver."""

    rows: int = 0
    skipped: bool = False
    sink: str | None = None
    batch: int | None = None
    task: int | None = None
    per_partition: dict[str, int] = field(default_factory=dict)
    txn: tuple[str, int, int] | None = None
    """The task's open transaction: (transactional id, producer id, epoch)."""


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Check the input columns like Spark's Kafka sink; OptionError names the problem."""
    fields = {f.name.lower(): f for f in schema.fields}
    value = fields.get("value")
    if value is None:
        raise OptionError("required attribute 'value' not found in the input of the odradek sink")
    avro = opts.formats.avro_columns
    if "value" not in avro and not isinstance(value.dataType, StringType | BinaryType):
        raise OptionError(
            f"attribute 'value' must be string or binary, got {value.dataType.simpleString()} "
            "(a struct is written in Avro with .option(\"value.format\", \"avro\"))"
        )
    key = fields.get("key")
    if "key" in avro and key is None:
        raise OptionError("option 'key.format' avro needs a 'key' attribute in the input")
    if "key" not in avro and key is not None and not isinstance(key.dataType, StringType | BinaryType):
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


@dataclass(frozen=True)
class AvroColumn:
    """How the sink encodes one column in Avro (decided on the driver; picklable)."""

    url: str
    schema: str
    subject: str | None
    """None: ``<topic>-<column>`` of each row's target topic."""
    auto_register: bool
    registry_config: tuple[tuple[str, str], ...] = ()


def avro_columns(opts: SinkOptions, schema: StructType) -> dict[str, AvroColumn]:
    """The Avro encoding of each Avro column (driver side): ``<column>.schema`` (``latest``:
    the subject's latest version, looked up, not registered), else the schema derived from the
    column's Spark type (registered on first use). Errors name the option or the registry."""
    formats = opts.formats
    fields = {f.name.lower(): f for f in schema.fields}
    out: dict[str, AvroColumn] = {}
    for column in formats.avro_columns:
        assert formats.registry_url is not None  # parse_sink_options checked it
        given = formats.schema(column)
        subject = formats.key_subject if column == "key" else formats.value_subject
        if given == "latest":
            subject = formats.subject(column, None if opts.topic is None else (opts.topic,))
            # lazy: the client loads only for Avro columns
            from odradek.client.avro import SchemaRegistryError

            try:
                _id, text = _avro.registry(formats.registry_url, formats.registry_config).latest(subject)
            except SchemaRegistryError as exc:
                raise RuntimeError(
                    f"odradek sink: cannot get the latest schema of subject {subject!r} from the "
                    f"schema registry {formats.registry_url}: {exc}"
                ) from None
            out[column] = AvroColumn(formats.registry_url, text, subject, False, formats.registry_config)
            continue
        if given is not None:
            text = given
        else:
            try:
                text = json.dumps(_avro.spark_avro_schema(fields[column].dataType))
            except ValueError as exc:
                raise OptionError(f"attribute '{column}': {exc}") from None
        try:
            _avro.check_schema(text)
        except ValueError as exc:
            raise OptionError(f"option '{column}.schema': {exc}") from None
        if subject is None and opts.topic is not None:
            subject = f"{opts.topic}-{column}"
        out[column] = AvroColumn(formats.registry_url, text, subject, True, formats.registry_config)
    return out


def _encoded(
    rows: pa.RecordBatch, topic: str, column: str, avro: dict[str, AvroColumn]
) -> pa.Array | None:
    array = _arrow_column(rows, column)
    spec = avro.get(column)
    if array is None or spec is None:
        return array
    subject = spec.subject or f"{topic}-{column}"
    ser = _avro.serializer(
        spec.url, subject, spec.schema, spec.auto_register, spec.registry_config
    )
    return _avro.encode_column(array, ser)


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


def produce_batches(
    opts: SinkOptions,
    batches: Iterable[pa.RecordBatch],
    transactional_id: str | None = None,
    avro: dict[str, AvroColumn] | None = None,
) -> tuple[dict[str, int], tuple[int, int] | None]:
    """Send every row with one producer (idempotent; transactional with ``transactional_id``);
    flush; raise on any failed send.

    One ``Producer.send_batch`` call per input Arrow batch (and target topic): the columns go
    to the client as Arrow arrays — value, key, partition, headers (with ``includeHeaders``) —
    and are partitioned and batched there exactly as per-row ``send`` would.

    With ``transactional_id`` the producer is created at the first row (a task with no rows
    opens no transaction), calls ``init_transactions()`` and ``begin_transaction()``, and the
    transaction is left open for the driver to commit. Returns (rows per target topic,
    (producer id, epoch) of the open transaction or None). ``avro``: the columns to encode in
    Avro (``avro_columns``)."""
    avro = avro or {}
    client = _client.client_module()
    config = {"enable.idempotence": "true", "acks": "all", **opts.config}
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    producer: Any = None
    pending: collections.deque[Any] = collections.deque()
    counts: dict[str, int] = collections.Counter()
    ident: tuple[int, int] | None = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if producer is None:
                producer = client.Producer(config)
                if transactional_id is not None:
                    producer.init_transactions()
                    producer.begin_transaction()
                    ident = producer.producer_id_and_epoch()
            for topic, rows in _split_by_topic(opts, batch):
                values = _encoded(rows, topic, "value", avro)
                assert values is not None
                pending.append(
                    producer.send_batch(
                        topic,
                        values,
                        keys=_encoded(rows, topic, "key", avro),
                        partitions=_arrow_column(rows, "partition"),
                        headers=_arrow_column(rows, "headers") if opts.include_headers else None,
                    )
                )
                counts[topic] += rows.num_rows
            while pending and pending[0].done():
                _check(pending.popleft())
        if producer is not None:
            producer.flush()
        while pending:
            _check(pending.popleft())
    finally:
        if producer is not None:
            producer.close(30)
    return dict(counts), ident


class OdradekBatchWriter(DataSourceArrowWriter):
    """``df.write.format("odradek")``: each task produces its rows and flushes."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, opts)
        self.opts = opts
        self.avro = avro_columns(opts, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        counts, _ = produce_batches(self.opts, iterator, avro=self.avro)
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
    # lazy: runs only inside a Spark task
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        raise RuntimeError("the odradek streaming sink must run inside a Spark task")
    query = tc.getLocalProperty("sql.streaming.queryId")
    batch = tc.getLocalProperty("streaming.sql.batchId")
    if query is None or batch is None:
        raise RuntimeError("no streaming query id / batch id in the task's local properties")
    return query, int(batch), tc.partitionId(), tc.attemptNumber()


def transactional_id(sink: str, task: int) -> str:
    """The transactional id of Spark partition ``task`` of streaming query ``sink``: the same
    for every batch and every attempt, so a new attempt fences the earlier ones."""
    return f"odradek-sink-{sink}-{task}"


@dataclass
class BatchOutcome:
    """What the commit topic says about a batch: committed, or decided (the latest intent:
    Spark partition -> (transactional id, producer id, epoch)), or neither."""

    committed: bool = False
    intent: dict[int, tuple[str, int, int]] | None = None


def read_batch_outcome(opts: SinkOptions, sink: str, batch: int) -> BatchOutcome:
    """Scan the commit topic backwards for the records of (sink, batch), newest first; stop
    at the commit record of an earlier batch of this sink (everything before it concerns
    earlier batches) or at the log start."""
    client = _client.client_module()
    tp = (opts.commit_topic, 0)
    lo = _client.list_offsets(opts.config, {tp: "earliest"}).get(tp, 0)
    hi = _client.list_offsets(opts.config, {tp: "latest"}).get(tp, 0)
    out = BatchOutcome()
    window = MARKER_SCAN_INITIAL
    end = hi
    key = sink.encode()
    consumer_config = _client.config_for("consumer", opts.config)
    consumer_config.pop("isolation.level", None)  # plain records: read_uncommitted is enough
    while end > lo:
        begin = max(lo, end - window)
        found: list[dict[str, Any]] = []
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
                if isinstance(m, dict):
                    found.append(m)
        for m in reversed(found):
            b = m.get("batch")
            if not isinstance(b, int):
                continue
            if m.get("kind") == "commit":
                if b >= batch:
                    out.committed = True
                    return out
                return out  # an earlier batch's commit: nothing older concerns this batch
            if m.get("kind") == "intent" and b == batch and out.intent is None:
                out.intent = {int(t): (str(x[0]), int(x[1]), int(x[2])) for t, x in m.get("txns", {}).items()}
        end = begin
        window *= 2
    return out


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


def _end_transaction(opts: SinkOptions, txn: tuple[str, int, int], committed: bool) -> None:
    tid, pid, epoch = txn
    _client.admin(opts.config).end_transaction(tid, pid, epoch, committed)


def _roll_forward(opts: SinkOptions, txn: tuple[str, int, int]) -> bool:
    """Commit a transaction named by an intent. True: its rows are committed (now or
    before); False: it was aborted (timed out, or fenced by a later attempt) — nothing of it
    is visible, so its rows must be written again."""
    errors = _client.client_module().errors
    try:
        _end_transaction(opts, txn, True)
        return True
    except errors.ProducerFencedError:
        return False
    except errors.KafkaError as exc:
        if exc.code in (48, 49):  # INVALID_TXN_STATE (aborted), INVALID_PRODUCER_ID_MAPPING
            return False
        raise


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("odradek")``: exactly once by two-phase commit over Kafka
    transactions (module doc), or at least once with ``exactlyOnce=false``."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, opts)
        self.opts = opts
        self.avro = avro_columns(opts, schema)
        if opts.exactly_once:
            ensure_commit_topic(opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        opts = self.opts
        if not opts.exactly_once:
            counts, _ = produce_batches(opts, iterator, avro=self.avro)
            return SinkCommitMessage(rows=sum(counts.values()), per_partition=counts)
        sink, batch, task, _attempt = _task_identity()
        outcome = read_batch_outcome(opts, sink, batch)
        done = outcome.committed
        if not done and outcome.intent is not None:
            txn = outcome.intent.get(task)
            # not in the intent: this task had no rows when the batch was decided
            done = txn is None or _roll_forward(opts, txn)
        if done:
            for _ in iterator:  # drain: Spark expects the input consumed
                pass
            return SinkCommitMessage(skipped=True, sink=sink, batch=batch, task=task)
        tid = transactional_id(sink, task)
        counts, ident = produce_batches(opts, iterator, tid, self.avro)
        fault(f"after-flush-{batch}-{task}")
        return SinkCommitMessage(
            rows=sum(counts.values()),
            sink=sink,
            batch=batch,
            task=task,
            per_partition=counts,
            txn=None if ident is None else (tid, ident[0], ident[1]),
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if not self.opts.exactly_once:
            return
        fault(f"commit-{batchId}")
        ours = [m for m in messages if isinstance(m, SinkCommitMessage) and m.sink]
        for sink in sorted({m.sink for m in ours if m.sink}):
            txns = {m.task: m.txn for m in ours if m.sink == sink and m.txn is not None and m.task is not None}
            if txns:
                _append_marker(self.opts, sink, {
                    "sink": sink, "batch": batchId, "kind": "intent",
                    "txns": {str(t): list(x) for t, x in sorted(txns.items())},
                })
                for t, txn in sorted(txns.items()):
                    fault(f"commit-txn-{batchId}-{t}")
                    _end_transaction(self.opts, txn, True)
            _append_marker(self.opts, sink, {
                "sink": sink, "batch": batchId, "kind": "commit", "tasks": len(messages),
                "rows": sum(m.rows for m in ours if m.sink == sink),
            })

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Abort the tasks' open transactions (best effort: a later attempt's
        ``init_transactions()`` or ``transaction.timeout.ms`` aborts them anyway)."""
        if not self.opts.exactly_once:
            return
        for m in messages:
            if isinstance(m, SinkCommitMessage) and m.txn is not None:
                try:
                    _end_transaction(self.opts, m.txn, False)
                except Exception as exc:
                    log.warning("odradek sink: aborting %s failed: %s", m.txn[0], exc)
