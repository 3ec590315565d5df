"""Offsets committed inside a transaction: visible only on commit (KIP-447)."""

from __future__ import annotations

from odradek.coordinator.records import OffsetAndMetadata
from odradek.coordinator.transaction.offsets import (
    PendingOffset,
    PendingTransactionalOffsets,
    should_materialize,
)


def _po(group: str, topic: str, p: int, offset: int, record_offset: int) -> PendingOffset:
    return PendingOffset(group, topic, p, OffsetAndMetadata(offset), record_offset)


def test_commit_materializes_and_abort_drops() -> None:
    pending = PendingTransactionalOffsets()
    pending.add(7, _po("g", "t", 0, 10, 100))
    pending.add(7, _po("g", "t", 0, 12, 101))  # later in the same transaction: replaces
    pending.add(7, _po("g", "t", 1, 5, 102))
    pending.add(8, _po("g", "t", 2, 3, 103))
    assert pending.has_pending("g", "t", 0)
    assert pending.pending_partitions("g") == {("t", 0), ("t", 1), ("t", 2)}
    assert pending.complete(7, committed=True) == [
        _po("g", "t", 0, 12, 101),
        _po("g", "t", 1, 5, 102),
    ]
    assert not pending.has_pending("g", "t", 0)
    assert pending.complete(8, committed=False) == []
    assert pending.pending_partitions("g") == set()
    assert pending.complete(9, committed=True) == []  # a marker with nothing pending


def test_a_plain_commit_after_the_transactional_one_wins() -> None:
    po = _po("g", "t", 0, 10, 100)
    assert should_materialize(po, None)
    assert should_materialize(po, 99)
    assert not should_materialize(po, 101)


def test_remove_group() -> None:
    pending = PendingTransactionalOffsets()
    pending.add(1, _po("g", "t", 0, 1, 1))
    pending.add(1, _po("h", "t", 0, 1, 2))
    pending.add(2, _po("g", "t", 1, 1, 3))
    pending.remove_group("g")
    assert pending.pending == {1: {("h", "t", 0): _po("h", "t", 0, 1, 2)}}
