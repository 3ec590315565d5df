"""Produce (0): append record batches; acks 0, 1 and -1; idempotent producers.

Advertised from v0 (old librdkafka probes exact versions to enable features), served from v3
(RecordBatch v2 only). Per partition, in this order, and nothing is written from a rejected
partition's data:

1. unknown topic → auto-create (auto.create.topics.enable) or UNKNOWN_TOPIC_OR_PARTITION;
   a partition index out of range → UNKNOWN_TOPIC_OR_PARTITION; a partition this broker does
   not lead → NOT_LEADER_OR_FOLLOWER (``ReplicaManager.leader_partition``);
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

Requests are decoded by ``odradek.protocol.produce_request`` (``ApiSpec.decoder``):
above 16 KiB ``records`` are views of the request frame, stamped in place and written without a
copy; smaller requests are kio entities (faster to decode). Both have the same field names.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, EncodedResponse, RequestContext, TopicMetrics
from odradek.broker.apis import _transactions as txn_glue
from odradek.broker.apis._util import topic_name_error
from odradek.broker.broker_channel import BrokerUnavailableError
from odradek.broker.partition import Partition
from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.services import BrokerServices
from odradek.protocol.produce_request import decode_produce_request
from odradek.protocol.produce_response import PartitionTuple as PartitionResult
from odradek.protocol.produce_response import encode_produce_response
from odradek.storage.cleaner_records import RecordValidationError
from odradek.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from odradek.storage.producer_state import Verdict

__all__ = ["API", "handle"]

_HEAD = struct.Struct(">qiibIhiqqqhii")
"""baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount (61 bytes)."""
_SEQ_MOD = 2**31

_NONE = ErrorCode.none
_UNKNOWN = ErrorCode.unknown_topic_or_partition
_CORRUPT = ErrorCode.corrupt_message
_INVALID_RECORD = ErrorCode.invalid_record
_TOO_LARGE = ErrorCode.message_too_large
_BAD_ACKS = ErrorCode.invalid_required_acks
_OUT_OF_ORDER = ErrorCode.out_of_order_sequence_number
_BAD_EPOCH = ErrorCode.invalid_producer_epoch
_UNKNOWN_SERVER = ErrorCode.unknown_server_error
_TXN_STATE = ErrorCode.invalid_txn_state
_STORAGE = ErrorCode.kafka_storage_error


def _failed(
    index: int, code: ErrorCode, message: str | None = None, log_start_offset: int = -1
) -> PartitionResult:
    return (index, code, -1, -1, log_start_offset, (), message)


TxnVerifier = Callable[[int, int, str, int], ErrorCode]
"""(producer id, epoch, topic, partition) -> NONE when the partition is in the producer's
ongoing transaction (the transaction coordinator's verdict)."""


def _produce_partition(
    purgatory: Purgatory,
    handle: Partition,
    data: bytes | memoryview | None,
    now_ms: int,
    verify_txn: TxnVerifier | None = None,
    metrics: TopicMetrics | None = None,
) -> PartitionResult:
    index = handle.partition
    if not data:
        return _failed(index, _INVALID_RECORD, "no record batches")
    n = len(data)
    max_size = handle.config.max_message_bytes
    pos = 0
    unpack = _HEAD.unpack_from
    batches: list[
        tuple[int, int, int, int]
    ] = []  # (producer_id, epoch, base_seq, last_offset_delta)
    transactional = False
    while pos < n:
        if n - pos < 61:
            return _failed(index, _CORRUPT, "truncated record batch header")
        (
            _bo,
            length,
            _ple,
            magic,
            _crc,
            attrs,
            last_delta,
            _bts,
            _mts,
            pid,
            epoch,
            base_seq,
            _count,
        ) = unpack(data, pos)
        size = length + 12
        if magic != 2:
            return _failed(
                index, _INVALID_RECORD, f"record batch magic {magic}; only v2 (magic 2) is accepted"
            )
        if length < 49 or pos + size > n:
            return _failed(index, _CORRUPT, "record batch length out of bounds")
        if size > max_size:
            return _failed(
                index,
                _TOO_LARGE,
                f"record batch of {size} bytes exceeds max.message.bytes {max_size}",
            )
        batches.append((pid, epoch, base_seq, last_delta))
        transactional = transactional or bool(attrs & 0x10)
        pos += size
    plog = handle.log
    pid = batches[0][0]
    idempotent = pid >= 0 and batches[0][2] >= 0
    if transactional:
        if not idempotent:
            return _failed(index, _INVALID_RECORD, "a transactional batch needs a producer id")
        state = handle.producer_state()
        if not state.in_transaction(pid):
            code = (
                _TXN_STATE
                if verify_txn is None
                else verify_txn(pid, batches[0][1], handle.topic, index)
            )
            if code is not _NONE:
                return _failed(index, code, None, plog.log_start_offset)
    if idempotent:
        state = handle.producer_state()
        epoch, base_seq, last_delta = batches[0][1], batches[0][2], batches[0][3]
        if len(batches) == 1:
            verdict, dup_offset = state.check(
                pid, epoch, base_seq, (base_seq + last_delta) % _SEQ_MOD
            )
            if verdict is not Verdict.OK:
                if verdict is Verdict.DUPLICATE:
                    return (index, _NONE, dup_offset, -1, plog.log_start_offset, (), None)
                code = _BAD_EPOCH if verdict is Verdict.INVALID_PRODUCER_EPOCH else _OUT_OF_ORDER
                return _failed(index, code, None, plog.log_start_offset)
        else:
            for b_pid, b_epoch, b_seq, b_delta in batches:
                verdict, _ = state.check(b_pid, b_epoch, b_seq, (b_seq + b_delta) % _SEQ_MOD)
                if verdict is not Verdict.OK:
                    code = (
                        _BAD_EPOCH if verdict is Verdict.INVALID_PRODUCER_EPOCH else _OUT_OF_ORDER
                    )
                    return _failed(index, code, None, plog.log_start_offset)
    log_append_time = handle.config.message_timestamp_type == "LogAppendTime"
    try:
        result = plog.append(
            data, handle.state.leader_epoch, now_ms=now_ms, log_append_time=log_append_time
        )
    except CorruptRecordError as exc:
        return _failed(index, _CORRUPT, str(exc) or "corrupt record batch")
    except InvalidRecordError as exc:
        # KIP-467: storage lists the offending records (e.g. keyless on a compacted topic)
        record_errors = tuple(exc.record_errors) if isinstance(exc, RecordValidationError) else ()
        message = str(exc) or "invalid record batch"
        return (index, _INVALID_RECORD, -1, -1, -1, record_errors, message)
    except RecordTooLargeError as exc:
        return _failed(index, _TOO_LARGE, str(exc))
    except RecordBatchTooLargeError as exc:
        return _failed(index, ErrorCode.record_list_too_large, str(exc))
    except OSError as exc:  # storage's KafkaStorageError and plain I/O errors
        return _failed(index, _STORAGE, str(exc))
    base_offset = result.base_offset
    if idempotent:
        off = base_offset
        for b_pid, b_epoch, b_seq, b_delta in batches:
            state.update(b_pid, b_epoch, b_seq, (b_seq + b_delta) % _SEQ_MOD, off, off + b_delta)
            off += b_delta + 1
        if transactional:
            state.append_txn_data(pid, base_offset)
    purgatory.notify(handle.topic, index)
    if metrics is not None:
        metrics.topic_bytes_in(handle.topic, n, result.last_offset - base_offset + 1)
    lat = result.log_append_time_ms if log_append_time else -1
    return (
        index,
        _NONE,
        base_offset,
        -1 if lat is None else lat,
        result.log_start_offset,
        (),
        None,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    acks = request.acks
    now_ms = services.clock.now_ms()
    results: list[tuple[str, list[PartitionResult]]] = []
    replica_manager = services.replica_manager
    leader_partition = replica_manager.leader_partition
    purgatory = services.purgatory
    transactional_id = getattr(request, "transactional_id", None)
    verify_txn = None
    if transactional_id is not None:
        remote = await _verify_at_coordinator(services, transactional_id, request)
        verify_txn = _txn_verifier(services, transactional_id, remote)
    # acks=all waits: (index into results, index into its partitions, partition, end offset, min ISR)
    waits: list[tuple[int, int, Partition, int, int]] = []
    if acks not in (0, 1, -1):
        for td in request.topic_data:
            results.append((td.name, [_failed(pd.index, _BAD_ACKS) for pd in td.partition_data]))
    else:
        for td in request.topic_data:
            name = td.name
            presults: list[PartitionResult] = []
            for pd in td.partition_data:
                handle_, code = leader_partition(name, pd.index)
                if handle_ is None:
                    if (
                        services.metadata.topic(name) is None
                        and services.config.auto_create_topics_enable
                    ) and topic_name_error(name) is None:
                        await services.topic_admin.auto_create_topic(name)
                        handle_, code = leader_partition(name, pd.index)
                    if handle_ is None:
                        presults.append(_failed(pd.index, _UNKNOWN))
                        continue
                if code is not _NONE:
                    presults.append(_failed(pd.index, code))
                    continue
                min_insync = 1
                if acks == -1:
                    min_insync = replica_manager.min_insync_replicas(name)
                    code = handle_.check_enough_replicas(min_insync)
                    if code is not _NONE:
                        presults.append(_failed(pd.index, code))
                        continue
                result = _produce_partition(
                    purgatory, handle_, pd.records, now_ms, verify_txn, ctx.metrics
                )
                presults.append(result)
                if result[1] is _NONE and handle_.controller_managed:
                    replica_manager.after_leader_append(handle_)
                    plog = handle_.log
                    if acks == -1 and plog.high_watermark < plog.log_end_offset:
                        waits.append(
                            (
                                len(results),
                                len(presults) - 1,
                                handle_,
                                plog.log_end_offset,
                                min_insync,
                            )
                        )
            results.append((name, presults))
    if waits:
        await _wait_for_acks(replica_manager, request, results, waits)
    if acks == 0:
        return None
    return encode(request, results)


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
    services: BrokerServices, transactional_id: str, request: Any
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
    wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for td in request.topic_data:
        for pd in td.partition_data:
            data = pd.records
            if data is None or len(data) < 61 or not data[22] & 0x10:
                continue
            pid = int.from_bytes(data[43:51], "big", signed=True)
            epoch = int.from_bytes(data[51:53], "big", signed=True)
            handle, code = services.replica_manager.leader_partition(td.name, pd.index)
            if handle is None or code is not _NONE or handle.producer_state().in_transaction(pid):
                continue
            wanted.setdefault((pid, epoch), []).append((td.name, pd.index))
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


async def _wait_for_acks(
    replica_manager: ReplicaManager,
    request: Any,
    results: list[tuple[str, list[PartitionResult]]],
    waits: list[tuple[int, int, Partition, int, int]],
) -> None:
    """acks=all: wait for every appended partition at once; replace the results of those that
    did not make it with their error."""
    timeout_ms = getattr(request, "timeout_ms", None)
    if timeout_ms is None:
        timeout_ms = int(request.timeout.total_seconds() * 1000)
    timeout_s = max(0, timeout_ms) / 1000
    codes = await asyncio.gather(
        *(
            replica_manager.wait_for_acks(handle, end, min_insync, timeout_s)
            for _t, _p, handle, end, min_insync in waits
        )
    )
    for (t, p, _handle, _end, _min), code in zip(waits, codes, strict=True):
        if code is not _NONE:
            presults = results[t][1]
            presults[p] = _failed(presults[p][0], code)


def encode(request: Any, results: list[tuple[str, list[PartitionResult]]]) -> EncodedResponse:
    body = encode_produce_response(request.__version__, results)
    return EncodedResponse((body,), len(body))


def error_response(request: Any, code: ErrorCode) -> Any:
    results: list[tuple[str, list[PartitionResult]]] = [
        (td.name, [_failed(pd.index, code) for pd in td.partition_data])
        for td in request.topic_data
    ]
    return encode(request, results)


API = ApiSpec(
    key=0,
    name="Produce",
    min_version=0,
    max_version=10,
    handler=handle,
    min_request_version=3,
    error_response=error_response,
    decoder=decode_produce_request,
)
