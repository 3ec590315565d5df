"""Offset and partition planning for the ``odradek`` Spark source — pure functions.

Nothing here talks to a broker: the reader collects what it needs with one ListOffsets round
(earliest, latest, timestamps) and hands the answers to these functions. That keeps the Kafka
source's semantics testable without Spark or a broker.

Streaming offsets (what Spark checkpoints) are Kafka's source format, JSON
``{"topic": {"partition": next_offset_to_read}}``; partitions are strings in JSON.
An ``OffsetRange`` is half-open: ``[start, end)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.spark.options import DATA_LOSS_HINT, EARLIEST, LATEST, OffsetSpec

__all__ = [
    "DataLoss",
    "OffsetQuery",
    "OffsetRange",
    "TopicPartition",
    "apply_rate_limit",
    "check_data_loss",
    "offset_queries",
    "offsets_from_json",
    "offsets_to_json",
    "plan_ranges",
    "resolve_offsets",
    "split_ranges",
]

TopicPartition = tuple[str, int]
OffsetQuery = int | str
"""What to ask ListOffsets for a partition: "earliest", "latest" or a timestamp in ms."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records ``[start, end)`` of one topic-partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


class DataLoss(Exception):
    """Records the query needed are gone (retention, topic deleted/recreated)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"{detail}. {DATA_LOSS_HINT}")
        self.detail = detail


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(t, p): o} -> {"t": {"p": o}} (Kafka source's checkpoint format), sorted."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """Inverse of offsets_to_json; accepts int or str partition keys."""
    return {(str(t), int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}


def offset_queries(
    spec: OffsetSpec, partitions: Iterable[TopicPartition], *, option: str, strict: bool
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, OffsetQuery]]:
    """Split a spec into known offsets and ListOffsets queries, per partition.

    Returns (known, queries). ``strict`` (batch queries): a JSON spec must name every
    partition; otherwise unnamed partitions get "earliest" (new partitions in a stream).
    A JSON spec naming partitions that do not exist raises ValueError naming the option.
    """
    parts = sorted(set(partitions))
    known: dict[TopicPartition, int] = {}
    queries: dict[TopicPartition, OffsetQuery] = {}
    if spec.kind in ("earliest", "latest"):
        return known, dict.fromkeys(parts, spec.kind)
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        return known, dict.fromkeys(parts, spec.timestamp)
    given = spec.as_dict()
    missing_in_topic = sorted(set(given) - set(parts))
    if missing_in_topic:
        t, p = missing_in_topic[0]
        raise ValueError(f"option '{option}': {t}-{p} is not a partition of the subscription")
    for tp in parts:
        if tp not in given:
            if strict:
                raise ValueError(
                    f"option '{option}': no value for {tp[0]}-{tp[1]}; with a JSON spec every "
                    "subscribed partition must be listed"
                )
            queries[tp] = "earliest"
            continue
        v = given[tp]
        if spec.kind == "timestamps":
            queries[tp] = v
        elif v == EARLIEST:
            queries[tp] = "earliest"
        elif v == LATEST:
            queries[tp] = "latest"
        else:
            known[tp] = v
    return known, queries


def resolve_offsets(
    known: Mapping[TopicPartition, int],
    queries: Mapping[TopicPartition, OffsetQuery],
    answers: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    option: str,
    strategy: str = "error",
) -> dict[TopicPartition, int]:
    """Combine known offsets and ListOffsets answers into concrete offsets.

    ``answers[tp]`` is the ListOffsets answer for ``queries[tp]``: -1 when no record has a
    timestamp at or after the asked one. Then ``strategy`` "latest" uses ``latest[tp]``,
    "error" raises ValueError naming the option.
    """
    out = dict(known)
    for tp, q in queries.items():
        off = answers.get(tp, -1)
        if off < 0:
            if (isinstance(q, int) and strategy == "latest") or q == "latest":
                off = latest[tp]
            elif isinstance(q, int):
                raise ValueError(
                    f"option '{option}': no record of {tp[0]}-{tp[1]} has a timestamp at or "
                    f"after {q}; set startingOffsetsByTimestampStrategy=latest to start at the "
                    "latest offset instead"
                )
            else:
                raise ValueError(f"option '{option}': no {q} offset for {tp[0]}-{tp[1]}")
        out[tp] = off
    return out


def check_data_loss(
    start: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> tuple[dict[TopicPartition, int], list[str]]:
    """Compare where a query wants to read with what the log still holds.

    Returns (adjusted start, problems). A partition that is gone, a start below the log start
    offset (retention deleted unread records) or above the log end offset (topic recreated)
    is a problem; the adjusted start skips to what can be read (the Kafka source's behaviour
    with failOnDataLoss=false).
    """
    adjusted: dict[TopicPartition, int] = {}
    problems: list[str] = []
    for tp, s in sorted(start.items()):
        t, p = tp
        if tp not in earliest or tp not in latest:
            problems.append(f"partition {t}-{p} no longer exists")
            continue
        lo, hi = earliest[tp], latest[tp]
        if s < lo:
            problems.append(
                f"cannot read {t}-{p} from offset {s}: records up to offset {lo - 1} were "
                f"deleted; skipping {lo - s} record(s) to offset {lo}"
            )
            adjusted[tp] = lo
        elif s > hi:
            problems.append(
                f"offset {s} of {t}-{p} is past the log end offset {hi} (topic deleted and "
                f"recreated?); reading from offset {lo}"
            )
            adjusted[tp] = lo
        else:
            adjusted[tp] = s
    return adjusted, problems


def plan_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """One range per partition in ``end`` (partitions only in ``end`` start at 0 unless
    given in ``start``), empty ranges dropped, sorted by (topic, partition)."""
    out: list[OffsetRange] = []
    for (t, p), e in sorted(end.items()):
        s = start.get((t, p), 0)
        if e > s:
            out.append(OffsetRange(t, p, s, e))
    return out


def split_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Split ranges the way Kafka's KafkaOffsetRangeCalculator does.

    First ``maxRecordsPerPartition`` caps each piece; then, if ``minPartitions`` exceeds the
    number of pieces, each piece is split into ``max(round(size / total * minPartitions), 1)``
    parts (the last part of a range takes the rounding remainder). The union of the result is
    exactly the union of the input; pieces of one partition are consecutive.
    """
    pieces = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        capped: list[OffsetRange] = []
        for r in pieces:
            n = math.ceil(r.size / max_records_per_partition)
            capped.extend(_split(r, n))
        pieces = capped
    if min_partitions is None or min_partitions <= len(pieces):
        return pieces
    total = sum(r.size for r in pieces)
    out: list[OffsetRange] = []
    for r in pieces:
        n = max(round(r.size / total * min_partitions), 1)
        out.extend(_split(r, n))
    return out


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out: list[OffsetRange] = []
    remaining = r.size
    s = r.start
    for i in range(parts):
        this = remaining // (parts - i)
        remaining -= this
        e = min(s + this, r.end)
        if e > s:
            out.append(OffsetRange(r.topic, r.partition, s, e))
        s = e
    return out


