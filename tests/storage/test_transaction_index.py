"""Control batches, the .txnindex format and the TransactionTracker (LSO, aborted ranges)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.control_record_type_schema.v0.data import ControlRecordTypeSchema
from kio.schema.end_txn_marker.v0.data import EndTxnMarker
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from odradek.protocol.records import RecordBatch, build_batch
from odradek.storage.transaction_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    ControlRecordType,
    TransactionIndex,
    TransactionTracker,
    build_control_batch,
    collect_aborted_txns,
    parse_control_record,
)

T0 = 1_700_000_000_000


def _kio_bytes(entity: Any) -> bytes:
    import io

    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


# -- control batches -----------------------------------------------------------------------


def test_control_batch_layout() -> None:
    raw = build_control_batch(4242, 3, ControlRecordType.ABORT, 17, T0, base_offset=9)
    batch = RecordBatch(raw)
    batch.validate()
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 3, -1)
    assert batch.attributes & 0x30 == 0x30
    [record] = list(batch.records())
    assert record.offset == 9
    # ControlRecordType key: version 0, type 0 (ABORT); EndTxnMarker value: version 0, epoch 17
    assert record.key == b"\x00\x00\x00\x00"
    assert record.value == b"\x00\x00\x00\x00\x00\x11"
    assert parse_control_record(record.key, record.value) == (0, 17)


def test_control_record_matches_kio() -> None:
    key = struct.pack(">hh", 0, 1)
    value = struct.pack(">hi", 0, 5)
    # kio's generated data schemas carry no version prefix: ours is the version + their body
    assert key[2:] == _kio_bytes(ControlRecordTypeSchema(type_=i16(1)))
    assert value[2:] == _kio_bytes(EndTxnMarker(coordinator_epoch=i32(5)))
    assert parse_control_record(key, value) == (ControlRecordType.COMMIT, 5)


def test_unknown_control_type_is_skipped() -> None:
    assert parse_control_record(struct.pack(">hh", 0, 7), b"") == (7, -1)


# -- the index file ------------------------------------------------------------------------


def test_aborted_txn_golden_bytes() -> None:
    entry = AbortedTxn(producer_id=5, first_offset=10, last_offset=20, last_stable_offset=21)
    expected = (
        b"\x00\x00"
        + b"\x00" * 7
        + b"\x05"
        + b"\x00" * 7
        + b"\x0a"
        + b"\x00" * 7
        + b"\x14"
        + b"\x00" * 7
        + b"\x15"
    )
    assert entry.encode() == expected
    assert len(expected) == ABORTED_TXN_SIZE == 34
    assert AbortedTxn.decode(expected) == entry


def test_index_file_roundtrip_truncate_and_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(0, path)
    entries = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10), AbortedTxn(1, 11, 14, 15)]
    for e in entries:
        index.append(e)
    index.flush()
    assert TransactionIndex(0, path).entries == entries
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn append
    assert TransactionIndex(0, path).entries == entries
    assert path.stat().st_size == 3 * ABORTED_TXN_SIZE
    index = TransactionIndex(0, path)
    index.truncate_to(9)
    assert index.entries == entries[:1]
    assert TransactionIndex(0, path).entries == entries[:1]


def test_index_rejects_out_of_order_entries() -> None:
    index = TransactionIndex(0)
    index.append(AbortedTxn(1, 0, 10, 11))
    try:
        index.append(AbortedTxn(2, 0, 9, 10))
    except ValueError:
        pass
    else:
        raise AssertionError("an entry ending before the last one was accepted")


def test_collect_across_segments_stops_when_complete() -> None:
    a, b = TransactionIndex(0), TransactionIndex(100)
    a.append(AbortedTxn(1, 0, 5, 6))
    a.append(AbortedTxn(2, 50, 60, 200))  # lso 200 >= upper bound: search complete
    b.append(AbortedTxn(3, 150, 160, 161))
    assert collect_aborted_txns([a, b], 4, 120) == [
        AbortedTxn(1, 0, 5, 6),
        AbortedTxn(2, 50, 60, 200),
    ]
    assert collect_aborted_txns([a, b], 6, 300) == [
        AbortedTxn(2, 50, 60, 200),
        AbortedTxn(3, 150, 160, 161),
    ]


# -- the tracker ---------------------------------------------------------------------------


def _data(pid: int, epoch: int, offset: int, n: int = 1, transactional: bool = True) -> RecordBatch:
    raw = build_batch(
        [(b"k", b"v", (), T0) for _ in range(n)],
        base_offset=offset,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=transactional,
    )
    return RecordBatch(raw)


def _marker(pid: int, epoch: int, offset: int, kind: ControlRecordType) -> RecordBatch:
    return RecordBatch(build_control_batch(pid, epoch, kind, 0, T0, base_offset=offset))


def test_tracker_lso_commit_and_abort() -> None:
    t = TransactionTracker()
    t.append_batch(_data(1, 0, 0, 3))  # pid 1: offsets 0-2
    t.update_high_watermark(3)
    t.append_batch(_data(2, 0, 3, 2))  # pid 2: 3-4
    t.append_batch(_data(-1, -1, 5, 1, transactional=False))
    t.update_high_watermark(6)
    assert t.last_stable_offset == 0
    assert t.append_batch(_marker(1, 0, 6, ControlRecordType.COMMIT)) is None
    t.update_high_watermark(7)
    assert t.last_stable_offset == 3
    entry = t.append_batch(_marker(2, 0, 7, ControlRecordType.ABORT))
    assert entry == AbortedTxn(2, 3, 7, 8)
    # its marker (7) is not below the high watermark yet: the aborted data stays unstable
    assert t.last_stable_offset == 3
    t.update_high_watermark(8)
    assert t.last_stable_offset == 8
    assert t.aborted_transactions(0, 8) == [entry]
    assert t.aborted_transactions(8, 20) == []
    assert t.aborted_transactions(0, 3) == []


def test_tracker_aborted_lso_is_the_next_ongoing() -> None:
    t = TransactionTracker(high_watermark=0)
    t.append_data(1, 0)
    t.append_data(2, 1)
    t.append_data(1, 2)
    assert t.end_transaction(1, 3, aborted=True) == AbortedTxn(1, 0, 3, 1)


def test_marker_without_transaction_is_ignored() -> None:
    t = TransactionTracker()
    assert t.end_transaction(9, 0, aborted=True, coordinator_epoch=2) is None
    assert not t.check_marker(9, 1)
    assert t.check_marker(9, 2)


# -- properties ----------------------------------------------------------------------------

# A partition's history: each step appends a data batch for a producer (opening its
# transaction if none), commits or aborts a producer's transaction, or appends a plain batch.
_step = st.tuples(
    st.sampled_from(["data", "commit", "abort", "plain"]), st.integers(0, 3), st.integers(1, 3)
)


def _run(steps: list[tuple[str, int, int]]) -> tuple[TransactionTracker, list[dict[str, object]]]:
    """Feed the tracker; return it and the ground truth: every transaction's range and fate."""
    t = TransactionTracker()
    offset = 0
    open_txns: dict[int, dict[str, object]] = {}
    txns: list[dict[str, object]] = []
    for kind, pid, n in steps:
        if kind == "plain":
            t.append_batch(_data(-1, -1, offset, n, transactional=False))
            offset += n
        elif kind == "data":
            t.append_batch(_data(pid, 0, offset, n))
            if pid not in open_txns:
                open_txns[pid] = {"pid": pid, "first": offset, "last": None, "aborted": None}
                txns.append(open_txns[pid])
            offset += n
        else:
            marker = ControlRecordType.ABORT if kind == "abort" else ControlRecordType.COMMIT
            t.append_batch(_marker(pid, 0, offset, marker))
            if pid in open_txns:
                txn = open_txns.pop(pid)
                txn["last"] = offset
                txn["aborted"] = kind == "abort"
            offset += 1
        t.update_high_watermark(offset)
    return t, txns


