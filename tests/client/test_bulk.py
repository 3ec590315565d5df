"""Producer.send_batch (columnar bulk append) against send row by row.

Offline part: two unstarted AsyncProducers with the same seeded ``random`` (the sticky
partitioner's only source of choice) get the same rows, one through ``_append`` per row (what
``send`` does), one through ``send_batch``'s ``_prepare_columns``/``_append_rows``; their
accumulators must hold the same batches (partition, record tuples, order) and encode to the same
bytes, with the compiled and the pure-Python encoder. Online part: both against a broker, read
back.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import odradek.client.aio._accumulator as accumulator_mod
import odradek.client.aio._sender as sender_mod
from odradek.client import Admin, Consumer, KafkaError, NewTopic, Producer, TopicPartition
from odradek.client.aio import AsyncProducer

pytestmark = pytest.mark.timeout(90)

NPARTS = 5


def _offline(**config: Any) -> AsyncProducer:
    p = AsyncProducer({"bootstrap.servers": "127.0.0.1:1", **config})
    p._idem.set_producer_id(4242, 3)
    return p


def _rows_via_send(p: AsyncProducer, topic: str, cols: dict[str, Any], n: int, seed: int) -> None:
    random.seed(seed)
    for i in range(n):
        p._append(
            topic,
            cols["values"][i],
            None if cols.get("keys") is None else cols["keys"][i],
            None if cols.get("headers") is None else cols["headers"][i],
            None if cols.get("partitions") is None else cols["partitions"][i],
            None if cols.get("timestamps") is None else cols["timestamps"][i],
            NPARTS,
            block=True,
        )


def _rows_via_batch(
    p: AsyncProducer, topic: str, cols: dict[str, Any], seed: int, chunks: int = 1
) -> list[Any]:
    """send_batch's synchronous core, the columns cut into ``chunks`` calls."""
    random.seed(seed)
    n = len(cols["values"])
    segs: list[Any] = []
    bounds = [n * c // chunks for c in range(chunks + 1)]
    for lo, hi in itertools.pairwise(bounds):
        part = {k: (None if v is None else v[lo:hi]) for k, v in cols.items()}
        recs, sizes, ps, nk, _tss = p._prepare_columns(
            topic,
            part["values"],
            part.get("keys"),
            part.get("partitions"),
            part.get("headers"),
            part.get("timestamps"),
            NPARTS,
        )
        for a, b in p._slices(sizes):
            segs.append(p._append_rows(topic, recs, sizes, ps, nk, a, b, NPARTS, block=True))
    return segs


def _state(p: AsyncProducer) -> dict[int, list[tuple[list[Any], bytes]]]:
    out: dict[int, list[tuple[list[Any], bytes]]] = {}
    for tp, q in sorted(p._acc.queues.items()):
        for b in q:
            p._sender.encode(b)
            assert b.encoded is not None
            out.setdefault(tp.partition, []).append((list(b.records), bytes(b.encoded)))
    return out


def _assert_same(
    cols: dict[str, Any], seed: int = 7, chunks: int = 1, **config: Any
) -> dict[int, Any]:
    topic = "t"
    a, b = _offline(**config), _offline(**config)
    n = len(cols["values"])
    _rows_via_send(a, topic, cols, n, seed)
    _rows_via_batch(b, topic, cols, seed, chunks)
    assert a._acc.used == b._acc.used
    sa, sb = _state(a), _state(b)
    assert sa == sb
    assert a._acc.sticky == b._acc.sticky
    return sa


def _cols(
    n: int, *, keys: bool, parts: bool, headers: bool, ts: bool, size: int = 100
) -> dict[str, Any]:
    return {
        "values": [b"v%05d" % i + b"x" * (size + i % 7) for i in range(n)],
        "keys": [None if i % 4 == 0 else b"key-%d" % (i % 37) for i in range(n)] if keys else None,
        "partitions": [None if i % 3 else i % NPARTS for i in range(n)] if parts else None,
        "headers": [[("h", b"%d" % i), ("e", None)] if i % 2 else None for i in range(n)]
        if headers
        else None,
        "timestamps": [1_700_000_000_000 + i for i in range(n)] if ts else None,
    }


@pytest.mark.parametrize("keys", [False, True])
@pytest.mark.parametrize("parts", [False, True])
@pytest.mark.parametrize("headers", [False, True])
def test_same_batches_as_send(keys: bool, parts: bool, headers: bool) -> None:
    cols = _cols(3000, keys=keys, parts=parts, headers=headers, ts=True)
    state = _assert_same(cols, **{"batch.size": 4096})
    assert sum(len(r) for bs in state.values() for r, _ in bs) == 3000
    if not keys and not parts:  # sticky: the partition moved on as batches filled
        assert len(state) > 1


@pytest.mark.parametrize(
    "config",
    [
        {"partitioner.class": "round_robin"},
        {"partitioner.class": "sticky"},
        {"partitioner.ignore.keys": "true"},
        {"batch.size": 1},  # every record its own batch
        {"buffer.memory": 200_000},  # send_batch appends in slices of <= 50,000 bytes
        {"compression.type": "lz4", "batch.size": 2048},
    ],
)
def test_same_batches_as_send_other_configs(config: dict[str, Any]) -> None:
    _assert_same(_cols(800, keys=True, parts=False, headers=False, ts=True), **config)
    _assert_same(_cols(800, keys=False, parts=False, headers=False, ts=True), **config)


def test_pure_python_encoder_gives_identical_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    cols = _cols(2000, keys=True, parts=True, headers=True, ts=True)
    if sender_mod._speedups is None:
        pytest.skip("compiled twin not built")
    compiled = _assert_same(cols, **{"batch.size": 8192})
    monkeypatch.setattr(sender_mod, "_speedups", None)
    monkeypatch.setattr(accumulator_mod, "_speedups", None)
    python = _assert_same(cols, **{"batch.size": 8192})
    assert compiled == python


def test_arrow_columns_same_as_lists() -> None:
    n = 1000
    cols = _cols(n, keys=True, parts=True, headers=True, ts=True)
    lists = _assert_same(cols, **{"batch.size": 4096})
    header_type = pa.list_(
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    )
    arrow = {
        "values": pa.array([v.decode() for v in cols["values"]], pa.string()),
        "keys": pa.array(cols["keys"], pa.binary()),
        "partitions": pa.array(cols["partitions"], pa.int32()),
        "headers": pa.array(
            [
                None if h is None else [{"key": k, "value": v} for k, v in h]
                for h in cols["headers"]
            ],
            header_type,
        ),
        "timestamps": pa.array(cols["timestamps"], pa.timestamp("ms", tz="UTC")),
    }
    b = _offline(**{"batch.size": 4096})
    random.seed(7)
    recs, sizes, ps, nk, _ = b._prepare_columns(
        "t",
        arrow["values"],
        arrow["keys"],
        arrow["partitions"],
        arrow["headers"],
        arrow["timestamps"],
        NPARTS,
    )
    for lo, hi in b._slices(sizes):
        b._append_rows("t", recs, sizes, ps, nk, lo, hi, NPARTS, block=True)
    assert _state(b) == lists


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=12)),
            st.one_of(st.none(), st.binary(max_size=300)),
            st.one_of(st.none(), st.integers(0, NPARTS - 1)),
            st.one_of(
                st.none(),
                st.lists(
                    st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=8))),
                    max_size=2,
                ),
            ),
            st.integers(0, 2**41),
        ),
        max_size=120,
    ),
    batch_size=st.sampled_from([1, 200, 1000, 16384]),
    chunks=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_same_batches_as_send_hypothesis(
    rows: list[Any], batch_size: int, chunks: int, seed: int
) -> None:
    cols = {
        "keys": [r[0] for r in rows],
        "values": [r[1] for r in rows],
        "partitions": [r[2] for r in rows],
        "headers": [r[3] for r in rows],
        "timestamps": [r[4] for r in rows],
    }
    _assert_same(cols, seed=seed, chunks=chunks, **{"batch.size": batch_size})
    no_keys = {"values": cols["values"], "timestamps": cols["timestamps"]}
    _assert_same(no_keys, seed=seed, chunks=chunks, **{"batch.size": batch_size})


