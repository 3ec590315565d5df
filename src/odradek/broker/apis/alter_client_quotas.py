"""AlterClientQuotas (49), versions 0-1 (flexible from 1): set or remove quota values per
entity (``QuotaStore.alter_entities``: the data directory, or ZooKeeper in a cluster, where
every broker applies the change within a second), or only validate them. ZooKeeper out of
reach: REQUEST_TIMED_OUT. Needs ALTER_CONFIGS on the cluster
(refused: every entry CLUSTER_AUTHORIZATION_FAILED). An entity with an unknown or repeated
type, an unknown key or a value out of range is answered INVALID_REQUEST for that entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.metadata_store import MetadataUnavailableError
from odradek.security.quota_store import CLIENT_ID, USER, QuotaOp
from odradek.security.quotas import DEFAULT, ClientQuotaEntity

if TYPE_CHECKING:
    from odradek.protocol.api_types import AlterClientQuotasRequest, AlterClientQuotasResponse

__all__ = ["API", "handle"]


def _response(
    request: AlterClientQuotasRequest, results: list[tuple[ErrorCode, str | None]]
) -> AlterClientQuotasResponse:
    types = response_types(request)
    requested: tuple[Any, ...] = request.entries
    entries = tuple(
        make(
            types.EntryData,
            error_code=code,
            error_message=message,
            entity=tuple(
                make(types.EntityData, entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity
            ),
        )
        for entry, (code, message) in zip(requested, results, strict=True)
    )
    return cast(
        "AlterClientQuotasResponse",
        make(types.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=entries),
    )


def error_response(
    request: AlterClientQuotasRequest, code: ErrorCode, message: str | None = None
) -> AlterClientQuotasResponse:
    if message is None and code == ErrorCode.cluster_authorization_failed:
        message = "Cluster authorization failed."
    return _response(request, [(code, message)] * len(request.entries))


def _entity(entry: Any) -> ClientQuotaEntity | str:
    parts: dict[str, str] = {}
    for e in entry.entity:
        if e.entity_type not in (USER, CLIENT_ID):
            return f"Unhandled client quota entity type: {e.entity_type}"
        if e.entity_type in parts:
            return f"Duplicate quota entity type: {e.entity_type}"
        parts[e.entity_type] = DEFAULT if e.entity_name is None else e.entity_name
    return parts.get(USER), parts.get(CLIENT_ID)


async def handle(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    results: list[tuple[ErrorCode, str | None]] = [(ErrorCode.none, None)] * len(request.entries)
    changes: list[tuple[ClientQuotaEntity, list[QuotaOp]]] = []
    positions: list[int] = []
    requested: tuple[Any, ...] = request.entries
    for i, entry in enumerate(requested):
        entity = _entity(entry)
        if isinstance(entity, str):
            results[i] = (ErrorCode.invalid_request, entity)
            continue
        ops = [QuotaOp(o.key, float(o.value), bool(o.remove)) for o in entry.ops]
        changes.append((entity, ops))
        positions.append(i)
    try:
        errors = await ctx.services.quotas.alter_entities(changes, bool(request.validate_only))
    except MetadataUnavailableError as exc:  # ZooKeeper away (a cluster)
        for i in positions:
            results[i] = (ErrorCode.request_timed_out, str(exc))
        return _response(request, results)
    for i, error in zip(positions, errors, strict=True):
        if error is not None:
            results[i] = (ErrorCode.invalid_request, error)
    return _response(request, results)


API = ApiSpec(
    key=49,
    name="AlterClientQuotas",
    min_version=0,
    max_version=1,
    handler=handle,
    error_response=error_response,
    authorize=_authz.cluster(_authz.AclOperation.ALTER_CONFIGS, error_response),
)
