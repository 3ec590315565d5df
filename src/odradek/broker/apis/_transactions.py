"""kio glue of the transaction APIs: kio request -> ``TransactionStateManager`` -> kio response.

Kept out of the coordinator package (which does not import kio), next to the group APIs' glue.
Each function is pure like the manager: it returns the manager's ``Outcome`` with the kio
response entity for the request's version in ``response``; the API module appends
``outcome.records`` (grouped by ``manager.partition_for(transactional_id)``: a batched
AddPartitionsToTxn v4+ can touch several ``__transaction_state`` partitions), replays them,
answers, then writes ``outcome.markers`` (see docs/transactions.md).

PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for request versions older than KIP-588
(``fenced_error``), as Kafka's KafkaApis does.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import sys
from collections.abc import Callable, Mapping
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from odradek.broker.apis._util import KioEntity
from odradek.coordinator.transaction.manager import (
    Outcome,
    TransactionStateManager,
    TxnMarker,
    fenced_error,
)
from odradek.coordinator.transaction.records import TransactionLogRecord
from odradek.coordinator.transaction.state import Errors, TransactionResult
from odradek.protocol.messages import make_entity

if TYPE_CHECKING:
    from kio.schema.list_transactions.v2.request import (
        ListTransactionsRequest as ListTransactionsRequestV2,
    )

    from odradek.protocol.api_types import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnRequestV0,
        AddPartitionsToTxnRequestV1,
        AddPartitionsToTxnRequestV2,
        AddPartitionsToTxnRequestV3,
        AddPartitionsToTxnRequestV4,
        AddPartitionsToTxnResponse,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        EndTxnRequest,
        EndTxnResponse,
        InitProducerIdRequest,
        InitProducerIdRequestV3,
        InitProducerIdRequestV4,
        InitProducerIdResponse,
        ListTransactionsRequest,
        ListTransactionsRequestV1,
        ListTransactionsResponse,
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    )

__all__ = [
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "describe_transactions",
    "end_txn",
    "init_producer_id",
    "list_transactions",
    "txn_markers_of",
    "with_error",
    "write_txn_markers_response",
]

_NO_THROTTLE = datetime.timedelta(0)
_ONE_MS = datetime.timedelta(milliseconds=1)


@cache
def _types(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_response_schema(api_key, version).__module__]


_make = make_entity


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value / _ONE_MS)
    return int(value)


def _code(error: Errors, request: KioEntity) -> ErrorCode:
    return ErrorCode(int(fenced_error(error, int(request.__api_key__), int(request.__version__))))


def _version(request: KioEntity) -> ModuleType:
    return _types(int(request.__api_key__), int(request.__version__))


def with_error(response: Any, error: Errors) -> Any:
    """``response`` with every error code (``error_code``, ``partition_error_code``, top level
    and nested) set to ``error``: the
    answer when the coordinator could not write the request's records (Kafka answers an append
    failure with COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, which clients retry)."""
    if isinstance(response, tuple):
        return tuple(with_error(item, error) for item in response)
    if not dataclasses.is_dataclass(response) or isinstance(response, type):
        return response
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(response):
        value = getattr(response, f.name)
        if f.name == "error_code" or f.name.endswith("_error_code"):
            changes[f.name] = ErrorCode(int(error))
        elif isinstance(value, tuple) or dataclasses.is_dataclass(value):
            changes[f.name] = with_error(value, error)
    return dataclasses.replace(response, **changes)


def _names_producer(
    request: InitProducerIdRequest,
) -> TypeGuard[InitProducerIdRequestV3 | InitProducerIdRequestV4]:
    """v3+ may name the producer id and epoch to bump (KIP-360)."""
    return request.__version__ >= 3


def init_producer_id(
    manager: TransactionStateManager, request: InitProducerIdRequest, now_ms: int
) -> Outcome[InitProducerIdResponse]:
    """InitProducerId (22), v0-v6."""
    pid, epoch = (
        (int(request.producer_id), int(request.producer_epoch))
        if _names_producer(request)
        else (-1, -1)
    )
    out = manager.init_producer_id(
        request.transactional_id, _ms(request.transaction_timeout), now_ms, pid, epoch
    )
    result = out.response
    assert result is not None
    response = _make(
        _version(request).InitProducerIdResponse,
        throttle_time=_NO_THROTTLE,
        error_code=_code(result.error, request),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
    return Outcome(out.records, response, out.markers)


def _one_transaction(
    request: AddPartitionsToTxnRequest,
) -> TypeGuard[
    AddPartitionsToTxnRequestV0
    | AddPartitionsToTxnRequestV1
    | AddPartitionsToTxnRequestV2
    | AddPartitionsToTxnRequestV3
]:
    """v0-v3: one transaction, from its producer."""
    return request.__version__ <= 3


def _batched(request: AddPartitionsToTxnRequest) -> TypeGuard[AddPartitionsToTxnRequestV4]:
    """v4+: a batch of transactions, from brokers (KIP-890 part 1)."""
    return request.__version__ >= 4


def add_partitions_to_txn(
    manager: TransactionStateManager,
    request: AddPartitionsToTxnRequest,
    now_ms: int,
    partition_exists: Callable[[str, int], bool],
) -> Outcome[AddPartitionsToTxnResponse]:
    """AddPartitionsToTxn (24): v0-v3 (one transaction, from a producer) and v4+ (a batch of
    transactions, ``verify_only`` from partition leaders: KIP-890 part 1). Unknown partitions
    fail the transaction's request: UNKNOWN_TOPIC_OR_PARTITION for them and
    OPERATION_NOT_ATTEMPTED for the rest, as Kafka does."""
    types = _version(request)
    records: list[TransactionLogRecord] = []

    def one(txn_id: str, pid: int, epoch: int, topics: Any, verify: bool) -> tuple[Any, ...]:
        wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
        unknown = {tp for tp in wanted if not partition_exists(*tp)}
        if unknown:
            errors = {
                tp: Errors.UNKNOWN_TOPIC_OR_PARTITION
                if tp in unknown
                else Errors.OPERATION_NOT_ATTEMPTED
                for tp in wanted
            }
        elif verify:
            errors = manager.verify_partitions(txn_id, pid, epoch, wanted)
        else:
            out = manager.add_partitions(txn_id, pid, epoch, wanted, now_ms)
            records.extend(out.records)
            assert out.response is not None
            errors = dict.fromkeys(wanted, out.response)
        by_topic: dict[str, list[Any]] = {}
        for (topic, p), error in errors.items():
            by_topic.setdefault(topic, []).append(
                _make(
                    types.AddPartitionsToTxnPartitionResult,
                    partition_index=p,
                    partition_error_code=_code(error, request),
                )
            )
        return tuple(
            _make(types.AddPartitionsToTxnTopicResult, name=t, results_by_partition=tuple(rs))
            for t, rs in by_topic.items()
        )

    if _one_transaction(request):
        results = one(
            request.v3_and_below_transactional_id,
            int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            request.v3_and_below_topics,
            False,
        )
        response = _make(
            types.AddPartitionsToTxnResponse,
            throttle_time=_NO_THROTTLE,
            results_by_topic_v3_and_below=results,
        )
        return Outcome(records, response)
    if not _batched(request):  # pragma: no cover - every version is one or the other
        raise AssertionError(request.__version__)
    per_txn = tuple(
        _make(
            types.AddPartitionsToTxnResult,
            transactional_id=txn.transactional_id,
            topic_results=one(
                txn.transactional_id,
                int(txn.producer_id),
                int(txn.producer_epoch),
                txn.topics,
                bool(txn.verify_only),
            ),
        )
        for txn in request.transactions
    )
    response = _make(
        types.AddPartitionsToTxnResponse,
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        results_by_transaction=per_txn,
    )
    return Outcome(records, response)


def add_offsets_to_txn(
    manager: TransactionStateManager, request: AddOffsetsToTxnRequest, now_ms: int
) -> Outcome[AddOffsetsToTxnResponse]:
    """AddOffsetsToTxn (25), v0-v4."""
    out = manager.add_offsets(
        request.transactional_id,
        int(request.producer_id),
        int(request.producer_epoch),
        request.group_id,
        now_ms,
    )
    assert out.response is not None
    response = _make(
        _version(request).AddOffsetsToTxnResponse,
        throttle_time=_NO_THROTTLE,
        error_code=_code(out.response, request),
    )
    return Outcome(out.records, response)


def end_txn(
    manager: TransactionStateManager, request: EndTxnRequest, now_ms: int
) -> Outcome[EndTxnResponse]:
    """EndTxn (26), v0-v5 (v5's producer id/epoch fields are KIP-890 part 2: -1 here)."""
    out = manager.end_txn(
        request.transactional_id,
        int(request.producer_id),
        int(request.producer_epoch),
        bool(request.committed),
        now_ms,
    )
    assert out.response is not None
    response = _make(
        _version(request).EndTxnResponse,
        throttle_time=_NO_THROTTLE,
        error_code=_code(out.response, request),
        producer_id=-1,
        producer_epoch=-1,
    )
    return Outcome(out.records, response, out.markers)


def describe_transactions(
    manager: TransactionStateManager, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    """DescribeTransactions (65), v0."""
    types = _version(request)
    states = tuple(
        _make(
            types.TransactionState,
            error_code=ErrorCode(int(d.error)),
            transactional_id=d.transactional_id,
            transaction_state=d.state,
            transaction_timeout=datetime.timedelta(milliseconds=d.transaction_timeout_ms),
            transaction_start_time=datetime.datetime.fromtimestamp(
                (d.transaction_start_time_ms if d.error is Errors.NONE else 0) / 1000, datetime.UTC
            ),
            producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            topics=tuple(_make(types.TopicData, topic=t, partitions=ps) for t, ps in d.topics),
        )
        for d in manager.describe_transactions(request.transactional_ids)
    )
    return cast(
        "DescribeTransactionsResponse",
        _make(
            types.DescribeTransactionsResponse,
            throttle_time=_NO_THROTTLE,
            transaction_states=states,
        ),
    )


def _filters_duration(
    request: ListTransactionsRequest | ListTransactionsRequestV2,
) -> TypeGuard[ListTransactionsRequestV1 | ListTransactionsRequestV2]:
    """v1+ may filter by running time (KIP-994)."""
    return request.__version__ >= 1


def _filters_id(
    request: ListTransactionsRequest | ListTransactionsRequestV2,
) -> TypeGuard[ListTransactionsRequestV2]:
    """v2+ may filter by a transactional id pattern (KIP-1152)."""
    return request.__version__ >= 2


def list_transactions(
    manager: TransactionStateManager,
    request: ListTransactionsRequest | ListTransactionsRequestV2,
    now_ms: int,
) -> ListTransactionsResponse:
    """ListTransactions (66), v0-v2 (v1 duration filter, v2 transactional id pattern: a Java
    regular expression matched against the whole id; Python's ``re`` reads the usual ones)."""
    types = _version(request)
    pattern = request.transactional_id_pattern if _filters_id(request) else None
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error:
            return cast(
                "ListTransactionsResponse",
                _make(
                    types.ListTransactionsResponse,
                    throttle_time=_NO_THROTTLE,
                    error_code=ErrorCode.invalid_regular_expression,
                    unknown_state_filters=(),
                    transaction_states=(),
                ),
            )
    result = manager.list_transactions(
        request.state_filters,
        [int(p) for p in request.producer_id_filters],
        now_ms,
        int(request.duration_filter) if _filters_duration(request) else -1,
    )
    listed = [t for t in result.transactions if not pattern or regex.fullmatch(t.transactional_id)]
    return cast(
        "ListTransactionsResponse",
        _make(
            types.ListTransactionsResponse,
            throttle_time=_NO_THROTTLE,
            error_code=ErrorCode(int(result.error)),
            unknown_state_filters=result.unknown_state_filters,
            transaction_states=tuple(
                _make(
                    types.TransactionState,
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.state,
                )
                for t in listed
            ),
        ),
    )


# -- WriteTxnMarkers (27) on the partition leader ----------------------------------------


def txn_markers_of(request: WriteTxnMarkersRequest) -> list[TxnMarker]:
    """The markers a WriteTxnMarkers request asks this leader to append, in request order."""
    return [
        TxnMarker(
            topic.name,
            int(p),
            int(marker.producer_id),
            int(marker.producer_epoch),
            TransactionResult.COMMIT if marker.transaction_result else TransactionResult.ABORT,
            int(marker.coordinator_epoch),
        )
        for marker in request.markers
        for topic in marker.topics
        for p in topic.partition_indexes
    ]


def write_txn_markers_response(
    request: WriteTxnMarkersRequest, errors: Mapping[tuple[int, str, int], int]
) -> WriteTxnMarkersResponse:
    """The response: ``errors[(producer id, topic, partition)]`` (a Kafka error code) per
    marker (NONE if absent)."""
    types = _version(request)
    return cast(
        "WriteTxnMarkersResponse",
        _make(
            types.WriteTxnMarkersResponse,
            markers=tuple(
                _make(
                    types.WritableTxnMarkerResult,
                    producer_id=marker.producer_id,
                    topics=tuple(
                        _make(
                            types.WritableTxnMarkerTopicResult,
                            name=topic.name,
                            partitions=tuple(
                                _make(
                                    types.WritableTxnMarkerPartitionResult,
                                    partition_index=p,
                                    error_code=ErrorCode(
                                        int(
                                            errors.get(
                                                (int(marker.producer_id), topic.name, int(p)),
                                                Errors.NONE,
                                            )
                                        )
                                    ),
                                )
                                for p in topic.partition_indexes
                            ),
                        )
                        for topic in marker.topics
                    ),
                )
                for marker in request.markers
            ),
        ),
    )
