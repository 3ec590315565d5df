"""The checker reports each kind of fault (so that a green fault test means something)."""

from __future__ import annotations

from .checker import Ack, check


def _log(n: int) -> dict[int, list[tuple[int, bytes]]]:
    return {0: [(i, b"v%d" % i) for i in range(n)], 1: [(0, b"w0")]}


def _acks(n: int) -> list[Ack]:
    return [Ack(0, i, b"v%d" % i) for i in range(n)] + [Ack(1, 0, b"w0")]


def test_clean_run_passes() -> None:
    r = check(_acks(10), _log(10))
    assert r.ok, r.summary()
    assert (r.acked, r.read) == (11, 11)


def test_unacknowledged_records_are_fine() -> None:
    # records written but never acknowledged (the leader died before answering) are no loss
    assert check(_acks(5), _log(10)).ok


def test_lost_record_is_reported() -> None:
    log = _log(10)
    del log[0][4]
    r = check(_acks(10), log)
    assert not r.ok
    assert [a.value for a in r.lost] == [b"v4"]


def test_truncated_partition_is_reported() -> None:
    log = _log(10)
    log[0] = log[0][:7]
    assert [a.offset for a in check(_acks(10), log).lost] == [7, 8, 9]


def test_duplicate_moved_and_reordered_are_reported() -> None:
    log = _log(4)
    log[0].append((4, b"v1"))
    r = check(_acks(4), log)
    assert r.duplicated == [(0, b"v1", 2)]
    swapped = {0: [(0, b"v0"), (1, b"v2"), (2, b"v1"), (3, b"v3")], 1: [(0, b"w0")]}
    r = check(_acks(4), swapped)
    assert r.reordered == [(0, b"v1", b"v2")]
    assert {a.value for a, _ in r.moved} == {b"v1", b"v2"}
