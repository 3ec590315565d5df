"""DescribeLogDirs (35): the log directories of this broker and the partitions in each (what
``kafka-log-dirs.sh --describe`` shows; Kafka's ``ReplicaManager.describeLogDirs``).

One result per directory of ``log.dirs`` (none with in-memory storage): its absolute path and,
for every partition log in it (led or followed, internal topics included) that the request
names (``topics`` null: all), the size of its segments, ``offset_lag`` = max(high watermark -
log end offset, 0) and ``is_future_key`` false; a partition being moved here by
AlterReplicaLogDirs is listed in the target directory too, with ``is_future_key`` true, the
bytes copied so far and ``offset_lag`` = the current log's end offset minus the first offset
not yet copied (Kafka's: the current log end offset minus the future log's). An offline
directory answers KAFKA_STORAGE_ERROR (56) and no topics. v3 adds the top-level error code
(NONE), v4 the volume's total and usable bytes (``os.statvfs``, -1 when unavailable or
offline). v0 is served through v1's handler (the same layout, ``legacy_versions``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import DescribeLogDirsRequest, DescribeLogDirsResponse

__all__ = ["API", "handle"]


def _volume(path: Path) -> tuple[int, int]:
    """(total bytes, usable bytes) of the file system holding ``path``, or (-1, -1)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    log_manager = ctx.services.replica_manager.log_manager
    types = response_types(request)
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {}
        for t in request.topics:
            wanted.setdefault(t.topic, set()).update(int(p) for p in t.partitions)
    by_dir: dict[Path, dict[str, list[Any]]] = {Path(d).resolve(): {} for d in log_manager.log_dirs}
    for plog in sorted(log_manager.all_logs(), key=lambda lg: (lg.topic, lg.partition)):
        directory = getattr(plog, "directory", None)
        if directory is None or getattr(plog, "closed", False):
            continue
        if wanted is not None and plog.partition not in wanted.get(plog.topic, ()):
            continue
        topics = by_dir.setdefault(Path(directory).resolve().parent, {})
        topics.setdefault(plog.topic, []).append(
            make(
                types.DescribeLogDirsPartition,
                partition_index=plog.partition,
                partition_size=plog.size_in_bytes,
                offset_lag=max(plog.high_watermark - plog.log_end_offset, 0),
                is_future_key=False,
            )
        )
    for (topic, index), future in sorted(log_manager.future_logs().items()):
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        current = log_manager.get(topic, index)
        lag = 0 if current is None else max(current.log_end_offset - future.copied_offset(), 0)
        by_dir.setdefault(future.target_dir.resolve(), {}).setdefault(topic, []).append(
            make(
                types.DescribeLogDirsPartition,
                partition_index=index,
                partition_size=future.size_in_bytes,
                offset_lag=lag,
                is_future_key=True,
            )
        )
    offline = {Path(d).resolve() for d in log_manager.offline_dirs}
    results = []
    for log_dir, topics in by_dir.items():
        if log_dir in offline:
            results.append(
                make(
                    types.DescribeLogDirsResult,
                    error_code=ErrorCode.kafka_storage_error,
                    log_dir=str(log_dir),
                    topics=(),
                    total_bytes=-1,
                    usable_bytes=-1,
                )
            )
            continue
        total, usable = _volume(log_dir)
        results.append(
            make(
                types.DescribeLogDirsResult,
                error_code=ErrorCode.none,
                log_dir=str(log_dir),
                topics=tuple(
                    make(types.DescribeLogDirsTopic, name=name, partitions=tuple(parts))
                    for name, parts in topics.items()
                ),
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return cast(
        "DescribeLogDirsResponse",
        make(
            types.DescribeLogDirsResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            results=tuple(results),
        ),
    )


API = ApiSpec(
    key=35,
    name="DescribeLogDirs",
    min_version=0,
    max_version=4,
    handler=handle,
    min_request_version=1,
    authorize=_authz.cluster(_authz.AclOperation.DESCRIBE, _authz.refusal),
)
