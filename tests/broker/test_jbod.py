"""Several ``log.dirs`` (JBOD) with real clients: AlterReplicaLogDirs (34) from kafka-python's
admin client while a confluent-kafka producer writes, DescribeLogDirs showing a future
replica, and a log dir that fails (ENOSPC on a small tmpfs the test mounts; root ignores
permissions, a full file system fails for root too) going offline alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError
from kafka.protocol.admin import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse

from broker.test_legacy_wire import OldWire
from broker.wire import Wire, create, fetch_request, produce_request, req
from odradek.broker.server import Broker
from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(100)


def _dirs_of(admin: KafkaAdminClient, topic: str) -> dict[tuple[int, bool], str]:
    """(partition, is_future_key) -> log dir, from DescribeLogDirs."""
    out: dict[tuple[int, bool], str] = {}
    for d in admin.describe_log_dirs()[0]["log_dirs"]:
        for t in d["topics"]:
            if t["name"] == topic:
                for p in t["partitions"]:
                    out[(p["partition_index"], p["is_future_key"])] = d["log_dir"]
    return out


def test_alter_replica_log_dirs_while_producing(tmp_path: Path) -> None:
    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    settings = {"log.dirs": f"{a},{b}", "log.segment.bytes": 65536, "num.partitions": 1}
    topic, parts, total = "mv", 4, 200_000
    with BrokerProcess(settings) as broker:
        bootstrap = broker.bootstrap_servers
        with Wire(bootstrap) as w:
            create(w, topic, parts)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        acked: list[int] = []
        errors: list[Any] = []

        def produce() -> None:
            p = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "batch.size": 16384,
                }
            )

            def done(err: Any, msg: Any) -> None:
                if err is None:
                    acked.append(int(msg.value()[1:].split(b"-")[0]))
                else:
                    errors.append(err)

            deadline = time.monotonic() + 40
            for i in range(total):
                if stop.is_set() or time.monotonic() > deadline:
                    break
                value = b"v%d-" % i + b"x" * 100
                while True:
                    try:
                        p.produce(topic, value, b"k%d" % i, partition=i % parts, on_delivery=done)
                        break
                    except BufferError:
                        p.poll(0.05)
                p.poll(0)
            assert p.flush(30) == 0

        stop = threading.Event()
        writer = threading.Thread(target=produce)
        writer.start()
        try:
            deadline = time.monotonic() + 20
            while len(acked) < 5_000 and time.monotonic() < deadline:
                time.sleep(0.02)
            before = _dirs_of(admin, topic)
            moves = {
                TopicPartitionReplica(topic, p, 0): str(b if before[(p, False)] == str(a) else a)
                for p in range(parts)
            }
            result = admin.alter_replica_log_dirs(moves)
            assert set(result.values()) == {NoError}
            seen_future = False
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                now = _dirs_of(admin, topic)
                seen_future = seen_future or any(future for _, future in now)
                if all(now.get((r.partition, False)) == d for r, d in moves.items()) and not any(
                    future for _, future in now
                ):
                    break
                time.sleep(0.05)
            assert all(now.get((r.partition, False)) == d for r, d in moves.items()), now
            acked_at_move = len(acked)
            deadline = time.monotonic() + 20  # writes go on after the swap
            while len(acked) < acked_at_move + 2_000 and time.monotonic() < deadline:
                time.sleep(0.02)
            stop.set()
            # what the admin client answers for a dir not in log.dirs, a partition not here
            bad = admin.alter_replica_log_dirs(
                {
                    TopicPartitionReplica(topic, 0, 0): str(tmp_path / "nowhere"),
                    TopicPartitionReplica(topic, 99, 0): str(a),
                }
            )
            assert bad[TopicPartitionReplica(topic, 0, 0)] is LogDirNotFoundError
            assert bad[TopicPartitionReplica(topic, 99, 0)] is ReplicaNotAvailableError
            # v0 (served through v1's handler): the partitions are where they were asked to be
            old = OldWire(bootstrap)
            try:
                r = old.call(
                    AlterReplicaLogDirsRequest,
                    AlterReplicaLogDirsResponse,
                    0,
                    {
                        "dirs": [
                            {
                                "path": moves[TopicPartitionReplica(topic, 0, 0)],
                                "topics": [{"name": topic, "partitions": [0]}],
                            }
                        ]
                    },
                )
            finally:
                old.close()
            assert r["results"][0]["partitions"][0]["error_code"] == 0
        finally:
            stop.set()
            writer.join(60)
            admin.close()
        assert not writer.is_alive() and errors == []
        assert len(acked) >= acked_at_move + 2_000
        for r, d in moves.items():  # the files are in the new dir, none in the old one
            assert list((Path(d) / f"{topic}-{r.partition}").glob("*.log"))
            other = a if Path(d) == b else b
            assert not (other / f"{topic}-{r.partition}").exists()
        # every acknowledged record is readable, in order per partition
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "mv", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < len(acked) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                value = m.value()
                assert m.error() is None and value is not None
                got.append(int(value[1:].split(b"-")[0]))
        consumer.close()
        assert sorted(got) == sorted(acked)
        assert len(got) == len(set(got))
        print(f"future replica seen in DescribeLogDirs: {seen_future}")


async def test_describe_log_dirs_shows_the_future_replica(tmp_path: Path) -> None:
    from odradek.broker.config import BrokerConfig

    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    config = BrokerConfig.from_properties(
        {"log.dirs": f"{a},{b}", "listeners": "PLAINTEXT://127.0.0.1:0", "http.listeners": ""}
    )
    async with Broker(config) as broker:
        addr = f"127.0.0.1:{broker.bound_port}"

        def setup(new: bool = True) -> None:
            with Wire(addr) as w:
                if new:
                    create(w, "fut")
                r = w.call(
                    produce_request("fut", 0, build_batch([(None, b"x" * 50, (), None)] * 9))
                )
                assert int(r.responses[0].partition_responses[0].error_code) == 0

        def describe() -> Any:
            with Wire(addr) as w:
                return w.call(req(35, 4, topics=None))

        import asyncio

        await asyncio.to_thread(setup)
        lm = broker.log_manager
        source = lm.log_dir_of("fut", 0)
        target = b if source == a else a
        future = lm.start_move("fut", 0, target)  # held: no task copies it
        assert future is not None
        future.copy(future.plan())
        lag_free = await asyncio.to_thread(describe)
        await asyncio.to_thread(setup, False)  # 9 more records, not copied yet
        response = await asyncio.to_thread(describe)
        rows = {
            (r.log_dir, t.name, int(p.partition_index), p.is_future_key): p
            for r in response.results
            for t in r.topics
            for p in t.partitions
        }
        current = rows[(str(source), "fut", 0, False)]
        moving = rows[(str(target), "fut", 0, True)]
        assert 0 < int(moving.partition_size) < int(current.partition_size)
        # the offsets from the first segment not wholly copied (here the only one)
        assert int(moving.offset_lag) == 18 and int(current.offset_lag) == 0
        copied = [p for r in lag_free.results for t in r.topics for p in t.partitions]
        assert [(bool(p.is_future_key), int(p.offset_lag)) for p in copied] == [
            (False, 0),
            (True, 0),
        ] or [(bool(p.is_future_key), int(p.offset_lag)) for p in copied] == [
            (True, 0),
            (False, 0),
        ]
        lm.cancel_move("fut", 0)


def test_a_full_log_dir_goes_offline_alone(tmp_path: Path, tmpfs: Any) -> None:
    big = (tmp_path / "big").resolve()
    with tmpfs(tmp_path / "small", "256k") as small_path:
        small = small_path.resolve()
        settings = {"log.dirs": f"{big},{small}", "num.partitions": 1}
        with BrokerProcess(settings) as broker:
            bootstrap = broker.bootstrap_servers
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
            try:
                with Wire(bootstrap) as w:
                    create(w, "f", 2)
                where = _dirs_of(admin, "f")
                doomed = next(p for p in (0, 1) if where[(p, False)] == str(small))
                healthy = 1 - doomed
                batch = build_batch([(None, b"y" * 1000, (), None)] * 20)
                codes: list[int] = []
                with Wire(bootstrap) as w:
                    for _ in range(40):  # 256 KiB fill up within 13 of these batches
                        r = w.call(produce_request("f", doomed, batch))
                        codes.append(int(r.responses[0].partition_responses[0].error_code))
                        if codes[-1]:
                            break
                    assert codes[-1] == 56, codes  # KAFKA_STORAGE_ERROR
                    assert set(codes[:-1]) == {0}
                    # the failed dir's partition stays offline; the other one serves on
                    r = w.call(produce_request("f", doomed, build_batch([(None, b"z", (), None)])))
                    assert int(r.responses[0].partition_responses[0].error_code) == 56
                    f = w.call(fetch_request("f", {doomed: 0}))
                    assert int(f.responses[0].partitions[0].error_code) == 56
                    r = w.call(produce_request("f", healthy, batch))
                    assert int(r.responses[0].partition_responses[0].error_code) == 0
                    f = w.call(fetch_request("f", {healthy: 0}))
                    assert int(f.responses[0].partitions[0].error_code) == 0
                    assert f.responses[0].partitions[0].records
                    # a new topic's partitions all go to the live dir
                    create(w, "g", 2)
                described = {d["log_dir"]: d for d in admin.describe_log_dirs()[0]["log_dirs"]}
                assert described[str(small)]["error_code"] == 56
                assert described[str(small)]["topics"] == []
                assert described[str(big)]["error_code"] == 0
                g = [t for t in described[str(big)]["topics"] if t["name"] == "g"]
                assert len(g[0]["partitions"]) == 2
                # no move into an offline dir
                moved = admin.alter_replica_log_dirs(
                    {TopicPartitionReplica("f", healthy, 0): str(small)}
                )
                assert moved[TopicPartitionReplica("f", healthy, 0)].errno == 56
            finally:
                admin.close()


def test_a_log_dir_that_cannot_be_opened_is_offline_from_the_start(tmp_path: Path) -> None:
    good = (tmp_path / "good").resolve()
    bad = (tmp_path / "bad").resolve()
    bad.write_text("a file where a directory is expected")
    with BrokerProcess({"log.dirs": f"{good},{bad}"}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            with Wire(broker.bootstrap_servers) as w:
                create(w, "s", 2)
                r = w.call(produce_request("s", 1, build_batch([(None, b"v", (), None)])))
                assert int(r.responses[0].partition_responses[0].error_code) == 0
            described = {d["log_dir"]: d for d in admin.describe_log_dirs()[0]["log_dirs"]}
            assert described[str(bad)]["error_code"] == 56
            assert described[str(good)]["error_code"] == 0
            assert {t["name"] for t in described[str(good)]["topics"]} == {"s"}
        finally:
            admin.close()


def test_alter_replica_log_dirs_refused_answers_each_partition() -> None:
    """Without ALTER on the cluster every partition named answers
    CLUSTER_AUTHORIZATION_FAILED (31): the response has no top-level error code."""
    from kio.schema.errors import ErrorCode

    from odradek.broker.apis import alter_replica_log_dirs
    from odradek.broker.registry import load_registry

    assert load_registry()[34].authorize is not None
    topics = (
        req(34, 2, "AlterReplicaLogDirTopic", name="a", partitions=(0, 1)),
        req(34, 2, "AlterReplicaLogDirTopic", name="b", partitions=(3,)),
    )
    dirs = (
        req(34, 2, "AlterReplicaLogDir", path="/x", topics=topics[:1]),
        req(34, 2, "AlterReplicaLogDir", path="/y", topics=topics[1:]),
    )
    refused = alter_replica_log_dirs._refuse(
        req(34, 2, dirs=dirs), ErrorCode.cluster_authorization_failed
    )
    assert [
        (t.topic_name, int(p.partition_index), int(p.error_code))
        for t in refused.results
        for p in t.partitions
    ] == [("a", 0, 31), ("a", 1, 31), ("b", 3, 31)]
