"""The replica layer keeps each partition directory's ``partition.metadata`` (KIP-516): alone
it writes the metadata store's topic id; in a cluster the id LeaderAndIsr names, and a
LeaderAndIsr naming another id than the directory's gets INCONSISTENT_TOPIC_ID (the log is
another topic's, left by one deleted under the same name)."""

from __future__ import annotations

import uuid
from pathlib import Path

from kio.schema.errors import ErrorCode

from odradek.broker.local_metadata_store import LocalMetadataStore
from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_manager import LeaderAndIsrPartition, ReplicaManager
from odradek.clock import ManualClock
from odradek.storage import LogConfig, LogManager
from odradek.storage.partition_metadata import read_partition_metadata

from .test_decisions import LocalAlterPartition


def _manager(metadata: LocalMetadataStore, log_dir: Path, cluster: bool) -> ReplicaManager:
    clock = ManualClock()
    return ReplicaManager(
        metadata,
        LogManager([log_dir], clock=clock),
        LogConfig(),
        Purgatory(),
        None,
        clock=clock,
        alter_partition_manager=LocalAlterPartition() if cluster else None,
    )


def _lead(epoch: int) -> list[LeaderAndIsrPartition]:
    return [
        LeaderAndIsrPartition(
            "t", 0, leader=1, leader_epoch=epoch, isr=[1], partition_epoch=epoch, replicas=[1]
        )
    ]


async def test_alone_the_store_id_is_written(tmp_path: Path) -> None:
    metadata = LocalMetadataStore(1, None)
    topic = await metadata.create_topic("t", {0: [1], 1: [1]})
    rm = _manager(metadata, tmp_path, cluster=False)
    try:
        rm.open_topic(topic)
        for p in (0, 1):
            assert read_partition_metadata(tmp_path / f"t-{p}") == topic.topic_id
    finally:
        rm.log_manager.close()


async def test_leader_and_isr_writes_the_id_and_refuses_another(tmp_path: Path) -> None:
    metadata = LocalMetadataStore(1, None)
    await metadata.create_topic("t", {0: [1]})
    first, other = uuid.uuid4(), uuid.uuid4()
    rm = _manager(metadata, tmp_path, cluster=True)
    try:
        assert rm.become_leader_or_follower(0, 1, _lead(0), [], {"t": first}) == {
            ("t", 0): ErrorCode.none
        }
        assert read_partition_metadata(tmp_path / "t-0") == first
        # a newer LeaderAndIsr naming another topic id: this log is not that topic's
        got = rm.become_leader_or_follower(0, 1, _lead(1), [], {"t": other})
        assert got == {("t", 0): ErrorCode.inconsistent_topic_id}
        assert read_partition_metadata(tmp_path / "t-0") == first
        # the zero id (a topic the controller has not given an id yet) is not checked
        zero = uuid.UUID(int=0)
        assert rm.become_leader_or_follower(0, 1, _lead(2), [], {"t": zero}) == {
            ("t", 0): ErrorCode.none
        }
    finally:
        rm.log_manager.close()


async def test_a_replica_under_another_topic_id_is_inconsistent(tmp_path: Path) -> None:
    """What a Fetch v13+ answers INCONSISTENT_TOPIC_ID for: a local replica that a
    LeaderAndIsr created under another id than the metadata image's. Partitions without a
    local replica are not; alone the store's id is the only one, so nothing is."""
    metadata = LocalMetadataStore(1, None)
    await metadata.create_topic("t", {0: [1], 1: [1]})
    named, image = uuid.uuid4(), uuid.uuid4()
    rm = _manager(metadata, tmp_path / "cluster", cluster=True)
    try:
        assert not rm.has_inconsistent_topic_id("t", image, [0, 1])  # no replica here yet
        assert rm.become_leader_or_follower(0, 1, _lead(0), [], {"t": named}) == {
            ("t", 0): ErrorCode.none
        }
        assert rm.has_inconsistent_topic_id("t", image, [0, 1])
        assert not rm.has_inconsistent_topic_id("t", named, [0, 1])
        assert not rm.has_inconsistent_topic_id("t", image, [1])  # no replica of partition 1
    finally:
        rm.log_manager.close()
    alone = _manager(metadata, tmp_path / "alone", cluster=False)
    try:
        alone.become_leader_or_follower(0, 1, _lead(0), [], {"t": named})
        assert not alone.has_inconsistent_topic_id("t", image, [0, 1])
    finally:
        alone.log_manager.close()
