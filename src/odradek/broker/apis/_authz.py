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

from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import Authorize, RequestContext
from odradek.security.acls import CLUSTER_NAME, AclOperation, ResourceType

__all__ = [
    "AclOperation",
    "ResourceType",
    "allowed",
    "allowed_any",
    "authorized_operations",
    "cluster",
    "cluster_allowed",
    "denied",
    "enabled",
    "may_create_topic",
]


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


def cluster(op: AclOperation, refusal: Callable[[Any, ErrorCode], Any]) -> Authorize[Any, Any]:
    """An ``ApiSpec.authorize`` that needs ``op`` on the cluster and answers a refused request
    with ``refusal(request, CLUSTER_AUTHORIZATION_FAILED)``."""

    def authorize(ctx: RequestContext, request: Any) -> Any:
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
