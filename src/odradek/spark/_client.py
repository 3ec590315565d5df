"""The data source's only door to the log: odradek.client, looked up lazily.

Driver-side metadata calls (partitions of a subscription, ListOffsets) go through a
per-process cache of ``Admin`` clients keyed by the client configuration; nothing holding a
socket is ever stored on a reader or writer (they are pickled to executors).

Used from odradek.client: ``Admin`` (list_topics, describe_topics, list_offsets,
create_topics), ``Producer`` (send, flush, close; idempotent) and ``read_range_arrow``.
"""

from __future__ import annotations

import atexit
import importlib
import re
import threading
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from odradek.spark.planning import OffsetQuery, TopicPartition

__all__ = [
    "admin",
    "client_module",
    "is_offset_out_of_range",
    "list_offsets",
    "subscribed_partitions",
]

_lock = threading.Lock()
_admins: dict[tuple[tuple[str, str], ...], Any] = {}


def client_module() -> ModuleType:
    return importlib.import_module("odradek.client")


def config_for(kind: str, config: Mapping[str, str]) -> dict[str, str]:
    """The part of ``config`` that a client of ``kind`` ("admin", "consumer", "producer")
    accepts: the data source's options mix keys meant for different clients (a source's
    ``kafka.fetch.max.bytes`` must not reach the Admin it uses for ListOffsets), and
    odradek.client refuses unknown keys."""
    try:
        # lazy: the client loads in the Spark tasks that use it (client_module), not on import
        from odradek.client import _config

        spec = getattr(_config, kind.upper())
    except (ImportError, AttributeError):
        return dict(config)
    return {k: v for k, v in config.items() if k in spec}


def admin(config: Mapping[str, str]) -> Any:
    """A cached Admin client for this configuration (one per process)."""
    config = config_for("admin", config)
    key = tuple(sorted(config.items()))
    with _lock:
        a = _admins.get(key)
        if a is None:
            a = client_module().Admin(dict(config))
            _admins[key] = a
        return a


def drop_admin(config: Mapping[str, str]) -> None:
    """Forget (and close) a cached Admin, e.g. after a connection error."""
    key = tuple(sorted(config_for("admin", config).items()))
    with _lock:
        a = _admins.pop(key, None)
    if a is not None and hasattr(a, "close"):
        try:
            a.close()
        except Exception:
            pass


@atexit.register
def _close_all() -> None:
    for key in list(_admins):
        drop_admin(dict(key))


def _partition_count(desc: Any) -> int:
    """Partition count from whatever describe_topics returns for one topic."""
    if isinstance(desc, int):
        return desc
    parts = getattr(desc, "partitions", None)
    if parts is None and isinstance(desc, Mapping):
        parts = desc.get("partitions")
    if isinstance(parts, int):
        return parts
    if parts is not None:
        return len(parts)
    return len(desc)


def _topic_names(listing: Any) -> list[str]:
    if isinstance(listing, Mapping):
        return [str(t) for t in listing]
    names = []
    for item in listing:
        names.append(item if isinstance(item, str) else str(getattr(item, "name", item)))
    return names


def subscribed_partitions(
    config: Mapping[str, str],
    *,
    subscribe: Iterable[str] | None = None,
    pattern: str | None = None,
    assign: Iterable[TopicPartition] | None = None,
) -> list[TopicPartition]:
    """The partitions a subscription covers right now (topics that do not exist: none)."""
    if assign is not None:
        return sorted(set(assign))
    a = admin(config)
    if subscribe is not None:
        topics = list(subscribe)
        existing = set(_topic_names(a.list_topics()))
        topics = [t for t in topics if t in existing]
    else:
        assert pattern is not None
        rx = re.compile(pattern)
        topics = sorted(
            t for t in _topic_names(a.list_topics()) if rx.fullmatch(t) and not t.startswith("__")
        )
    if not topics:
        return []
    described = a.describe_topics(topics)
    out: list[TopicPartition] = []
    for t in topics:
        desc = described[t] if isinstance(described, Mapping) else None
        if desc is None:
            continue
        out.extend((t, p) for p in range(_partition_count(desc)))
    return sorted(out)


def list_offsets(
    config: Mapping[str, str], queries: Mapping[TopicPartition, OffsetQuery]
) -> dict[TopicPartition, int]:
    """ListOffsets for each query; -1 where a timestamp query found no record.

    With ``isolation.level=read_committed`` in ``config``, "latest" is the last stable offset
    (the end of what a read_committed reader may read)."""
    if not queries:
        return {}
    read_committed = config.get("isolation.level") == "read_committed"
    answers = admin(config).list_offsets(dict(queries), read_committed=read_committed)
    out: dict[TopicPartition, int] = {}
    for tp, ans in answers.items():
        off = ans[0] if isinstance(ans, tuple | list) else getattr(ans, "offset", ans)
        out[(str(tp[0]), int(tp[1]))] = -1 if off is None else int(off)
    return out


def commit_group_offsets(
    config: Mapping[str, str], group: str, offsets: Mapping[TopicPartition, int]
) -> None:
    """Commit ``offsets`` (next offset to read per partition) to consumer group ``group``
    (OffsetCommit as an admin: no member, generation -1), so lag tools see the query."""
    if not offsets:
        return
    tps = client_module().TopicPartition
    admin(config).alter_group_offsets(group, {tps(t, p): o for (t, p), o in offsets.items()})


def is_offset_out_of_range(exc: BaseException) -> bool:
    """Whether a client error means the asked offset is not (any more) in the log."""
    return (
        getattr(exc, "code", None) == 1
        or "OffsetOutOfRange" in type(exc).__name__
        or ("OFFSET_OUT_OF_RANGE" in str(exc))
    )
