"""Transaction markers on a partition leader (the receiving side of WriteTxnMarkers, Kafka's
``ReplicaManager.appendRecords`` with control records).

``TxnMarkerAppender.append_markers(markers)`` appends one COMMIT/ABORT control batch per
marker, each behind the same leadership check as Produce, and answers a Kafka error code per
(topic, partition):

* UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER: ``ReplicaManager.leader_partition``;
* TRANSACTION_COORDINATOR_FENCED (52): a marker of a newer coordinator epoch was already
  written for that producer on that partition;
* INVALID_PRODUCER_EPOCH (47): the marker's producer epoch is older than the producer's;
* KAFKA_STORAGE_ERROR (56) when the append fails.

A written marker ends the producer's transaction in the partition's producer state (the last
stable offset moves, an abort is indexed in ``.txnindex``), wakes the parked Fetch requests
of the partition, and on ``__consumer_offsets`` completes the transaction's pending group
offsets (``on_offsets_marker``). The transaction coordinator of this broker calls it directly
(``TransactionCoordinator``'s ``MarkerWriter``); the WriteTxnMarkers API serves it to others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_manager import ReplicaManager
from odradek.clock import Clock
from odradek.coordinator.transaction.manager import TxnMarker
from odradek.coordinator.transaction.state import TransactionResult
from odradek.storage.producer_state import MarkerVerdict
from odradek.storage.transaction_index import ControlRecordType, build_control_batch

__all__ = ["OFFSETS_TOPIC", "OffsetsMarkerListener", "TxnMarkerAppender"]

log = logging.getLogger("odradek.broker")

OFFSETS_TOPIC = "__consumer_offsets"

OffsetsMarkerListener = Callable[[int, int, bool, int], None]
"""(``__consumer_offsets`` partition, producer id, committed, marker offset)."""


class TxnMarkerAppender:
    """Appends transaction markers to the partitions this broker leads."""

    def __init__(self, replicas: ReplicaManager, purgatory: Purgatory, clock: Clock) -> None:
        self._replicas = replicas
        self._purgatory = purgatory
        self._clock = clock
        self.on_offsets_marker: OffsetsMarkerListener | None = None

    def append_markers(self, markers: Sequence[TxnMarker]) -> Mapping[tuple[str, int], int]:
        return {(m.topic, m.partition): int(self.append_marker(m)) for m in markers}

    def append_marker(self, marker: TxnMarker) -> ErrorCode:
        handle, code = self._replicas.leader_partition(marker.topic, marker.partition)
        if handle is None or code is not ErrorCode.none:
            return code
        state = handle.producer_state()
        verdict = state.check_marker(
            marker.producer_id, marker.producer_epoch, marker.coordinator_epoch
        )
        if verdict is MarkerVerdict.COORDINATOR_FENCED:
            return ErrorCode.transaction_coordinator_fenced
        if verdict is MarkerVerdict.INVALID_PRODUCER_EPOCH:
            return ErrorCode.invalid_producer_epoch
        committed = marker.result is TransactionResult.COMMIT
        now = self._clock.now_ms()
        batch = build_control_batch(
            marker.producer_id,
            marker.producer_epoch,
            ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
            marker.coordinator_epoch,
            now,
        )
        plog = handle.log
        try:
            result = plog.append(batch, handle.leader_epoch, now_ms=now)
        except (OSError, ValueError) as exc:
            log.error("marker for %s-%d failed: %s", marker.topic, marker.partition, exc)
            return ErrorCode.kafka_storage_error
        bases_of = getattr(plog, "segment_base_offsets", None)
        state.apply_marker(
            marker.producer_id,
            marker.producer_epoch,
            result.base_offset,
            not committed,
            marker.coordinator_epoch,
            bases_of() if bases_of is not None else [],
        )
        if marker.topic == OFFSETS_TOPIC and self.on_offsets_marker is not None:
            self.on_offsets_marker(
                marker.partition, marker.producer_id, committed, result.base_offset
            )
        self._purgatory.notify(marker.topic, marker.partition)
        return ErrorCode.none
