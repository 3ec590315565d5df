"""DescribeTransactions (65): the state of transactional ids (for tooling, KIP-664)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis import _transactions as glue
from odradek.broker.apis._util import make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import DescribeTransactionsRequest, DescribeTransactionsResponse

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    # with an authorizer: DESCRIBE on each transactional id, else
    # TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it (Kafka)
    denied = _authz.denied(
        ctx,
        _authz.AclOperation.DESCRIBE,
        _authz.ResourceType.TRANSACTIONAL_ID,
        request.transactional_ids,
    )
    allowed_ids = tuple(t for t in request.transactional_ids if t not in denied)
    asked = dataclasses.replace(request, transactional_ids=allowed_ids) if denied else request
    response = glue.describe_transactions(ctx.services.txn_coordinator.manager, asked)
    if not denied:
        return response
    described = iter(response.transaction_states)
    refused = response_types(request).TransactionState
    states = tuple(
        make(
            refused,
            error_code=ErrorCode.transactional_id_authorization_failed,
            transactional_id=t,
            transaction_state="",
            transaction_timeout=datetime.timedelta(0),
            transaction_start_time=datetime.datetime.fromtimestamp(0, datetime.UTC),
            producer_id=-1,
            producer_epoch=-1,
            topics=(),
        )
        if t in denied
        else next(described)
        for t in request.transactional_ids
    )
    return dataclasses.replace(response, transaction_states=states)


API = ApiSpec(key=65, name="DescribeTransactions", min_version=0, max_version=0, handler=handle)