@settings(max_examples=150, deadline=None)
@given(st.lists(_step, max_size=40))
def test_lso_never_passes_an_ongoing_transaction(steps: list[tuple[str, int, int]]) -> None:
    t, txns = _run(steps)
    ongoing_firsts = [int(x["first"]) for x in txns if x["last"] is None]  # type: ignore[call-overload]
    hw = t.high_watermark
    assert t.last_stable_offset == min([*ongoing_firsts, hw])


@settings(max_examples=150, deadline=None)
@given(st.lists(_step, max_size=40), st.integers(0, 60), st.integers(0, 60))
def test_aborted_ranges_reported_exactly(steps: list[tuple[str, int, int]], a: int, b: int) -> None:
    t, txns = _run(steps)
    lo, hi = min(a, b), max(a, b)
    expected = [
        AbortedTxn(int(x["pid"]), int(x["first"]), int(x["last"]), 0)  # type: ignore[call-overload]
        for x in sorted(
            (x for x in txns if x["aborted"]),
            key=lambda x: int(x["last"]),  # type: ignore[call-overload]
        )
        if int(x["last"]) >= lo and int(x["first"]) < hi  # type: ignore[call-overload]
    ]
    got = [e._replace(last_stable_offset=0) for e in t.aborted_transactions(lo, hi)]
    assert got == expected
    # the index built from the same entries answers the same (it is complete or runs out)
    index = TransactionIndex(0)
    for e in t.aborted:
        index.append(e)
    assert [
        e._replace(last_stable_offset=0) for e in collect_aborted_txns([index], lo, hi)
    ] == expected
    # an entry's LSO is at most just past its marker
    for e in t.aborted:
        assert e.last_stable_offset <= e.last_offset + 1


