"""The mirror flows that target this cluster, derived from what the cluster itself holds.

No connection to the source cluster or to the mirror process: a flow ``S->T`` into this cluster
leaves, here (docs/mirroring.md):

* ``heartbeats``: ``Heartbeat(S, T, timestamp)`` records every few seconds while it runs; the
  newest one per (S, T) says the flow is alive and when it last was;
* ``S.checkpoints.internal``: ``Checkpoint(group, remote topic, partition, upstream, downstream)``
  records; their newest record's timestamp is the last checkpoint, and each (group, topic,
  partition)'s latest translation is listed;
* remote topics named by the replication policy (DefaultReplicationPolicy: ``S.<topic>``); the
  newest record timestamp among them gives the age of the newest record mirrored (records keep
  the source's timestamps);
* with ``odradek mirror``, the group ``__mirror.S->T`` whose committed offsets are the source
  positions per remote partition, each with ``hw=<source high watermark>`` metadata: lag is the
  sum of ``hw - position`` (as of each partition's last commit). Flows of other MM2
  implementations have no such group: their lag shows as unknown.

Only the tail of the heartbeats and checkpoints topics is read (``TAIL`` records per partition),
so the page costs a few fetches however long the flows have run.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from odradek.client import TopicPartition
from odradek.metrics.cluster import ClusterSnapshot
from odradek.mirror.records import Checkpoint, Heartbeat, RecordFormatError

__all__ = ["CheckpointView", "FlowView", "mirror_flows"]

TAIL = 200
HEARTBEATS = "heartbeats"
CHECKPOINTS_SUFFIX = ".checkpoints.internal"
POSITIONS_PREFIX = "__mirror."


@dataclass
class CheckpointView:
    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    at_ms: int


@dataclass
class FlowView:
    source: str
    target: str
    last_heartbeat_ms: int = -1
    last_checkpoint_ms: int = -1
    newest_record_ms: int = -1
    lag: int | None = None  # records, summed over partitions; None: unknown
    remote_topics: list[tuple[str, int, int]] = field(default_factory=list)  # (topic, partitions, offsets in the logs: records and transaction markers)
    checkpoints: list[CheckpointView] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"


async def _tail(source: Any, snap: ClusterSnapshot, topic: str) -> list[Any]:
    t = snap.topics.get(topic)
    if t is None:
        return []
    out: list[Any] = []
    for p in t.partitions:
        if p.current <= p.oldest:
            continue
        start = max(p.oldest, p.current - TAIL)
        out.extend(await source.read(topic, p.partition, offset=start, limit=min(TAIL, p.current - start), timeout_s=0.5))
    return out


def _hw(metadata: str) -> int | None:
    for part in metadata.split(","):
        k, _, v = part.strip().partition("=")
        if k == "hw" and v.lstrip("-").isdigit():
            return int(v)
    return None


async def mirror_flows(source: Any, snap: ClusterSnapshot, *, separator: str = ".") -> list[FlowView]:
    """The flows into the cluster of ``snap`` (``source`` is its ``ClusterSource``), by name."""
    flows: dict[tuple[str, str], FlowView] = {}
    for r in await _tail(source, snap, HEARTBEATS):
        with contextlib.suppress(RecordFormatError):
            hb = Heartbeat.decode(r.key, r.value)
            f = flows.setdefault((hb.source_cluster_alias, hb.target_cluster_alias),
                                 FlowView(hb.source_cluster_alias, hb.target_cluster_alias))
            f.last_heartbeat_ms = max(f.last_heartbeat_ms, hb.timestamp)
    targets = {t for _s, t in flows}
    sources = {s for s, _t in flows}
    for name in snap.topics:
        if name.endswith(CHECKPOINTS_SUFFIX) and name != CHECKPOINTS_SUFFIX:
            sources.add(name[: -len(CHECKPOINTS_SUFFIX)])
    for gid in snap.groups:
        if gid.startswith(POSITIONS_PREFIX) and "->" in gid:
            s, _, t = gid[len(POSITIONS_PREFIX):].partition("->")
            sources.add(s)
            targets.add(t)
    for s in sources:  # a source seen only by its checkpoints: the target alias is unknown
        if not any(fs == s for fs, _ in flows):
            t = next(iter(targets)) if len(targets) == 1 else "?"
            flows[(s, t)] = FlowView(s, t)
    for (s, t), f in flows.items():
        prefix = s + separator
        for name, topic in sorted(snap.topics.items()):
            if not name.startswith(prefix) or name.endswith((".internal", "-internal")):
                continue
            records = sum(max(0, p.current - p.oldest) for p in topic.partitions)
            f.remote_topics.append((name, len(topic.partitions), records))
            for p in topic.partitions:
                if p.current > p.oldest:
                    # one of the last two offsets (the last may be a transaction marker)
                    tail = await source.read(name, p.partition, offset=max(p.oldest, p.current - 2), limit=1, timeout_s=0.5)
                    if tail:
                        f.newest_record_ms = max(f.newest_record_ms, tail[-1].timestamp)
        latest: dict[tuple[str, str, int], CheckpointView] = {}
        for r in await _tail(source, snap, s + CHECKPOINTS_SUFFIX):
            with contextlib.suppress(RecordFormatError):
                cp = Checkpoint.decode(r.key, r.value)
                latest[(cp.group, cp.topic, cp.partition)] = CheckpointView(
                    cp.group, cp.topic, cp.partition, cp.upstream_offset, cp.downstream_offset, r.timestamp)
                f.last_checkpoint_ms = max(f.last_checkpoint_ms, r.timestamp)
        f.checkpoints = [latest[k] for k in sorted(latest)]
        f.lag = await _lag(source, f"{POSITIONS_PREFIX}{s}->{t}", snap)
    return [flows[k] for k in sorted(flows)]


async def _lag(source: Any, group: str, snap: ClusterSnapshot) -> int | None:
    if group not in snap.groups:
        return None
    admin = await source.admin()
    committed: dict[TopicPartition, Any] = await admin.list_group_offsets(group)
    total, known = 0, False
    for om in committed.values():
        if om is None or om.offset < 0:
            continue
        hw = _hw(om.metadata or "")
        if hw is not None:
            total += max(0, hw - om.offset)
            known = True
    return total if known else None
