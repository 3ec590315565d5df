"""Errors raised by the storage layer, each named after its Kafka counterpart.

The broker maps them to Kafka error codes:

===============================  ==========================  ====
exception                        Kafka error                 code
===============================  ==========================  ====
``OffsetOutOfRangeError``        OFFSET_OUT_OF_RANGE            1
``CorruptRecordError``           CORRUPT_MESSAGE                2
``RecordTooLargeError``          MESSAGE_TOO_LARGE             10
``RecordBatchTooLargeError``     RECORD_LIST_TOO_LARGE         18
``InvalidRecordError``           INVALID_RECORD                87
``InvalidConfigError``           INVALID_CONFIG                40
``KafkaStorageError``            KAFKA_STORAGE_ERROR           56
===============================  ==========================  ====

``CorruptRecordError`` and ``InvalidRecordError`` are the ones defined by
``odradek.protocol.records`` (re-exported here) so that a single ``except`` clause in the broker
covers both layers.
"""

from __future__ import annotations

from odradek.protocol.records import CorruptRecordError, InvalidRecordError

__all__ = [
    "CorruptRecordError",
    "InvalidConfigError",
    "InvalidRecordError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "UnexpectedAppendOffsetError",
]


class OffsetOutOfRangeError(Exception):
    """A read asked for an offset below the log start offset or above the log end offset."""

    def __init__(self, message: str, *, log_start_offset: int = -1, log_end_offset: int = -1):
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(ValueError):
    """A batch is larger than ``max.message.bytes`` (MESSAGE_TOO_LARGE, 10)."""


class RecordBatchTooLargeError(ValueError):
    """A batch is larger than ``segment.bytes`` and can never fit a segment (RECORD_LIST_TOO_LARGE, 18)."""


class InvalidConfigError(ValueError):
    """A log config value is unknown or out of range; ``.key`` names the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class UnexpectedAppendOffsetError(ValueError):
    """A follower append does not continue the log (Kafka's UnexpectedAppendOffsetException)."""


class KafkaStorageError(OSError):
    """The log cannot be read or written (KAFKA_STORAGE_ERROR, 56)."""
