"""Group offsets committed inside a transaction (TxnOffsetCommit, KIP-98 / KIP-447), pending
until the transaction's marker reaches the group's ``__consumer_offsets`` partition.

The group coordinator writes a TxnOffsetCommit as an ordinary OffsetCommitRecord batch carrying
the transaction's producer id and epoch with the transactional bit set. Replaying such a record
does not change the group's committed offsets: it is added here, per producer id. The COMMIT
marker of that producer on the partition returns the pending offsets so the caller makes them
the group's committed offsets; the ABORT marker drops them (Kafka's
``GroupMetadata.completePendingTxnOffsetCommit``). While any is pending, OffsetFetch with
``require_stable`` (v7+) answers UNSTABLE_OFFSET_COMMIT (88) for those partitions.

Ordering (Kafka's rule): a pending offset replaces the committed one only if its record lies
after the committed record in the log, so a plain OffsetCommit appended after the
TxnOffsetCommit but before the marker wins. ``complete`` returns each offset with the log offset
of its record for that comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.records import OffsetAndMetadata

__all__ = ["PendingOffset", "PendingTransactionalOffsets", "should_materialize"]


@dataclass(frozen=True, slots=True)
class PendingOffset:
    group_id: str
    topic: str
    partition: int
    value: OffsetAndMetadata
    record_offset: int  # the log offset of its OffsetCommitRecord in __consumer_offsets


class PendingTransactionalOffsets:
    """Transactional offset commits of one ``__consumer_offsets`` partition, per producer id."""

    def __init__(self) -> None:
        # producer id -> (group, topic, partition) -> the latest pending commit
        self.pending: dict[int, dict[tuple[str, str, int], PendingOffset]] = {}

    def add(self, producer_id: int, offset: PendingOffset) -> None:
        """Replay of a transactional OffsetCommitRecord (a later one for the same partition
        in the same transaction replaces the earlier)."""
        key = (offset.group_id, offset.topic, offset.partition)
        self.pending.setdefault(producer_id, {})[key] = offset

    def complete(self, producer_id: int, committed: bool) -> list[PendingOffset]:
        """Replay of the producer's COMMIT/ABORT marker: the offsets to materialize (empty on
        abort), in (group, topic, partition) order."""
        offsets = self.pending.pop(producer_id, {})
        if not committed:
            return []
        return [offsets[k] for k in sorted(offsets)]

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in by_key for by_key in self.pending.values())

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        return {(t, p) for by_key in self.pending.values() for (g, t, p) in by_key if g == group_id}

    def remove_group(self, group_id: str) -> None:
        """DeleteGroups / group expiry: forget its pending offsets."""
        for pid in list(self.pending):
            kept = {k: v for k, v in self.pending[pid].items() if k[0] != group_id}
            if kept:
                self.pending[pid] = kept
            else:
                del self.pending[pid]


def should_materialize(pending: PendingOffset, committed_record_offset: int | None) -> bool:
    """Kafka's rule: the pending offset wins unless a plain commit was appended after it."""
    return committed_record_offset is None or pending.record_offset > committed_record_offset
