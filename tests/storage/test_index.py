from __future__ import annotations

from pathlib import Path

import pytest

from odradek.storage import CorruptIndexError, OffsetIndex, TimeIndex


def test_offset_index_lookup_and_file_format(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1000)
    assert idx.lookup(150) == (100, 0)
    for i in range(1, 11):
        idx.append(100 + i * 10, i * 4096)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(110) == (110, 4096)
    assert idx.lookup(119) == (110, 4096)
    assert idx.lookup(10**9) == (200, 40960)
    assert idx.lookup_position(4096 * 3 + 5) == 4096 * 3
    assert idx.lookup_position(10) == 0
    idx.flush()
    data = idx.path.read_bytes()
    assert len(data) == 80
    # relative offset i32 BE, position i32 BE
    assert data[:8] == (10).to_bytes(4, "big") + (4096).to_bytes(4, "big")
    again = OffsetIndex(idx.path, 100, 1000)
    again.load()
    assert again.entries() == idx.entries()


def test_offset_index_truncate_and_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, 5)
    for i in range(1, 6):
        idx.append(i * 10, i * 100)
    assert idx.is_full
    idx.flush()
    idx.truncate_to(30)  # removes entries with offset >= 30
    assert [o for o, _ in idx.entries()] == [10, 20]
    assert idx.path.stat().st_size == 16
    idx.append(25, 250)
    idx.append(24, 260)  # not increasing: skipped
    idx.flush(fsync=False)
    reloaded = OffsetIndex(idx.path, 0, 5)
    reloaded.load()
    assert reloaded.entries() == [(10, 100), (20, 200), (25, 250)]


@pytest.mark.parametrize(
    "content", [b"\x00" * 7, (5).to_bytes(4, "big") * 2 + (4).to_bytes(4, "big") * 2]
)
def test_offset_index_sanity_check(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 10).load()
    with pytest.raises(CorruptIndexError):
        OffsetIndex(tmp_path / "missing.index", 0, 10).load()


def test_time_index(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50, 100)
    assert idx.lookup(5) == (-1, 50)
    idx.maybe_append(1000, 60)
    idx.maybe_append(1000, 70)  # not larger: skipped
    idx.maybe_append(900, 75)  # smaller: skipped
    idx.maybe_append(2000, 80)
    assert idx.entries() == [(1000, 60), (2000, 80)]
    assert idx.lookup(999) == (-1, 50)
    assert idx.lookup(1500) == (1000, 60)
    assert idx.lookup(2000) == (2000, 80)
    idx.flush()
    data = idx.path.read_bytes()
    assert data[:12] == (1000).to_bytes(8, "big") + (10).to_bytes(4, "big")
    again = TimeIndex(idx.path, 50, 100)
    again.load()
    assert again.entries() == idx.entries()
    again.truncate_to(80)
    assert again.entries() == [(1000, 60)]
    assert again.path.stat().st_size == 12
    again.reset()
    assert len(again) == 0 and again.path.stat().st_size == 0
