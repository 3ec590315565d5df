"""ListOffsets' special timestamps (Kafka's ``ListOffsetsRequest`` constants, KIP-734 and
KIP-405), shared by the broker's ListOffsets, storage's ``offset_for_timestamp`` and clients.
Never imports kio."""

from __future__ import annotations

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
]

LATEST_TIMESTAMP = -1
"""The next offset to be written (consumers: the high watermark)."""
EARLIEST_TIMESTAMP = -2
"""The log start offset."""
MAX_TIMESTAMP = -3
"""The offset of the record with the largest timestamp (v7+)."""
EARLIEST_LOCAL_TIMESTAMP = -4
"""The first offset in local storage (v8+, tiered storage); the log start offset here."""
