"""Authorization for the handlers: one place that asks the broker's authorizer.

Two ways an API is checked, following Kafka's "Operations and Resources on Protocols" table:

* a request authorized as a whole declares it in its ``ApiSpec.authorize``: ``cluster(op,
  refusal)`` is the common case (CLUSTER_ACTION for inter-broker requests, ALTER or DESCRIBE on
  the cluster for administrative ones), answered with ``refusal(request,
  CLUSTER_AUTHORIZATION_FAILED)``; ``registry.load_registry`` runs it before the handler;
* a request about several resources (a Produce's topics, a Metadata request's) asks
  ``allowed(ctx, op, type, name)`` per resource and answers each refused one with its error.

Without an authorizer (``authorizer.class.name`` empty) everything is allowed and no check
runs: ``allowed`` returns True at the cost of one attribute test.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from odradek.broker.api import Authorize, RequestContext
from odradek.broker.apis._util import KioEntity, response_types
from odradek.security.acls import CLUSTER_NAME, AclOperation, ResourceType

__all__ = [
    "AclOperation",
    "ResourceType",
    "all_of",
    "allowed",
    "allowed_any",
    "authorized_operations",
    "cluster",
    "cluster_action",
    "cluster_action_at_version",
    "cluster_allowed",
    "config_refusal",
    "denied",
    "enabled",
    "group",
    "may_create_topic",
    "producer",
    "refusal",
    "resource",
    "transactional_id",
]


_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
_KioReq = TypeVar("_KioReq", bound=KioEntity)
_TxnReq = TypeVar("_TxnReq", bound="_TransactionalRequest")


class _GroupRequest(KioEntity, Protocol):
    """A kio request naming a group (JoinGroup, OffsetCommit, AddOffsetsToTxn, ...)."""

    @property
    def group_id(self) -> str: ...


class _TransactionalRequest(KioEntity, Protocol):
    """A kio request naming a transactional id (AddPartitionsToTxn, EndTxn, ...)."""

    @property
    def transactional_id(self) -> str | None: ...


def enabled(ctx: RequestContext) -> bool:
    return ctx.services.acls is not None


def allowed(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str) -> bool:
    """May the request's principal, from its host, do ``op`` on the resource?"""
    store = ctx.services.acls
    if store is None:
        return True
    return store.authorizer.authorize(ctx.principal, ctx.client_host, op, rtype, name)


def cluster_allowed(ctx: RequestContext, op: AclOperation) -> bool:
    return allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)


