"""The ``.txnindex`` files across a log truncation, as a follower truncates (the log, then the
producer state loaded again, as ``Partition.truncate_to`` does), compared with Kafka:

* a kept segment whose index loses every entry keeps its file, empty (Kafka's
  ``TransactionIndex.truncateTo`` cuts the file and keeps it);
* a segment deleted by the truncation takes its ``.txnindex`` with it (Kafka's
  ``LogSegment.deleteIfExists``): no index file is left without its ``.log``;
* a restart reads the same entries from what is left.
"""

from __future__ import annotations

from pathlib import Path

from odradek.protocol.records import build_batch
from odradek.storage import FileLog
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.transaction_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    ControlRecordType,
    TransactionIndexFiles,
    build_control_batch,
)

T0 = 1_700_000_000_000


class _Writer:
    def __init__(self, directory: Path) -> None:
        self.log = FileLog(directory)
        self.state = ProducerStateManager.load(self.log, None)

    def aborted(self, pid: int, n: int = 2) -> None:
        """A transaction of ``n`` records and its ABORT marker."""
        data = build_batch(
            [(None, b"v", (), T0)] * n,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
        result = self.log.append(bytearray(data), 0)
        self.state.append_txn_data(pid, result.base_offset)
        marker = build_control_batch(pid, 0, ControlRecordType.ABORT, 0, T0)
        result = self.log.append(marker, 0)
        self.state.apply_marker(
            pid, 0, result.base_offset, True, 0, self.log.segment_base_offsets()
        )


def _txnindexes(directory: Path) -> dict[int, int]:
    """base offset -> size of every ``.txnindex`` file."""
    return {int(p.name[:20]): p.stat().st_size for p in directory.glob("*.txnindex")}


def _logs(directory: Path) -> set[int]:
    return {int(p.name[:20]) for p in directory.glob("*.log")}


def test_truncation_keeps_emptied_indexes_and_deletes_those_of_deleted_segments(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    w = _Writer(directory)
    w.aborted(1)  # 0-1, marker 2
    w.log.roll()
    w.aborted(2)  # 3-4, marker 5
    w.log.roll()
    w.aborted(3)  # 6-7, marker 8
    w.log.roll()
    w.aborted(4)  # 9-10, marker 11
    assert _txnindexes(directory) == {b: ABORTED_TXN_SIZE for b in (0, 3, 6, 9)}

    w.log.truncate_to(4)  # inside the batch 3-4: the log ends at 3
    state = ProducerStateManager.load(w.log, None)
    assert w.log.log_end_offset == 3
    assert _logs(directory) == {0, 3}
    assert _txnindexes(directory) == {0: ABORTED_TXN_SIZE, 3: 0}  # 3 emptied and kept
    first = AbortedTxn(1, 0, 2, 3)
    assert state.aborted_transactions(0, 100) == [first]
    w.log.close()

    log = FileLog(directory)
    again = ProducerStateManager.load(log, None)
    assert again.aborted_transactions(0, 100) == [first]
    assert _txnindexes(directory) == {0: ABORTED_TXN_SIZE, 3: 0}
    log.close()

    w = _Writer(directory)  # the log grows again: the empty index takes new entries
    w.aborted(5)  # 3-4, marker 5
    assert _txnindexes(directory) == {0: ABORTED_TXN_SIZE, 3: ABORTED_TXN_SIZE}
    assert w.state.aborted_transactions(0, 100) == [first, AbortedTxn(5, 3, 5, 6)]
    w.log.close()


def test_full_truncation_leaves_no_index_of_a_deleted_segment(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    w = _Writer(directory)
    w.aborted(1)
    w.log.roll()
    w.aborted(2)
    w.log.truncate_fully_and_start_at(1)  # a follower behind the leader's log start
    ProducerStateManager.load(w.log, None)
    assert _logs(directory) == {1}
    assert _txnindexes(directory) == {}
    w.log.close()


def test_delete_above_keeps_indexes_at_or_below_the_log_end(tmp_path: Path) -> None:
    """An index at a base that is no segment's but below the log end (a segment the cleaner
    merged into the one before it) still holds live entries: only bases past the end go."""
    files = TransactionIndexFiles(tmp_path)
    files.append(AbortedTxn(1, 0, 2, 3), [0, 3, 6])
    files.append(AbortedTxn(2, 3, 5, 6), [0, 3, 6])
    files.append(AbortedTxn(3, 6, 7, 8), [0, 3, 6])
    files.truncate_to(7)  # the log ends at 7: the marker at 7 goes, its index stays empty
    files.delete_above(7)
    assert _txnindexes(tmp_path) == {0: ABORTED_TXN_SIZE, 3: ABORTED_TXN_SIZE, 6: 0}
    files.delete_above(5)
    assert _txnindexes(tmp_path) == {0: ABORTED_TXN_SIZE, 3: ABORTED_TXN_SIZE}