def apply_rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """End offsets for one micro-batch reading at most ``limit`` records.

    Like Kafka's source the limit is shared in proportion to the backlog of each partition,
    but exactly: the result never reads more than ``limit`` records in total (Kafka's rounding
    up for tiny partitions can overshoot). When the limit allows, every partition with a
    backlog gets one record first (no starvation); the rest is shared by integer floors, and
    the leftover records go one each to the largest remainders (ties: larger backlog, name). Partitions
    absent from ``start`` start at 0.
    """
    backlog = {tp: e - start.get(tp, 0) for tp, e in latest.items() if e - start.get(tp, 0) > 0}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    grant: dict[TopicPartition, int] = {}
    if limit >= len(backlog):
        # Don't starve small partitions: one record each first, the rest in proportion.
        base = dict.fromkeys(backlog, 1)
        rest_backlog = {tp: n - 1 for tp, n in backlog.items()}
        limit -= len(backlog)
    else:
        base = dict.fromkeys(backlog, 0)
        rest_backlog = dict(backlog)
    rest_total = sum(rest_backlog.values())
    remainders: list[tuple[int, int, TopicPartition]] = []
    for tp, size in rest_backlog.items():
        share, rest = divmod(limit * size, rest_total) if rest_total else (0, 0)
        grant[tp] = base[tp] + share  # exact integer shares
        remainders.append((rest, size, tp))
    left = limit - sum(grant[tp] - base[tp] for tp in grant)
    for _rest, _size, tp in sorted(remainders, key=lambda x: (-x[0], -x[1], x[2]))[:left]:
        grant[tp] += 1
    out = dict(latest)
    for tp, g in grant.items():
        out[tp] = min(latest[tp], start.get(tp, 0) + g)
    return out