def test_recovery_rebuilds_from_a_real_log(tmp_path: Path) -> None:
    """Transactional data and markers go through FileLog like any batch; reading the log back
    rebuilds the same tracker state and index entries as the live appends produced."""
    from odradek.protocol.records import iter_batches
    from odradek.storage import FileLog

    log = FileLog(tmp_path / "t-0")
    live = TransactionTracker()
    entries = []

    def append(raw: bytes) -> None:
        buf = bytearray(raw)
        log.append(buf, 0)
        entry = live.append_batch(RecordBatch(buf))
        live.update_high_watermark(log.high_watermark)
        if entry is not None:
            entries.append(entry)

    append(_data(1, 0, 0, 2).raw().tobytes())
    append(_data(2, 0, 0, 3).raw().tobytes())
    append(build_control_batch(1, 0, ControlRecordType.ABORT, 0, T0))
    append(_data(3, 0, 0, 1).raw().tobytes())
    append(build_control_batch(2, 0, ControlRecordType.COMMIT, 0, T0))
    assert entries == [AbortedTxn(1, 0, 5, 2)]
    assert live.last_stable_offset == 6  # producer 3 is still open at offset 6
    data = log.read(0, 1 << 20).records
    raw = data if isinstance(data, bytes) else data.read()
    rebuilt, rebuilt_entries = TransactionTracker.rebuild(iter_batches(raw), log.high_watermark)
    assert rebuilt_entries == entries
    assert (rebuilt.ongoing, rebuilt.last_stable_offset) == (live.ongoing, 6)
    assert rebuilt.aborted_transactions(0, log.high_watermark) == entries
    log.close()


def test_producer_state_snapshot_txnindex_and_replay(tmp_path: Path) -> None:
    """ProducerStateManager keeps the tracker and the .txnindex files: a reload from its
    snapshot plus the log tail gives the same ongoing transactions, aborted list and LSO, with
    each index entry once (the entries after the snapshot are rebuilt by the replay), and a
    torn trailing entry is dropped."""
    import json

    from odradek.storage import FileLog
    from odradek.storage.producer_state import MarkerVerdict, ProducerStateManager

    directory = tmp_path / "t-0"
    snapshot = tmp_path / "t-0.json"
    log = FileLog(directory)
    state = ProducerStateManager.load(log, snapshot)

    def data(pid: int, n: int) -> None:
        result = log.append(bytearray(_data(pid, 0, 0, n).raw().tobytes()), 0)
        state.append_txn_data(pid, result.base_offset)

    def marker(pid: int, abort: bool, epoch: int = 0, coordinator_epoch: int = 3) -> None:
        assert state.check_marker(pid, epoch, coordinator_epoch) is MarkerVerdict.OK
        kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
        result = log.append(build_control_batch(pid, epoch, kind, coordinator_epoch, T0), 0)
        state.apply_marker(
            pid, epoch, result.base_offset, abort, coordinator_epoch, log.segment_base_offsets()
        )

    data(1, 2)  # 0-1
    marker(1, abort=True)  # 2
    data(2, 3)  # 3-5, stays open
    payload = state.snapshot_payload(log)
    assert payload is not None
    snapshot.write_bytes(payload)
    assert json.loads(payload)["txn"]["ongoing"] == {"2": 3}
    data(3, 1)  # 6
    marker(3, abort=True, epoch=1)  # 7
    assert state.check_marker(3, 0, 3) is MarkerVerdict.INVALID_PRODUCER_EPOCH
    assert state.check_marker(3, 1, 2) is MarkerVerdict.COORDINATOR_FENCED
    want = [AbortedTxn(1, 0, 2, 3), AbortedTxn(3, 6, 7, 3)]
    assert state.aborted_transactions(0, 8) == want
    assert state.last_stable_offset(log.high_watermark) == 3
    index = directory / f"{0:020d}.txnindex"
    assert index.stat().st_size == 2 * ABORTED_TXN_SIZE
    with open(index, "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn third entry
    log.close()

    log = FileLog(directory)
    again = ProducerStateManager.load(log, snapshot)
    assert again.aborted_transactions(0, 8) == want
    assert again.txn.ongoing == {2: 3}
    assert again.last_stable_offset(log.high_watermark) == 3
    assert again.producer_epoch(3) == 1
    assert index.stat().st_size == 2 * ABORTED_TXN_SIZE
    snapshot.unlink()  # no snapshot: everything is rebuilt from the log
    again = ProducerStateManager.load(log, snapshot)
    assert (again.aborted_transactions(0, 8), again.txn.ongoing) == (want, {2: 3})
    assert index.stat().st_size == 2 * ABORTED_TXN_SIZE
    log.close()