def test_validation_appends_nothing() -> None:
    p = _offline()
    with pytest.raises(KafkaError):
        p._prepare_columns("t", [b"a", b"b"], None, [0, NPARTS], None, None, NPARTS)
    with pytest.raises(ValueError):
        p._prepare_columns("t", [b"a", b"b"], [b"k"], None, None, None, NPARTS)
    with pytest.raises(KafkaError):
        p._prepare_columns("t", [b"a", b"x" * 2_000_000], None, None, None, None, NPARTS)
    assert not p._acc.queues and p._acc.used == 0


# -- against the broker -----------------------------------------------------------------------
def _create(broker: Any, partitions: int) -> str:
    name = f"bulk-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def _read(broker: Any, topic: str, partitions: int, n: int) -> dict[int, list[Any]]:
    got: dict[int, list[Any]] = {}
    with Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}
    ) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        count = 0
        for _ in range(200):
            if count >= n:
                break
            for r in c.poll(0.5):
                got.setdefault(r.partition, []).append(
                    (r.offset, r.key, r.value, list(r.headers or []), r.timestamp)
                )
                count += 1
    return got


def test_send_batch_and_send_write_the_same_records(broker: Any) -> None:
    n = 5000
    cols = _cols(n, keys=True, parts=True, headers=True, ts=True)
    # null keys get an explicit partition here: the sticky choice is random per topic
    cols["partitions"] = [
        i % NPARTS if k is None else p
        for i, (k, p) in enumerate(zip(cols["keys"], cols["partitions"], strict=True))
    ]
    t1, t2 = _create(broker, NPARTS), _create(broker, NPARTS)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5}) as p:
        futs = [
            p.send(
                t1,
                cols["values"][i],
                key=cols["keys"][i],
                headers=cols["headers"][i],
                partition=cols["partitions"][i],
                timestamp=cols["timestamps"][i],
            )
            for i in range(n)
        ]
        bulk = p.send_batch(
            t2,
            cols["values"],
            keys=cols["keys"],
            partitions=cols["partitions"],
            headers=cols["headers"],
            timestamps=cols["timestamps"],
        )
        p.flush()
        singles = [f.result(10) for f in futs]
        mds = bulk.result(10)
    assert [(m.partition, m.offset, m.timestamp) for m in mds] == [
        (m.partition, m.offset, m.timestamp) for m in singles
    ]
    assert bulk.partitions == [m.partition for m in singles]
    assert _read(broker, t1, NPARTS, n) == _read(broker, t2, NPARTS, n)


def test_async_send_batch_arrow_values_only(broker: Any) -> None:
    topic = _create(broker, 3)
    values = pa.array([b"row-%d" % i for i in range(20000)], pa.binary())

    async def go() -> list[Any]:
        async with AsyncProducer(
            {"bootstrap.servers": broker.bootstrap_servers, "buffer.memory": 100_000}
        ) as p:
            fut = await p.send_batch(topic, values)
            return await fut

    mds = asyncio.run(go())
    assert len(mds) == 20000
    got = _read(broker, topic, 3, 20000)
    assert sum(len(v) for v in got.values()) == 20000
    by_value = {r[2]: (p, r[0]) for p, rs in got.items() for r in rs}
    for i, m in enumerate(mds):
        assert by_value[b"row-%d" % i] == (m.partition, m.offset)
    for rs in got.values():  # per partition, in input order
        idx = [int(r[2][4:]) for r in rs]
        assert idx == sorted(idx)
