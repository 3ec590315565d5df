"""odradek.storage: partition logs in Kafka's on-disk format (``FileLog``) or in memory
(``MemoryLog``), both behind the ``PartitionLog`` contract, and the ``LogManager`` that owns them.
See docs/internals.md §2."""

from odradek.storage.api import AppendResult, FileRegion, PartitionLog, ReadResult
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from odradek.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from odradek.storage.leader_epoch import LeaderEpochCache
from odradek.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FileLog,
    parse_log_dir_name,
)
from odradek.storage.manager import InvalidTopicError, LogManager
from odradek.storage.memory import MemoryLog
from odradek.storage.segment import LogSegment

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendResult",
    "CorruptIndexError",
    "CorruptRecordError",
    "FileLog",
    "FileRegion",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidTopicError",
    "KafkaStorageError",
    "LeaderEpochCache",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "MemoryLog",
    "OffsetCheckpointFile",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ReadResult",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "TimeIndex",
    "UnexpectedAppendOffsetError",
    "parse_log_dir_name",
]
