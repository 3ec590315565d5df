"""The one list of Kafka APIs the broker serves: ``API_SPECS``, one spec per API module.

Adding an API is adding one module under ``odradek.broker.apis`` (see ``odradek.broker.api``)
and one line here. ApiVersions is answered from this list, so what is advertised and what is
served cannot drift apart. Every module is imported directly: a missing one fails at import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from odradek.broker.api import (
    ApiSpec,
    EncodedResponse,
    Req,
    RequestContext,
    RequestHeaderInfo,
    Resp,
    Response,
)
from odradek.broker.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    api_versions,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    get_telemetry_subscriptions,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_client_metrics_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offsets_for_leader_epoch,
    produce,
    push_telemetry,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_metadata,
    write_txn_markers,
)

__all__ = [
    "API_SPECS",
    "ApiSpec",
    "EncodedResponse",
    "RequestContext",
    "RequestHeaderInfo",
    "Response",
    "load_registry",
]

API_SPECS: tuple[ApiSpec[Any, Any], ...] = (
    api_versions.API,
    sasl_handshake.API,
    sasl_authenticate.API,
    describe_user_scram_credentials.API,
    alter_user_scram_credentials.API,
    metadata.API,
    produce.API,
    fetch.API,
    list_offsets.API,
    offsets_for_leader_epoch.API,
    init_producer_id.API,
    create_topics.API,
    delete_topics.API,
    delete_records.API,
    create_partitions.API,
    describe_configs.API,
    alter_configs.API,
    incremental_alter_configs.API,
    describe_cluster.API,
    describe_log_dirs.API,
    alter_replica_log_dirs.API,
    # group coordinator APIs
    find_coordinator.API,
    join_group.API,
    sync_group.API,
    heartbeat.API,
    leave_group.API,
    offset_commit.API,
    offset_fetch.API,
    list_groups.API,
    describe_groups.API,
    delete_groups.API,
    offset_delete.API,
    # transaction coordinator APIs (KIP-98)
    add_partitions_to_txn.API,
    add_offsets_to_txn.API,
    end_txn.API,
    write_txn_markers.API,
    txn_offset_commit.API,
    describe_transactions.API,
    list_transactions.API,
    describe_producers.API,
    # inter-broker (ZooKeeper mode) APIs
    leader_and_isr.API,
    stop_replica.API,
    # cluster on ZooKeeper: from the controller, and to the controller
    update_metadata.API,
    controlled_shutdown.API,
    alter_partition.API,
    elect_leaders.API,
    alter_partition_reassignments.API,
    list_partition_reassignments.API,
    # ACLs
    describe_acls.API,
    create_acls.API,
    delete_acls.API,
    # client quotas
    describe_client_quotas.API,
    alter_client_quotas.API,
    # client telemetry (KIP-714)
    get_telemetry_subscriptions.API,
    push_telemetry.API,
    list_client_metrics_resources.API,
)


def _guarded(spec: ApiSpec[Req, Resp]) -> ApiSpec[Req, Resp]:
    """``spec`` whose handler first runs its ``authorize`` check when the broker has an
    authorizer (and answers the refusal it returns instead of running the handler)."""
    check, handler = spec.authorize, spec.handler
    if check is None:
        return spec

    async def handle(ctx: RequestContext, request: Req) -> Resp:
        if ctx.services.acls is not None:
            refusal = check(ctx, request)
            if refusal is not None:
                return refusal
        return await handler(ctx, request)

    return dataclasses.replace(spec, handler=handle)


def load_registry(specs: Iterable[ApiSpec[Any, Any]] = API_SPECS) -> dict[int, ApiSpec[Any, Any]]:
    """Index ``specs`` by api key (two specs for one key are an error); a spec that declares an
    ``authorize`` check gets a handler that runs it first."""
    registry: dict[int, ApiSpec[Any, Any]] = {}
    for spec in map(_guarded, specs):
        if spec.key in registry:
            raise RuntimeError(
                f"two modules serve api key {spec.key}: {registry[spec.key].name}, {spec.name}"
            )
        registry[spec.key] = spec
    return registry
