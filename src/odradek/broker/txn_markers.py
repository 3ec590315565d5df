"""Transaction markers on a partition leader (the receiving side of WriteTxnMarkers, Kafka's
``ReplicaManager.appendRecords`` with control records).

``TxnMarkerAppender.append_markers(markers)`` appends one COMMIT/ABORT control batch per
marker, each behind the same leadership check as Produce, and answers a Kafka error code per
(topic, partition):

* UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER (the control batch goes through
  ``ReplicaManager.append_records`` → ``Partition.append_as_leader``, as Produce's batches do);
* TRANSACTION_COORDINATOR_FENCED (52): a marker of a newer coordinator epoch was already
  written for that producer on that partition;
* INVALID_PRODUCER_EPOCH (47): the marker's producer epoch is older than the producer's;
* KAFKA_STORAGE_ERROR (56) when the append fails.

A written marker ends the producer's transaction in the partition's producer state (the last
stable offset moves, an abort is indexed in ``.txnindex``), wakes the parked Fetch requests
of the partition, and on ``__consumer_offsets`` completes the transaction's pending group
offsets (``on_offsets_marker``). The transaction coordinator of this broker calls it directly
(``TransactionCoordinator``'s ``MarkerWriter``); the WriteTxnMarkers API serves it to others.
In a cluster a marker is acknowledged once the partition's ISR has it (acks=all, as Kafka
appends markers with requiredAcks=-1: ``append_marker_replicated``).

``TxnMarkerChannel`` is the coordinator's side in a cluster (Kafka's
``TransactionMarkerChannelManager``): it sends each marker to its partition's current leader,
this broker's through ``TxnMarkerAppender``, the others' as one WriteTxnMarkers v1 request per
leader through the ``BrokerChannel`` (the inter-broker client's ``txn`` connection to that
leader, bounded by the channel's timeout). A leader that is unknown or unreachable
(``InterBrokerRequestError``) answers NOT_LEADER_OR_FOLLOWER, which the coordinator retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from odradek.broker.broker_channel import BrokerChannel
from odradek.broker.inter_broker_client import InterBrokerRequestError
from odradek.broker.metadata_store import MetadataStore
from odradek.broker.replica_manager import (
    AppendOrigin,
    DelayedProduce,
    LeaderAppendResult,
    ReplicaManager,
)
from odradek.clock import Clock
from odradek.coordinator.transaction.manager import TxnMarker
from odradek.coordinator.transaction.requests import write_txn_markers_request
from odradek.coordinator.transaction.state import TransactionResult
from odradek.storage.transaction_index import ControlRecordType, build_control_batch

__all__ = ["OFFSETS_TOPIC", "OffsetsMarkerListener", "TxnMarkerAppender", "TxnMarkerChannel"]

log = logging.getLogger("odradek.broker")

OFFSETS_TOPIC = "__consumer_offsets"

OffsetsMarkerListener = Callable[[int, int, bool, int], None]
"""(``__consumer_offsets`` partition, producer id, committed, marker offset)."""


class TxnMarkerAppender:
    """Appends transaction markers to the partitions this broker leads."""

    def __init__(
        self,
        replicas: ReplicaManager,
        clock: Clock,
        replication_timeout_ms: int = 5000,
    ) -> None:
        self._replicas = replicas
        self._clock = clock
        self._replication_timeout_s = replication_timeout_ms / 1000
        self.on_offsets_marker: OffsetsMarkerListener | None = None

    async def write_markers(self, markers: Sequence[TxnMarker]) -> Mapping[tuple[str, int], int]:
        """The ``MarkerWriter`` of one broker: every partition is led here."""
        return {(m.topic, m.partition): int(self.append_marker(m)) for m in markers}

    def append_marker(self, marker: TxnMarker) -> ErrorCode:
        return self._append(marker)[0][0].error

    async def append_marker_replicated(self, marker: TxnMarker) -> ErrorCode:
        """``append_marker``, then (in a cluster) wait until the partition's ISR has it."""
        results, delayed = self._append(marker)
        if delayed is not None:
            results = await delayed.complete()
        return results[0].error

    def _append(self, marker: TxnMarker) -> tuple[list[LeaderAppendResult], DelayedProduce | None]:
        """The marker's control batch through ``ReplicaManager.append_records`` (acks=-1
        with a minimum ISR of 1, within offsets.commit.timeout.ms); a written marker on
        ``__consumer_offsets`` completes the transaction's group offsets."""
        committed = marker.result is TransactionResult.COMMIT
        batch = build_control_batch(
            marker.producer_id,
            marker.producer_epoch,
            ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
            marker.coordinator_epoch,
            self._clock.now_ms(),
        )
        results, delayed = self._replicas.append_records(
            [(marker.topic, marker.partition, batch)],
            -1,
            self._replication_timeout_s,
            origin=AppendOrigin.COORDINATOR,
            min_insync_replicas=1,
        )
        result = results[0]
        if result.error is ErrorCode.none:
            if marker.topic == OFFSETS_TOPIC and self.on_offsets_marker is not None:
                self.on_offsets_marker(
                    marker.partition, marker.producer_id, committed, result.base_offset
                )
        elif result.error is ErrorCode.kafka_storage_error:
            log.error("marker for %s-%d failed: %s", marker.topic, marker.partition, result.message)
        return results, delayed


_RETRY = int(ErrorCode.not_leader_or_follower)


class TxnMarkerChannel:
    """The transaction coordinator's ``MarkerWriter`` in a cluster (see the module docstring)."""

    def __init__(
        self, metadata: MetadataStore, appender: TxnMarkerAppender, channel: BrokerChannel
    ) -> None:
        self._metadata = metadata
        self._appender = appender
        self._channel = channel

    async def write_markers(self, markers: Sequence[TxnMarker]) -> Mapping[tuple[str, int], int]:
        by_leader: dict[int, list[TxnMarker]] = {}
        results: dict[tuple[str, int], int] = {}
        for m in markers:
            state = self._metadata.partition(m.topic, m.partition)
            if state is None:
                results[(m.topic, m.partition)] = int(ErrorCode.unknown_topic_or_partition)
            elif state.leader < 0:
                results[(m.topic, m.partition)] = _RETRY
            else:
                by_leader.setdefault(state.leader, []).append(m)
        sent = [self._write_to(leader, ms) for leader, ms in by_leader.items()]
        for answer in await asyncio.gather(*sent):
            results.update(answer)
        return results

    async def _write_to(
        self, leader: int, markers: list[TxnMarker]
    ) -> Mapping[tuple[str, int], int]:
        if leader == self._metadata.node_id:
            return {
                (m.topic, m.partition): int(await self._appender.append_marker_replicated(m))
                for m in markers
            }
        try:
            response = await self._channel.request(leader, write_txn_markers_request(markers))
        except InterBrokerRequestError as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return {(m.topic, m.partition): _RETRY for m in markers}
        codes: dict[tuple[str, int], int] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    codes[(topic.name, int(p.partition_index))] = int(p.error_code)
        return {(m.topic, m.partition): codes.get((m.topic, m.partition), _RETRY) for m in markers}
