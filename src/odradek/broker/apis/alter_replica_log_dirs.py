"""AlterReplicaLogDirs (34): move this broker's replicas of some partitions to another of its
log directories (what ``kafka-reassign-partitions.sh`` sends for a reassignment naming log
dirs; Kafka's ``ReplicaManager.alterReplicaLogDirs``).

Each directory entry names an absolute path of ``log.dirs`` and the partitions to move there;
each partition answers ``odradek.broker.log_dirs.LogDirs.alter``'s verdict: NONE (the move
runs in the background, or the replica is there already), LOG_DIR_NOT_FOUND (57),
KAFKA_STORAGE_ERROR (56), REPLICA_NOT_AVAILABLE (9; the partition has no replica here: the
directory is remembered for when it gets one), and CLUSTER_AUTHORIZATION_FAILED for every
partition without ALTER on the cluster (there is no top-level error code). The results list
each topic once, in the order first named. v0 is served through v1's handler (the same
layout, ``legacy_versions``); v2 is v1 flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        AlterReplicaLogDirsRequest as Request,
    )
    from odradek.protocol.api_types import (
        AlterReplicaLogDirsResponse as Response,
    )

__all__ = ["API", "handle"]


def _respond(request: Request, verdict: Any) -> Response:
    """The response with ``verdict(topic, partition, path)`` for each partition named."""
    types = response_types(request)
    by_topic: dict[str, list[Any]] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            results = by_topic.setdefault(topic.name, [])
            for index in topic.partitions:
                results.append(
                    make(
                        types.AlterReplicaLogDirPartitionResult,
                        partition_index=index,
                        error_code=verdict(topic.name, int(index), entry.path),
                    )
                )
    return cast(
        "Response",
        make(
            types.AlterReplicaLogDirsResponse,
            throttle_time=NO_THROTTLE,
            results=tuple(
                make(types.AlterReplicaLogDirTopicResult, topic_name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
        ),
    )


def _refuse(request: Request, code: ErrorCode) -> Response:
    return _respond(request, lambda _t, _p, _d: code)


async def handle(ctx: RequestContext, request: Request) -> Response:
    return _respond(request, ctx.services.replica_manager.log_dirs.alter)


API = ApiSpec(
    key=34,
    name="AlterReplicaLogDirs",
    min_version=0,
    max_version=2,
    handler=handle,
    min_request_version=1,
    authorize=_authz.cluster(_authz.AclOperation.ALTER, _refuse),
)
