"""OffsetDelete (47): delete committed offsets of a group. Allowed for an Empty group, and for
topics the members of a consumer group do not subscribe to (else GROUP_SUBSCRIBED_TO_TOPIC)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.coordinator.state import Errors

if TYPE_CHECKING:
    from odradek.protocol.api_types import OffsetDeleteRequest, OffsetDeleteResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    types = response_types(request)
    coord = coordinator(ctx)
    # with an authorizer: READ on each topic (its partitions 29 otherwise, as Kafka); DELETE on
    # the group is ApiSpec.authorize's
    names = (t.name for t in request.topics)
    denied = _authz.denied(ctx, _authz.AclOperation.READ, _authz.ResourceType.TOPIC, names)
    wanted = [
        (t.name, int(p.partition_index))
        for t in request.topics
        if t.name not in denied
        for p in t.partitions
    ]
    top, deleted = await coord.delete_offsets(request.group_id, wanted)
    done = iter(deleted)
    errors = [
        29 if t.name in denied else next(done, 0) for t in request.topics for _ in t.partitions
    ]
    topics: tuple[Any, ...] = ()
    if top is Errors.NONE:
        it = iter(errors)
        topics = tuple(
            make(
                types.OffsetDeleteResponseTopic,
                name=t.name,
                partitions=tuple(
                    make(
                        types.OffsetDeleteResponsePartition,
                        partition_index=p.partition_index,
                        error_code=code(next(it)),
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    return cast(
        "OffsetDeleteResponse",
        make(
            types.OffsetDeleteResponse,
            error_code=code(top),
            throttle_time=NO_THROTTLE,
            topics=topics,
        ),
    )


API = ApiSpec(
    key=47,
    name="OffsetDelete",
    min_version=0,
    max_version=0,
    handler=handle,
    authorize=_authz.group(_authz.AclOperation.DELETE),
)
