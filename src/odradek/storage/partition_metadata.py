"""A partition directory's ``partition.metadata`` file: the id of the topic the log belongs to
(KIP-516), in Kafka's format, so that a log left behind by a deleted topic is never taken
for the log of a new topic of the same name.

Format (UTF-8 text, no trailing newline, Kafka's ``PartitionMetadataFile``)::

    version: 0
    topic_id: <the topic id: 16 bytes in URL-safe base64 without padding, 22 characters>

Written with fsync and an atomic rename (``checkpoint.write_atomic``). Kafka's rule, kept
here: a log's topic id, once written, never changes; a request naming the partition with
another id is answered INCONSISTENT_TOPIC_ID. Logs without a directory (in memory) have no
file: for them every id is accepted and none remembered.
"""

from __future__ import annotations

import base64
import re
import uuid
from pathlib import Path
from typing import Any

from odradek.storage.checkpoint import write_atomic

__all__ = [
    "PARTITION_METADATA_FILE",
    "PARTITION_METADATA_VERSION",
    "assign_topic_id",
    "decode_partition_metadata",
    "encode_partition_metadata",
    "read_partition_metadata",
]

PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0
_WHITESPACE = re.compile(r"\s+")


def _uuid_text(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def encode_partition_metadata(topic_id: uuid.UUID) -> bytes:
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {_uuid_text(topic_id)}".encode()


def decode_partition_metadata(text: str) -> uuid.UUID:
    """The topic id of a file's text; ValueError if it is not the format above."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError("partition metadata needs a version and a topic_id line")
    version = _WHITESPACE.split(lines[0].strip())
    if len(version) != 2 or version[0] != "version:" or int(version[1]) < 0:
        raise ValueError(f"unrecognised partition metadata version line {lines[0]!r}")
    if int(version[1]) != PARTITION_METADATA_VERSION:
        raise ValueError(f"unrecognised partition metadata version {version[1]}")
    field = _WHITESPACE.split(lines[1].strip())
    if len(field) != 2 or field[0] != "topic_id:":
        raise ValueError(f"unrecognised partition metadata topic id line {lines[1]!r}")
    raw = base64.urlsafe_b64decode(field[1] + "=" * (-len(field[1]) % 4))
    return uuid.UUID(bytes=raw)


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id written in ``directory``, or None when there is no file."""
    try:
        text = (directory / PARTITION_METADATA_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return decode_partition_metadata(text)


def assign_topic_id(log: Any, topic_id: uuid.UUID) -> uuid.UUID | None:
    """Kafka's ``UnifiedLog.assignTopicId``: the topic id ``log`` belongs to, writing
    ``topic_id`` first if its directory has none yet. The answer differs from ``topic_id``
    when the log was written for another topic of the same name; None for a log without a
    directory."""
    directory = getattr(log, "directory", None)
    if not isinstance(directory, Path):
        return None
    current = read_partition_metadata(directory)
    if current is None:
        write_atomic(directory / PARTITION_METADATA_FILE, encode_partition_metadata(topic_id))
        return topic_id
    return current
