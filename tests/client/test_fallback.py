"""The pure-Python twins (no compiled ``_speedups``) give the same results end to end."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import odradek.client.aio._accumulator as accumulator_mod
import odradek.client.aio._sender as sender_mod
import odradek.client.aio.consumer as consumer_mod
import odradek.client.columnar as columnar_mod
from odradek.client import Consumer, Producer, TopicPartition, read_range_arrow

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["compiled", "python"])
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        for mod in (consumer_mod, accumulator_mod, sender_mod, columnar_mod):
            monkeypatch.setattr(mod, "_speedups", None)
    elif consumer_mod._speedups is None:
        pytest.skip("compiled twin not built")
    return str(request.param)


def test_roundtrip(broker: Any, twin: str) -> None:
    name = f"fb-{uuid.uuid4().hex[:8]}"
    recs = [(b"k%d" % (i % 5) if i % 3 else None, b"v%d" % i, [("n", b"%d" % i)] if i % 2 else None, 1_700_000_000_000 + i) for i in range(500)]
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": "snappy" if twin == "python" else "none"}) as p:
        for k, v, h, ts in recs:
            p.send(name, v, key=k, headers=h, timestamp=ts, partition=0)
        p.flush()
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(name, 0)])
        got: list[Any] = []
        while len(got) < 500:
            batch = c.poll(5.0)
            assert batch
            got += batch
    assert [(r.key, r.value, r.headers, r.timestamp, r.offset) for r in got] == [
        (k, v, list(h or []), ts, i) for i, (k, v, h, ts) in enumerate(recs)
    ]
    rows = [r for b in read_range_arrow({"bootstrap.servers": broker.bootstrap_servers}, name, 0, 3, 500, include_headers=True) for r in b.to_pylist()]
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [(i, recs[i][0], recs[i][1]) for i in range(3, 500)]
    assert rows[0]["headers"] == [{"key": "n", "value": b"3"}]
