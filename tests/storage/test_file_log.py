"""FileLog and LogSegment specifics: files, reopening, recovery, checkpoints, fds."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records import iter_batches
from odradek.storage import FileLog, FileRegion, LogConfig, LogSegment

from .conftest import T0, make_batch


def fill(log: FileLog, n: int, records: int = 2, value_size: int = 40) -> list[bytes]:
    out = []
    for i in range(n):
        batch = bytearray(make_batch(records, ts=T0 + i, value_size=value_size))
        log.append(batch, 1)
        out.append(bytes(batch))  # stamped in place
    return out


def all_bytes(log: FileLog) -> bytes:
    data = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20).records
        assert isinstance(chunk, FileRegion)
        raw = chunk.read()
        data += raw
        offset = list(iter_batches(raw))[-1].last_offset + 1
    return data


def test_file_names_and_formats(tmp_path: Path, clock: ManualClock) -> None:
    log = FileLog(
        tmp_path / "orders-3", LogConfig(segment_bytes=500, index_interval_bytes=100), clock
    )
    assert (log.topic, log.partition) == ("orders", 3)
    written = fill(log, 10, value_size=60)
    log.flush()
    names = sorted(p.name for p in (tmp_path / "orders-3").iterdir())
    bases = log.segment_base_offsets()
    for base in bases:
        for suffix in (".log", ".index", ".timeindex"):
            assert f"{base:020d}{suffix}" in names
    assert "leader-epoch-checkpoint" in names
    assert (tmp_path / "orders-3" / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    # the .log files are the stamped batches back to back
    on_disk = b"".join((tmp_path / "orders-3" / f"{b:020d}.log").read_bytes() for b in bases)
    assert on_disk == b"".join(written)
    log.close()


def test_reopen_keeps_everything(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    log = FileLog(tmp_path / "t-0", config, clock)
    fill(log, 50)
    log.assign_leader_epoch(4)
    before = all_bytes(log)
    state = (
        log.log_end_offset,
        log.segment_base_offsets(),
        log.max_timestamp(),
        log.offset_for_timestamp(T0 + 20),
    )
    log.close()
    again = FileLog(tmp_path / "t-0", config, clock, recovery_point=log.recovery_point)
    assert (
        again.log_end_offset,
        again.segment_base_offsets(),
        again.max_timestamp(),
        again.offset_for_timestamp(T0 + 20),
    ) == state
    assert all_bytes(again) == before
    assert again.leader_epoch_entries() == [(1, 0), (4, 100)]
    assert again.append(make_batch(1), 4).base_offset == 100
    again.close()


def test_leader_epoch_of_appends_is_written_at_flush_and_rebuilt_after_a_crash(
    tmp_path: Path, clock: ManualClock
) -> None:
    """An epoch first seen in appended batches is not written (fsync) on append; flush writes
    it before moving the recovery point; an unclean reopen rebuilds what the file misses from
    the batches above the recovery point."""
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    directory = tmp_path / "t-0"
    path = directory / "leader-epoch-checkpoint"
    log = FileLog(directory, config, clock)
    fill(log, 5)  # epoch 1 from offset 0
    assert not path.exists()
    assert log.leader_epoch_entries() == [(1, 0)]
    log.flush()
    assert path.read_text() == "0\n1\n1 0\n"
    flushed = log.recovery_point
    for i in range(30):  # epoch 3 from offset 10, epoch 7 from offset 40, across segments
        log.append(bytearray(make_batch(1, ts=T0 + i)), 3)
    for i in range(20):
        log.append(bytearray(make_batch(2, ts=T0 + i)), 7)
    assert log.segment_count > 1
    assert path.read_text() == "0\n1\n1 0\n"  # still behind: no flush since
    expected = [(1, 0), (3, 10), (7, 40)]
    assert log.leader_epoch_entries() == expected
    # "crash": reopen without close(); recovery scans from the checkpointed recovery point
    again = FileLog(directory, config, clock, recovery_point=flushed)
    assert again.leader_epoch_entries() == expected
    assert again.log_end_offset == 80
    again.flush()
    assert path.read_text() == "0\n3\n1 0\n3 10\n7 40\n"
    again.close()
    log.close()
    clean = FileLog(directory, config, clock, recovery_point=80, clean_shutdown=True)
    assert clean.leader_epoch_entries() == expected
    clean.close()


def test_new_partition_directory_is_fsynced_with_the_first_flush(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import odradek.storage.log as log_module

    synced: list[Path] = []
    real = log_module.fsync_dir
    monkeypatch.setattr(log_module, "fsync_dir", lambda d: (synced.append(d), real(d)))
    log = FileLog(tmp_path / "t-0", LogConfig(), clock)
    log.append(bytearray(make_batch(1)), 0)
    assert synced == []  # creating the log and appending fsync nothing
    log.flush()
    assert tmp_path in synced and tmp_path / "t-0" in synced
    log.close()


def test_recovery_truncates_corrupt_byte_and_logs(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=100)
    log = FileLog(tmp_path / "t-0", config, clock)
    written = fill(log, 20)
    log.close()
    path = tmp_path / "t-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    boundary = sum(len(b) for b in written[:10])
    corrupt_at = boundary + 70  # a byte inside batch 10's records
    data[corrupt_at] ^= 0x55
    path.write_bytes(data)
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        again = FileLog(tmp_path / "t-0", config, clock, recovery_point=0)
    assert again.log_end_offset == 20  # 10 batches of 2 records survive
    assert path.stat().st_size == boundary
    assert all_bytes(again) == b"".join(written[:10])
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        str(path) in m and f"byte position {boundary}" in m and "CRC" in m for m in messages
    ), messages
    # indexes were rebuilt and the log keeps working
    assert again.append(make_batch(1), 1).base_offset == 20
    assert next(iter(iter_batches(again.read(19, 1).records.read()))).base_offset == 18  # type: ignore[union-attr]
    again.close()


def test_torn_tail_is_never_served(tmp_path: Path, clock: ManualClock) -> None:
    log = FileLog(tmp_path / "t-0", LogConfig(), clock)
    written = fill(log, 5)
    log.close()
    path = tmp_path / "t-0" / f"{0:020d}.log"
    with open(path, "ab") as f:
        f.write(make_batch(3)[:50])  # a partial batch, as a kill -9 mid-write would leave
    again = FileLog(tmp_path / "t-0", LogConfig(), clock)
    assert again.log_end_offset == 10
    assert all_bytes(again) == b"".join(written)
    again.close()


def test_recovery_deletes_segments_after_a_truncated_one(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=600)
    log = FileLog(tmp_path / "t-0", config, clock)
    fill(log, 30)
    bases = log.segment_base_offsets()
    assert len(bases) > 3
    log.close()
    second = tmp_path / "t-0" / f"{bases[1]:020d}.log"
    data = bytearray(second.read_bytes())
    data[30] ^= 1  # inside the first batch's header (CRC-covered attributes/fields)
    second.write_bytes(data)
    again = FileLog(tmp_path / "t-0", config, clock, recovery_point=0)
    assert again.segment_base_offsets() == bases[:2]
    assert again.log_end_offset == bases[1]
    assert not (tmp_path / "t-0" / f"{bases[2]:020d}.log").exists()
    again.close()


def test_missing_or_damaged_index_is_rebuilt(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=3000, index_interval_bytes=100)
    log = FileLog(tmp_path / "t-0", config, clock)
    fill(log, 60)
    bases = log.segment_base_offsets()
    entries = [(s.index.entries(), s.time_index.entries()) for s in log.segments]
    log.close()
    d = tmp_path / "t-0"
    (d / f"{bases[0]:020d}.index").unlink()
    (d / f"{bases[1]:020d}.timeindex").write_bytes(b"\x01" * 5)
    # recovery point at the end: only damaged indexes trigger a scan
    again = FileLog(d, config, clock, recovery_point=log.log_end_offset)
    assert [(s.index.entries(), s.time_index.entries()) for s in again.segments] == entries
    for target in range(0, 120, 7):
        first = next(iter_batches(again.read(target, 1).records.read()))  # type: ignore[union-attr]
        assert first.base_offset <= target <= first.last_offset
    again.close()


def test_leftover_files_are_removed(tmp_path: Path, clock: ManualClock) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    for name in (
        "00000000000000000000.log.deleted",
        "leader-epoch-checkpoint.tmp",
        "00000000000000000007.index",
    ):
        (d / name).write_bytes(b"x")
    log = FileLog(d, LogConfig(), clock)
    assert sorted(p.name for p in d.iterdir()) == ["00000000000000000000.log"]
    log.close()


def test_deleted_segment_regions_stay_readable(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    config = LogConfig(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=60_000)
    log = FileLog(tmp_path / "t-0", config, clock)
    written = fill(log, 6, records=1, value_size=150)
    region = log.read(0, 1000).records
    assert isinstance(region, FileRegion)
    first_segment = log.segments[0]
    assert log.delete_old_segments(T0 + 10**6) > 0
    assert not (tmp_path / "t-0" / f"{0:020d}.log").exists()
    assert region.read() == written[0]  # fd still open: a pending sendfile still works
    assert not first_segment.closed
    clock.advance(60_000)
    log.maybe_flush()
    assert first_segment.closed  # closed only after file.delete.delay.ms
    log.close()


def test_many_segments(tmp_path: Path, clock: ManualClock) -> None:
    log = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=200), clock)
    fill(log, 120, records=1, value_size=100)
    assert log.segment_count == 120
    for target in (0, 1, 77, 119):
        (batch,) = list(iter_batches(log.read(target, 1).records.read()))  # type: ignore[union-attr]
        assert batch.base_offset == target
    log.close()
    again = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=200), clock, recovery_point=120)
    assert again.segment_count == 120 and again.log_end_offset == 120
    assert again.offset_for_timestamp(T0 + 100) == (100, T0 + 100)
    again.close()


def test_segment_read_whole_batches(tmp_path: Path, clock: ManualClock) -> None:
    seg = LogSegment(tmp_path, 100, LogConfig(index_interval_bytes=0), clock.now_ms())
    from odradek.storage._batch import prepare_append

    sizes = []
    for i in range(10):
        buf = bytearray(make_batch(2, value_size=20))
        infos = prepare_append(buf, 100 + 2 * i, 0, 1 << 20, 1 << 30, None)
        seg.append(buf, infos)
        sizes.append(len(buf))
    assert seg.next_offset == 120 and len(seg.index) == 9
    assert seg.translate_offset(105) == (sizes[0] * 2, 104, sizes[0], 105)
    assert seg.read(100, sizes[0] * 2 + 1, seg.size) == (0, sizes[0] * 2)
    assert seg.read(119, 10**6, seg.size) == (sizes[0] * 9, sizes[0])
    assert seg.read(120, 10, seg.size) is None
    assert seg.truncate_to(110) == sizes[0] * 5
    assert seg.next_offset == 110 and len(seg.index) == 4
    seg.close()


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        ("magic", "magic byte is 7"),
        ("short_length", "below the minimum"),
        ("long_length", "extends past the end of the file"),
        ("offset_order", "out of order"),
        ("crc", "CRC mismatch"),
    ],
)
def test_recovery_checks_each_batch(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture, field: str, reason: str
) -> None:
    log = FileLog(tmp_path / "t-0", LogConfig(), clock)
    written = fill(log, 6)
    log.close()
    path = tmp_path / "t-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    at = sum(len(b) for b in written[:4])  # damage batch 4 (offsets 8..9)
    if field == "magic":
        data[at + 16] = 7
    elif field == "short_length":
        data[at + 8 : at + 12] = (20).to_bytes(4, "big")
    elif field == "long_length":
        data[at + 8 : at + 12] = (10**6).to_bytes(4, "big")
    elif field == "offset_order":
        data[at : at + 8] = (3).to_bytes(8, "big")  # baseOffset is outside the CRC
    elif field == "crc":
        data[at + 17] ^= 0xFF
    path.write_bytes(data)
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        again = FileLog(tmp_path / "t-0", LogConfig(), clock)
    assert again.log_end_offset == 8
    assert all_bytes(again) == b"".join(written[:4])
    (message,) = [r.getMessage() for r in caplog.records]
    assert f"byte position {at}" in message and reason in message, message
    again.close()


def test_indexes_load_lazily_and_bad_ones_are_rebuilt_on_first_use(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = LogConfig(segment_bytes=3000, index_interval_bytes=100)
    log = FileLog(tmp_path / "t-0", config, clock)
    fill(log, 60)
    bases = log.segment_base_offsets()
    entries = log.segments[0].index.entries()
    assert len(entries) >= 3
    log.close()
    # swap two entries of the first index: the size and the last entry still look fine
    path = tmp_path / "t-0" / f"{bases[0]:020d}.index"
    data = bytearray(path.read_bytes())
    data[0:8], data[8:16] = data[8:16], data[0:8]
    path.write_bytes(data)
    again = FileLog(tmp_path / "t-0", config, clock, recovery_point=log.log_end_offset)
    assert not again.segments[0].index._loaded  # nothing read yet
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        for target in range(0, 20):
            first = next(iter_batches(again.read(target, 1).records.read()))  # type: ignore[union-attr]
            assert first.base_offset <= target <= first.last_offset
    assert any("rebuilding indexes" in r.getMessage() for r in caplog.records)
    assert again.segments[0].index.entries() == entries
    again.close()


def test_dump_tool(tmp_path: Path, clock: ManualClock, capsys: pytest.CaptureFixture[str]) -> None:
    from odradek.storage.dump import main

    log = FileLog(tmp_path / "t-0", LogConfig(index_interval_bytes=50), clock)
    fill(log, 4)
    log.close()
    d = tmp_path / "t-0"
    path = d / f"{0:020d}.log"
    with open(path, "ab") as f:
        f.write(b"\x00" * 20)
    assert (
        main(
            [str(path), "--records", str(d / f"{0:020d}.index"), str(d / "leader-epoch-checkpoint")]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("isvalid: True") == 4
    assert "| offset: 7 " in out
    assert "torn tail: 20 bytes" in out
    assert "offset: 3 position:" in out
    assert out.rstrip().endswith("1 0")
