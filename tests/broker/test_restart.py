"""Restarts keep everything: graceful (SIGTERM) and crash (SIGKILL), records, topics, configs,
topic ids and idempotent-producer state."""

from __future__ import annotations

import pytest

from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

from .wire import (
    Wire,
    create,
    fetch_request,
    fetched_values,
    init_producer_id_request,
    list_offsets_request,
    metadata_request,
    produce_request,
    req,
)

pytestmark = pytest.mark.timeout(90)


def _produce(w: Wire, topic: str, data: bytes, partition: int = 0) -> tuple[int, int]:
    r = w.call(produce_request(topic, partition, data))
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def _values(w: Wire, topic: str, partition: int = 0) -> list[bytes | None]:
    r = w.call(
        fetch_request(topic, {partition: 0}, max_bytes=100_000_000, partition_max_bytes=100_000_000)
    )
    return fetched_values(r.responses[0].partitions[0].records)


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_restart_keeps_records_topics_and_ids(fresh_broker: BrokerProcess, kill: bool) -> None:
    with Wire(fresh_broker.bootstrap_servers) as w:
        create(w, "keep", 3, {"retention.ms": "86400000000"})
        for p in range(3):
            for i in range(20):
                assert (
                    _produce(
                        w,
                        "keep",
                        build_batch([(b"k", b"v%d-%d" % (p, i), (), 1_700_000_000_000 + i)]),
                        p,
                    )[0]
                    == 0
                )
        before = w.call(metadata_request(["keep"]))
    port = fresh_broker.port
    fresh_broker.restart(kill=kill)
    assert fresh_broker.port == port
    with Wire(fresh_broker.bootstrap_servers) as w:
        after = w.call(metadata_request(["keep"], allow_auto=False))
        assert after.topics[0].topic_id == before.topics[0].topic_id
        assert len(after.topics[0].partitions) == 3
        for p in range(3):
            assert _values(w, "keep", p) == [b"v%d-%d" % (p, i) for i in range(20)]
        r = w.call(list_offsets_request("keep", {0: -1, 1: -2}))
        assert {int(x.partition_index): int(x.offset) for x in r.topics[0].partitions} == {
            0: 20,
            1: 0,
        }
        res = req(
            32,
            4,
            "DescribeConfigsResource",
            resource_type=2,
            resource_name="keep",
            configuration_keys=("retention.ms",),
        )
        r = w.call(
            req(32, 4, resources=(res,), include_synonyms=False, include_documentation=False)
        )
        assert r.results[0].configs[0].value == "86400000000"
        # appends continue at the right offset
        assert _produce(w, "keep", build_batch([(None, b"after", (), None)])) == (0, 20)


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_idempotent_state_survives_restart(fresh_broker: BrokerProcess, kill: bool) -> None:
    with Wire(fresh_broker.bootstrap_servers) as w:
        create(w, "idem")
        r = w.call(init_producer_id_request())
        pid, epoch = int(r.producer_id), int(r.producer_epoch)
        batches = [
            build_batch(
                [(None, b"m%d" % i, (), None)],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=i,
            )
            for i in range(4)
        ]
        for i, b in enumerate(batches):
            assert _produce(w, "idem", b) == (0, i)
    fresh_broker.restart(kill=kill)
    with Wire(fresh_broker.bootstrap_servers) as w:
        # retries of the last batches are recognised as duplicates
        assert _produce(w, "idem", batches[3]) == (0, 3)
        assert _produce(w, "idem", batches[2]) == (0, 2)
        gap = build_batch(
            [(None, b"gap", (), None)], producer_id=pid, producer_epoch=epoch, base_sequence=9
        )
        assert _produce(w, "idem", gap)[0] == 45
        nxt = build_batch(
            [(None, b"m4", (), None)], producer_id=pid, producer_epoch=epoch, base_sequence=4
        )
        assert _produce(w, "idem", nxt) == (0, 4)
        assert _values(w, "idem") == [b"m%d" % i for i in range(5)]
        # producer ids are never handed out twice
        assert int(w.call(init_producer_id_request()).producer_id) != pid


def test_memory_engine_starts_empty_after_restart() -> None:
    with BrokerProcess({"storage.engine": "memory"}) as b:
        with Wire(b.bootstrap_servers) as w:
            create(w, "mem")
            assert _produce(w, "mem", build_batch([(None, b"x", (), None)])) == (0, 0)
        b.restart()
        with Wire(b.bootstrap_servers) as w:
            r = w.call(metadata_request(["mem"], allow_auto=False))
            assert int(r.topics[0].error_code) == 3


def test_sigint_is_graceful(fresh_broker: BrokerProcess) -> None:
    import signal

    with Wire(fresh_broker.bootstrap_servers) as w:
        create(w, "int")
        assert _produce(w, "int", build_batch([(None, b"x", (), None)])) == (0, 0)
    assert fresh_broker.proc is not None
    fresh_broker.proc.send_signal(signal.SIGINT)
    assert fresh_broker.proc.wait(20) == 0
    fresh_broker.stop()
    # a graceful stop wrote the checkpoints: the recovery point covers the record
    checkpoint = (
        (fresh_broker.data_dir / "recovery-point-offset-checkpoint").read_text().split("\n")
    )
    assert "int 0 1" in checkpoint
    fresh_broker.restart()
    with Wire(fresh_broker.bootstrap_servers) as w:
        assert _values(w, "int") == [b"x"]


@pytest.mark.parametrize(
    "fresh_broker", [{"log.flush.offset.checkpoint.interval.ms": 200}], indirect=True
)
def test_periodic_checkpoints_and_producer_snapshots(fresh_broker: BrokerProcess) -> None:
    import json
    import time

    with Wire(fresh_broker.bootstrap_servers) as w:
        create(w, "snap")
        r = w.call(init_producer_id_request())
        pid = int(r.producer_id)
        b0 = build_batch(
            [(None, b"a", (), None)], producer_id=pid, producer_epoch=0, base_sequence=0
        )
        assert _produce(w, "snap", b0) == (0, 0)
        assert _produce(w, "snap", build_batch([(None, b"plain", (), None)])) == (0, 1)
    snapshot = fresh_broker.data_dir / "odradek-producer-state" / "snap-0.json"
    checkpoint = fresh_broker.data_dir / "replication-offset-checkpoint"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if (
            snapshot.exists()
            and json.loads(snapshot.read_text() or "{}").get("offset") == 2
            and checkpoint.exists()
            and "snap 0 2" in checkpoint.read_text()
        ):  # the snapshot of the first append alone (offset 1) may be written first
            break
        time.sleep(0.05)
    state = json.loads(snapshot.read_text())
    assert state["offset"] == 2 and str(pid) in state["producers"]
    assert "snap 0 2" in checkpoint.read_text().split("\n")
    fresh_broker.restart(kill=True)
    with Wire(fresh_broker.bootstrap_servers) as w:
        assert _produce(w, "snap", b0) == (0, 0)  # still a duplicate
