"""Produce (0): append record batches; acks 0, 1 and -1; idempotent producers.

Advertised from v0 (old librdkafka probes exact versions to enable features), served from v3
(RecordBatch v2 only). Per partition, in this order, and nothing is written from a rejected
partition's data:

0. with an authorizer: a transactional request needs WRITE on its transactional id (else
   TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), each topic WRITE (else
   TOPIC_AUTHORIZATION_FAILED for its partitions, nothing written);
1. unknown topic or a partition index out of range → UNKNOWN_TOPIC_OR_PARTITION (Produce never
   creates a topic, as in Kafka: auto.create.topics.enable is Metadata's); a partition this
   broker does not lead → NOT_LEADER_OR_FOLLOWER;
2. every batch: whole (else CORRUPT_MESSAGE), magic 2 (else INVALID_RECORD), size ≤ the
   topic's max.message.bytes (else MESSAGE_TOO_LARGE);
3. idempotence (producerId ≥ 0): see ``odradek.storage.producer_state`` — a duplicate is answered
   with the original base offset and not appended; a transactional batch (KIP-98) opening the
   producer's transaction on the partition is first verified with the transaction coordinator
   (KIP-890 part 1: the partition must be in the producer's ongoing transaction, else
   INVALID_TXN_STATE; a fenced producer gets INVALID_PRODUCER_EPOCH) and then tracked in the
   partition's producer state (its last stable offset);
4. append (storage checks the CRC: CORRUPT_MESSAGE) with LogAppendTime when the topic says so;
   then Fetch waiters on the partition are woken, and the appended bytes and records are
   reported to ``RequestContext.metrics`` (BytesInPerSec / MessagesInPerSec; a duplicate is not).

acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS for every partition). acks=0 gets no
response. acks=-1 (Kafka's DelayedProduce): before the append, an ISR smaller than
min.insync.replicas (topic config, else the broker default) → NOT_ENOUGH_REPLICAS and nothing
is written; after it, the request waits (``ReplicaManager.wait_for_acks``, all partitions at
once, at most the request's timeout) until the high watermark passes the appended records:
NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below the minimum meanwhile),
NOT_LEADER_OR_FOLLOWER (leadership lost) or REQUEST_TIMED_OUT. Alone the high watermark
follows the log end offset, so it never waits.

Steps 1 to 4 and the acks=-1 wait are ``ReplicaManager.append_records``
→ ``Partition.append_as_leader``'s; this module decodes, asks the transaction
coordinator (KIP-890) when it is on another broker, reports metrics and encodes.

Requests are decoded by ``odradek.protocol.produce_request`` (``ApiSpec.decoder``):
above 16 KiB ``records`` are views of the request frame, stamped in place and written without a
copy; smaller requests are kio entities (faster to decode). Both have the same field names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, EncodedResponse, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.broker_channel import BrokerUnavailableError
from odradek.broker.partition import TxnVerifier
from odradek.broker.services import BrokerServices
from odradek.coordinator.transaction import requests as txn_glue
from odradek.protocol.produce_request import ProduceRequest, decode_produce_request
from odradek.protocol.produce_response import PartitionTuple as PartitionResult
from odradek.protocol.produce_response import encode_produce_response

__all__ = ["API", "handle"]

if TYPE_CHECKING:
    # Only for the checker: importing every kio version costs the broker's start-up (the
    # one a request uses is imported when it is first decoded).
    from kio.schema.produce.v3.request import ProduceRequest as ProduceRequestV3
    from kio.schema.produce.v4.request import ProduceRequest as ProduceRequestV4
    from kio.schema.produce.v5.request import ProduceRequest as ProduceRequestV5
    from kio.schema.produce.v6.request import ProduceRequest as ProduceRequestV6
    from kio.schema.produce.v7.request import ProduceRequest as ProduceRequestV7
    from kio.schema.produce.v8.request import ProduceRequest as ProduceRequestV8
    from kio.schema.produce.v9.request import ProduceRequest as ProduceRequestV9
    from kio.schema.produce.v10.request import ProduceRequest as ProduceRequestV10

    DecodedProduceRequest = (
        ProduceRequest
        | ProduceRequestV3
        | ProduceRequestV4
        | ProduceRequestV5
        | ProduceRequestV6
        | ProduceRequestV7
        | ProduceRequestV8
        | ProduceRequestV9
        | ProduceRequestV10
    )
    """What ``decode_produce_request`` gives: kio's request below 16 KiB, the zero-copy one above
    (the same field names, but ``timeout_ms`` for kio's ``timeout``)."""


_NONE = ErrorCode.none
_TXN_STATE = ErrorCode.invalid_txn_state
_BAD_EPOCH = ErrorCode.invalid_producer_epoch
_TOPIC_DENIED = ErrorCode.topic_authorization_failed
_TXN_ID_DENIED = ErrorCode.transactional_id_authorization_failed
_WRITE = _authz.AclOperation.WRITE
_TOPIC = _authz.ResourceType.TOPIC


def _failed(index: int, code: ErrorCode) -> PartitionResult:
    return (index, code, -1, -1, -1, (), None)


_NO_DENIALS: frozenset[str] = frozenset()


def _timeout_s(request: DecodedProduceRequest) -> float:
    """The request's timeout in seconds (never negative)."""
    ms = (
        request.timeout_ms
        if isinstance(request, ProduceRequest)
        else int(request.timeout.total_seconds() * 1000)
    )
    return max(0, ms) / 1000


async def handle(ctx: RequestContext, request: DecodedProduceRequest) -> EncodedResponse | None:
    """Decode, ask ``ReplicaManager.append_records`` (which waits for acks=all), encode.

    Every hook costs an attribute test when it is not configured: no authorizer, no quota,
    no metrics, no transaction; acks 0 and 1 (and a leader alone) create no ``DelayedProduce``.
    """
    services = ctx.services
    acks = request.acks
    topic_data = request.topic_data
    transactional_id = request.transactional_id
    denied = _NO_DENIALS
    if services.acls is not None:
        denied = _authz.denied(ctx, _WRITE, _TOPIC, (td.name for td in topic_data))
        if transactional_id is not None and not _authz.allowed(
            ctx, _WRITE, _authz.ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            return None if acks == 0 else error_response(request, _TXN_ID_DENIED)
    verify_txn = None
    if transactional_id is not None:
        remote = await _verify_at_coordinator(services, transactional_id, request)
        verify_txn = _txn_verifier(services, transactional_id, remote)
    if denied:
        entries = [
            (td.name, pd.index, pd.records)
            for td in topic_data
            if td.name not in denied
            for pd in td.partition_data
        ]
    else:
        entries = [(td.name, pd.index, pd.records) for td in topic_data for pd in td.partition_data]
    results, delayed = services.replica_manager.append_records(
        entries, acks, _timeout_s(request) if acks == -1 else 0.0, verify_txn=verify_txn
    )
    if delayed is not None:
        results = await delayed.complete()
    metrics = ctx.metrics
    if metrics is not None:
        for (name, _index, records), r in zip(entries, results, strict=True):
            if r.last_offset >= 0 and records is not None:
                metrics.topic_bytes_in(name, len(records), r.last_offset - r.base_offset + 1)
    throttle_ms = 0
    quotas = services.quotas
    if quotas.configs:
        # producer_byte_rate: the record bytes of the request (Kafka counts the whole request)
        throttle_ms = quotas.record(
            "producer_byte_rate",
            ctx.principal.name,
            ctx.header.client_id,
            sum(len(r) for _, _, r in entries if r is not None),
            services.clock,
            ctx.throttle,
        )
    if acks == 0:
        return None
    out: list[tuple[str, list[PartitionResult]]] = []
    i = 0
    for td in topic_data:
        name = td.name
        presults: list[PartitionResult] = []
        if name in denied:
            for pd in td.partition_data:
                presults.append(_failed(pd.index, _TOPIC_DENIED))
        else:
            for pd in td.partition_data:
                r = results[i]
                presults.append(
                    (
                        pd.index,
                        r.error,
                        r.base_offset,
                        r.log_append_time_ms,
                        r.log_start_offset,
                        r.record_errors,
                        r.message,
                    )
                )
                i += 1
        out.append((name, presults))
    body = encode_produce_response(request.__version__, out, throttle_time_ms=throttle_ms)
    return EncodedResponse((body,), len(body))


def _txn_verifier(
    services: BrokerServices,
    transactional_id: str,
    remote: dict[tuple[str, int], ErrorCode],
) -> TxnVerifier:
    """KIP-890 part 1: the partitions whose verdict came from a coordinator on another broker
    (``remote``), the others asked of this broker's transaction coordinator directly."""

    def verify(producer_id: int, epoch: int, topic: str, partition: int) -> ErrorCode:
        if not transactional_id:
            return _TXN_STATE
        answer = remote.get((topic, partition))
        if answer is not None:
            return answer
        manager = services.txn_coordinator.manager
        error = manager.verify_partitions(
            transactional_id, producer_id, epoch, [(topic, partition)]
        )[(topic, partition)]
        return _VERIFY_ERRORS.get(int(error), _TXN_STATE)

    return verify


async def _verify_at_coordinator(
    services: BrokerServices, transactional_id: str, request: DecodedProduceRequest
) -> dict[tuple[str, int], ErrorCode]:
    """In a cluster, when the transactional id's coordinator is another broker: ask it, with
    one AddPartitionsToTxn v4 ``verify_only`` per producer, about the partitions of this
    request whose first batch is transactional and opens the producer's transaction here
    (Kafka's AddPartitionsToTxnManager). Unreachable: a retriable NOT_ENOUGH_REPLICAS."""
    channel = services.broker_channel
    if channel is None or not transactional_id:
        return {}
    error, node_id, _host, _port = services.txn_coordinator.coordinator_for(transactional_id)
    if node_id == services.metadata.node_id:
        return {}
    wanted = services.replica_manager.partitions_to_verify(
        [(td.name, pd.index, pd.records) for td in request.topic_data for pd in td.partition_data]
    )
    if not wanted:
        return {}
    retry = ErrorCode.not_enough_replicas
    verdicts: dict[tuple[str, int], ErrorCode] = {}
    for (pid, epoch), partitions in wanted.items():
        if int(error) != 0 or node_id < 0:
            verdicts.update(dict.fromkeys(partitions, retry))
            continue
        ask = txn_glue.verify_partitions_request(transactional_id, pid, epoch, partitions)
        try:
            answer = txn_glue.verify_partitions_results(await channel.request(node_id, ask))
        except BrokerUnavailableError:
            verdicts.update(dict.fromkeys(partitions, retry))
            continue
        for tp in partitions:
            verdict = answer.get(tp)
            verdicts[tp] = (
                _TXN_STATE if verdict is None else _VERIFY_ERRORS.get(verdict, _TXN_STATE)
            )
    return verdicts


# the coordinator's verdict as Produce answers it (Kafka's mapping of verification errors)
_VERIFY_ERRORS = {
    0: _NONE,
    90: _BAD_EPOCH,  # PRODUCER_FENCED
    47: _BAD_EPOCH,
    14: ErrorCode.not_enough_replicas,  # COORDINATOR_LOAD_IN_PROGRESS: retriable
    15: ErrorCode.not_enough_replicas,  # COORDINATOR_NOT_AVAILABLE
    16: ErrorCode.not_enough_replicas,  # NOT_COORDINATOR
    51: ErrorCode.concurrent_transactions,
}


def encode(
    request: DecodedProduceRequest,
    results: list[tuple[str, list[PartitionResult]]],
    throttle_time_ms: int = 0,
) -> EncodedResponse:
    body = encode_produce_response(request.__version__, results, throttle_time_ms=throttle_time_ms)
    return EncodedResponse((body,), len(body))


def error_response(request: DecodedProduceRequest, code: ErrorCode) -> EncodedResponse:
    results: list[tuple[str, list[PartitionResult]]] = [
        (td.name, [_failed(pd.index, code) for pd in td.partition_data])
        for td in request.topic_data
    ]
    return encode(request, results)


API = ApiSpec(
    key=0,
    name="Produce",
    min_version=0,
    max_version=11,
    handler=handle,
    min_request_version=3,
    error_response=error_response,
    decoder=decode_produce_request,
)