def allowed_any(ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
    """May the principal do ``op`` on some resource of the type (Kafka's authorizeByResourceType)?"""
    store = ctx.services.acls
    if store is None:
        return True
    return store.authorizer.authorize_by_resource_type(ctx.principal, ctx.client_host, op, rtype)


def authorized_operations(
    ctx: RequestContext, rtype: ResourceType, name: str, supported: int
) -> int:
    """The bit field of the operations of ``supported`` (a bit per AclOperation code) the
    principal may do on the resource (KIP-430's authorized_operations)."""
    if ctx.services.acls is None:
        return supported
    bits = 0
    for op in AclOperation:
        if supported & (1 << op) and allowed(ctx, op, rtype, name):
            bits |= 1 << op
    return bits


def cluster(
    op: AclOperation, refusal: Callable[[_Req, ErrorCode], _Resp]
) -> Authorize[_Req, _Resp]:
    """An ``ApiSpec.authorize`` that needs ``op`` on the cluster and answers a refused request
    with ``refusal(request, CLUSTER_AUTHORIZATION_FAILED)``."""

    def authorize(ctx: RequestContext, request: _Req) -> _Resp | None:
        if cluster_allowed(ctx, op):
            return None
        return refusal(request, ErrorCode.cluster_authorization_failed)

    return authorize


def denied(
    ctx: RequestContext, op: AclOperation, rtype: ResourceType, names: Iterable[str]
) -> frozenset[str]:
    """The names among ``names`` the principal may not ``op`` (empty without an authorizer)."""
    store = ctx.services.acls
    if store is None:
        return frozenset()
    authorize = store.authorizer.authorize
    principal, host = ctx.principal, ctx.client_host
    return frozenset(n for n in set(names) if not authorize(principal, host, op, rtype, n))


def may_create_topic(ctx: RequestContext, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka's check for CreateTopics and auto-creation)."""
    return cluster_allowed(ctx, AclOperation.CREATE) or allowed(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, name
    )


_EMPTY: dict[str, Any] = {
    "string": "",
    "bytes": b"",
    "bool": False,
    "int8": -1,
    "int16": -1,
    "int32": -1,
    "int64": -1,
    "uint16": 0,
    "float64": 0.0,
    "uuid": None,
    "records": None,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": None,
}


def _is_tuple(t: Any) -> bool:
    return t.startswith("tuple[") if isinstance(t, str) else typing.get_origin(t) is tuple


def _is_optional(t: Any) -> bool:
    if isinstance(t, str):
        return t.endswith("| None")
    return type(None) in typing.get_args(t)


def refusal(request: KioEntity, code: ErrorCode) -> Any:
    """The response of a request refused as a whole, for an API whose response has a top-level
    ``error_code``: that code, throttle time 0, every list empty and every other field its
    default (or -1, "", null): what Kafka answers (``getErrorResponse``) for such APIs."""
    cls = response_types(request).__dict__[type(request).__name__.replace("Request", "Response")]
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            values[f.name] = code
        elif f.default is not dataclasses.MISSING:
            continue
        elif _is_tuple(f.type):
            values[f.name] = ()
        elif _is_optional(f.type):
            values[f.name] = None
        else:
            values[f.name] = _EMPTY.get(f.metadata.get("kafka_type", ""))
    return cls(**values)


def resource(
    op: AclOperation,
    rtype: ResourceType,
    name_of: Callable[[_KioReq], str | None],
    code: ErrorCode,
    refuse: Callable[[_KioReq, ErrorCode], Any] = refusal,
) -> Authorize[_KioReq, Any]:
    """An ``ApiSpec.authorize`` that needs ``op`` on the resource ``name_of(request)`` names (a
    group, a transactional id) and answers ``refuse(request, code)`` otherwise; a request naming
    none (None) is not checked here."""

    def authorize(ctx: RequestContext, request: _KioReq) -> Any:
        name = name_of(request)
        if name is None or allowed(ctx, op, rtype, name):
            return None
        return refuse(request, code)

    return authorize


def _group_id(request: _GroupRequest) -> str:
    return request.group_id


def _transactional_id(request: _TransactionalRequest) -> str | None:
    return request.transactional_id


def group(op: AclOperation) -> Authorize[_GroupRequest, Any]:
    """``op`` on the request's ``group_id``, else GROUP_AUTHORIZATION_FAILED."""
    return resource(op, ResourceType.GROUP, _group_id, ErrorCode.group_authorization_failed)


def transactional_id(
    op: AclOperation = AclOperation.WRITE,
) -> Authorize[_TransactionalRequest, Any]:
    """``op`` on the request's ``transactional_id``, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    return resource(
        op,
        ResourceType.TRANSACTIONAL_ID,
        _transactional_id,
        ErrorCode.transactional_id_authorization_failed,
    )


def cluster_action() -> Authorize[KioEntity, Any]:
    """CLUSTER_ACTION on the cluster (inter-broker APIs), else the generic refusal."""
    return cluster(AclOperation.CLUSTER_ACTION, refusal)


def cluster_action_at_version(
    refuse: Callable[[_Req, int, ErrorCode], _Resp],
) -> Authorize[_Req, _Resp]:
    """CLUSTER_ACTION on the cluster, answered ``refuse(request, version, code)`` otherwise (the
    inter-broker APIs whose hand-written encoders take the request's version)."""

    def authorize(ctx: RequestContext, request: _Req) -> _Resp | None:
        if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
            return None
        return refuse(request, ctx.header.api_version, ErrorCode.cluster_authorization_failed)

    return authorize


def all_of(*checks: Authorize[_Req, _Resp]) -> Authorize[_Req, _Resp]:
    """The first refusal of ``checks``, in order (Kafka checks a transactional id before a group)."""

    def authorize(ctx: RequestContext, request: _Req) -> _Resp | None:
        for check in checks:
            refused = check(ctx, request)
            if refused is not None:
                return refused
        return None

    return authorize


def producer(
    refuse: Callable[[_TxnReq, ErrorCode], _Resp],
) -> Authorize[_TxnReq, _Resp]:
    """InitProducerId: WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    without one (an idempotent producer) IDEMPOTENT_WRITE on the cluster or WRITE on some
    topic (else CLUSTER_AUTHORIZATION_FAILED), as Kafka checks."""

    def authorize(ctx: RequestContext, request: _TxnReq) -> _Resp | None:
        txn_id = request.transactional_id
        if txn_id is not None:
            if allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
                return None
            return refuse(request, ErrorCode.transactional_id_authorization_failed)
        if cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE) or allowed_any(
            ctx, AclOperation.WRITE, ResourceType.TOPIC
        ):
            return None
        return refuse(request, ErrorCode.cluster_authorization_failed)

    return authorize


# ConfigResource types (DescribeConfigs, AlterConfigs) -> the ACL resource and the refusal
_CONFIG_RESOURCES: dict[int, tuple[ResourceType, ErrorCode]] = {
    2: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed),
    4: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),  # BROKER
    8: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),  # BROKER_LOGGER
    32: (ResourceType.GROUP, ErrorCode.group_authorization_failed),
    16: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),  # CLIENT_METRICS
}


def config_refusal(
    ctx: RequestContext, op: AclOperation, config_type: int, name: str
) -> ErrorCode | None:
    """The error for a config resource the principal may not ``op`` (DESCRIBE_CONFIGS or
    ALTER_CONFIGS on the topic, the cluster for a broker or its loggers, the group), or None."""
    if ctx.services.acls is None or config_type not in _CONFIG_RESOURCES:
        return None
    rtype, code = _CONFIG_RESOURCES[config_type]
    target = CLUSTER_NAME if rtype == ResourceType.CLUSTER else name
    return None if allowed(ctx, op, rtype, target) else code
