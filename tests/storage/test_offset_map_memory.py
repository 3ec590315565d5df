"""The cleaner's offset map costs no zero-filling: allocating Kafka's default 128 MiB dedupe
buffer, or clearing it between cleanings, touches none of its pages. Zero-filling them held
the GIL on the cleaner thread at its first cleaning and stalled the broker's event loop long
enough for a client to pile the records of the pause into one batch over a compacted topic's
segment.bytes (RECORD_LIST_TOO_LARGE: a Faust table's changelog lost its updates)."""

from __future__ import annotations

import os
import sys

import pytest

from odradek.storage.offset_map import SkimpyOffsetMap

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="resident set size read from /proc"
)

MAP_BYTES = 128 * 1024 * 1024
TOUCHED_LIMIT = 16 * 1024 * 1024  # an eighth of the map: far above a few hundred keys' pages


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_allocating_the_map_touches_no_page() -> None:
    before = _resident_bytes()
    offset_map = SkimpyOffsetMap(MAP_BYTES)
    grown = _resident_bytes() - before
    assert offset_map.memory >= MAP_BYTES - 24
    assert grown < TOUCHED_LIMIT, f"allocating the map made {grown} bytes resident"


def test_clear_touches_no_page_and_forgets_every_key() -> None:
    offset_map = SkimpyOffsetMap(MAP_BYTES)
    keys = [f"k{i}".encode() for i in range(500)]
    for offset, key in enumerate(keys):
        offset_map.put(key, offset)
    before = _resident_bytes()
    offset_map.clear()
    grown = _resident_bytes() - before
    assert grown < TOUCHED_LIMIT, f"clearing the map made {grown} bytes resident"
    assert len(offset_map) == 0 and offset_map.latest_offset == -1
    assert all(offset_map.get(key) == -1 for key in keys)
    offset_map.put(keys[0], 7)
    assert offset_map.get(keys[0]) == 7 and offset_map.get(keys[1]) == -1
