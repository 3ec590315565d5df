"""Offset translation from checkpoints, as MM2's ``RemoteClusterUtils.translateOffsets``.

Reads ``<source>.checkpoints.internal`` on the target cluster to its end and returns, for one
group, the latest checkpoint's downstream offset of every remote partition.
"""

from __future__ import annotations

from typing import Any

from odradek.client import TopicPartition
from odradek.client.aio import AsyncConsumer

from .policy import ReplicationPolicy
from .records import Checkpoint, RecordFormatError

__all__ = ["read_checkpoints", "translate_offsets"]


async def read_checkpoints(target_consumer_config: dict[str, Any], checkpoints_topic: str, timeout: float = 30.0) -> list[Checkpoint]:
    """Every checkpoint in ``checkpoints_topic`` (partition order, then offset order)."""
    import time

    config = {**target_consumer_config, "enable.auto.commit": "false", "auto.offset.reset": "earliest"}
    config.pop("group.id", None)
    out: list[Checkpoint] = []
    consumer = AsyncConsumer(config)
    await consumer.start()
    try:
        parts = await consumer.partitions_for_topic(checkpoints_topic)
        tps = [TopicPartition(checkpoints_topic, p) for p in sorted(parts)]
        if not tps:
            return out
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        deadline = time.monotonic() + timeout
        pending = {tp for tp in tps if ends[tp] > 0}
        while pending and time.monotonic() < deadline:
            for r in await consumer.poll(0.5):
                try:
                    out.append(Checkpoint.decode(r.key, r.value))
                except RecordFormatError:
                    continue
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        if pending:
            raise TimeoutError(f"{checkpoints_topic} not read to its end within {timeout:g} s")
        return out
    finally:
        await consumer.close(autocommit=False)


async def translate_offsets(target_consumer_config: dict[str, Any], source_alias: str, group: str,
                            policy: ReplicationPolicy | None = None, timeout: float = 30.0) -> dict[TopicPartition, int]:
    """{remote partition on the target: offset for ``group`` to resume at}."""
    policy = policy or ReplicationPolicy()
    latest: dict[TopicPartition, int] = {}
    for cp in await read_checkpoints(target_consumer_config, policy.checkpoints_topic(source_alias), timeout):
        if cp.group == group:
            latest[TopicPartition(cp.topic, cp.partition)] = cp.downstream_offset
    return latest
