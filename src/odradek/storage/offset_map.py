"""SkimpyOffsetMap: key -> latest offset, in a fixed-size buffer (Kafka's ``SkimpyOffsetMap``).

The log cleaner builds one per cleaning over the dirty section of a log. Its memory is bounded
by ``log.cleaner.dedupe.buffer.size`` divided among the cleaner threads: the map never grows.

Layout: ``capacity`` slots of ``HASH_SIZE + 8`` = 24 bytes in one buffer; a slot is the MD5
digest of the key (16 bytes, Kafka's choice) followed by the offset as a big-endian int64.
An all-zero digest marks an empty slot (a real key hashing to 16 zero bytes is not a concern).
Open addressing with linear probing, starting at the slot the digest's first 8 bytes pick.
The map holds at most ``load_factor`` (Kafka's ``log.cleaner.io.buffer.load.factor``, 0.9)
of its slots; ``put`` of a new key into a full map raises ``OffsetMapFullError``.

The slots are an anonymous memory map, not a ``bytearray``: the kernel hands out zeroed pages
as they are first touched, so that allocating the map (Kafka's default dedupe buffer is
128 MiB) and clearing it (``madvise(MADV_DONTNEED)`` on Linux) cost no zero-filling. A
``bytearray`` zero-fills every byte while holding the GIL: on the cleaner's first cleaning that
stalled the broker's event loop for a tenth of a second or more, long enough for a producer
waiting on its in-flight request to pile the records of the pause into one batch larger than
the compacted topic's ``segment.bytes`` (refused: RECORD_LIST_TOO_LARGE).

Two keys with the same MD5 digest would share an entry (the older record of the other key
would be dropped), as in Kafka.
"""

from __future__ import annotations

import hashlib
import mmap
import struct
import sys

__all__ = ["HASH_SIZE", "OffsetMapFullError", "SkimpyOffsetMap"]

HASH_SIZE = 16
SLOT_SIZE = HASH_SIZE + 8
_EMPTY = bytes(HASH_SIZE)
_OFFSET = struct.Struct(">q")
_SLOT_OF = struct.Struct(">Q")


# MADV_DONTNEED zeroes private anonymous pages on Linux only (BSDs and macOS keep the data)
_CAN_DISCARD = sys.platform.startswith("linux") and hasattr(mmap, "MADV_DONTNEED")


class OffsetMapFullError(Exception):
    """No room left for another key (the cleaner stops its dirty section before this key)."""


class SkimpyOffsetMap:
    """key -> largest offset put for it, in ``memory`` bytes (rounded down to whole slots)."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.capacity = max(1, memory // SLOT_SIZE)
        self.max_entries = max(1, int(self.capacity * load_factor))
        # private and anonymous (a shared mapping would keep its data through MADV_DONTNEED):
        # zeroed pages on demand, nothing written here
        self._slots = mmap.mmap(
            -1, self.capacity * SLOT_SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        )
        self.size = 0
        self.latest_offset = -1  # largest offset ever put

    @property
    def memory(self) -> int:
        """Bytes held by the slots (the map's whole footprint, apart from a few attributes)."""
        return len(self._slots)

    @property
    def utilization(self) -> float:
        return self.size / self.capacity

    def is_full(self) -> bool:
        return self.size >= self.max_entries

    def clear(self) -> None:
        """Empty the map in place (no second buffer: the memory bound holds). On Linux the
        pages are given back (``MADV_DONTNEED``: a private anonymous page reads as zeros
        again); elsewhere they are zeroed in 64 KiB steps."""
        if self.size and _CAN_DISCARD:
            self._slots.madvise(mmap.MADV_DONTNEED)
        elif self.size:
            zeros = bytes(min(len(self._slots), 1 << 16))
            view = memoryview(self._slots)
            for start in range(0, len(view), len(zeros)):
                chunk = view[start : start + len(zeros)]
                chunk[:] = zeros[: len(chunk)]
            view.release()
        self.size = 0
        self.latest_offset = -1

    @staticmethod
    def digest(key: bytes | bytearray | memoryview) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def _find(self, digest: bytes) -> tuple[int, bool]:
        """(byte position of the slot holding ``digest`` or of the empty slot where it goes,
        whether it is there)."""
        slots = self._slots
        capacity = self.capacity
        slot = _SLOT_OF.unpack_from(digest)[0] % capacity
        while True:
            pos = slot * SLOT_SIZE
            stored = slots[pos : pos + HASH_SIZE]
            if stored == digest:
                return pos, True
            if stored == _EMPTY:
                return pos, False
            slot += 1
            if slot == capacity:
                slot = 0

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Record ``offset`` as the latest for ``key`` (offsets are put in increasing order)."""
        digest = self.digest(key)
        pos, found = self._find(digest)
        if not found:
            if self.size >= self.max_entries:
                raise OffsetMapFullError(f"offset map full at {self.size} keys")
            self._slots[pos : pos + HASH_SIZE] = digest
            self.size += 1
        _OFFSET.pack_into(self._slots, pos + HASH_SIZE, offset)
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The latest offset put for ``key``, or -1."""
        pos, found = self._find(self.digest(key))
        if not found:
            return -1
        return int(_OFFSET.unpack_from(self._slots, pos + HASH_SIZE)[0])

    def __len__(self) -> int:
        return self.size
