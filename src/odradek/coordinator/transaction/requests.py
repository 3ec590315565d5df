"""The requests the transaction coordinator's side of a transaction sends to other brokers:
WriteTxnMarkers (the coordinator to the partition leaders) and AddPartitionsToTxn v4 with
``verify_only`` (a partition leader to the coordinator, KIP-890 part 1), and the reading of the
latter's answer. kio entities in, kio entities out; no I/O.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from kio.index import load_request_schema

from odradek.coordinator.transaction.manager import TxnMarker
from odradek.coordinator.transaction.state import TransactionResult
from odradek.protocol.messages import make_entity as _make

__all__ = ["verify_partitions_request", "verify_partitions_results", "write_txn_markers_request"]


def write_txn_markers_request(markers: Iterable[TxnMarker], version: int = 1) -> Any:
    """The WriteTxnMarkers request (v1-v2) for markers bound for one leader: one entry per
    (producer id, epoch, result, coordinator epoch), its partitions grouped by topic."""
    cls = load_request_schema(27, version)
    mod = sys.modules[cls.__module__]
    groups: dict[tuple[int, int, TransactionResult, int], dict[str, list[int]]] = {}
    for mk in markers:
        key = (mk.producer_id, mk.producer_epoch, mk.result, mk.coordinator_epoch)
        groups.setdefault(key, {}).setdefault(mk.topic, []).append(mk.partition)
    return _make(
        cls,
        markers=tuple(
            _make(
                mod.WritableTxnMarker,
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=result is TransactionResult.COMMIT,
                topics=tuple(
                    _make(mod.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps))
                    for t, ps in topics.items()
                ),
                coordinator_epoch=coordinator_epoch,
            )
            for (pid, epoch, result, coordinator_epoch), topics in groups.items()
        ),
    )


def verify_partitions_request(
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[tuple[str, int]],
) -> Any:
    """AddPartitionsToTxn v4 with ``verify_only`` (KIP-890 part 1): a partition leader asks the
    transactional id's coordinator whether the partitions are in the producer's ongoing
    transaction."""
    cls = load_request_schema(24, 4)
    mod = sys.modules[cls.__module__]
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return _make(
        cls,
        transactions=(
            _make(
                mod.AddPartitionsToTxnTransaction,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                verify_only=True,
                topics=tuple(
                    _make(mod.AddPartitionsToTxnTopic, name=t, partitions=tuple(ps))
                    for t, ps in topics.items()
                ),
            ),
        ),
    )


def verify_partitions_results(response: Any) -> dict[tuple[str, int], int]:
    """The Kafka error code per (topic, partition) of a ``verify_partitions_request`` answer
    (a top-level error applies to every partition it names)."""
    top = int(response.error_code)
    return {
        (t.name, int(p.partition_index)): top or int(p.partition_error_code)
        for r in response.results_by_transaction
        for t in r.topic_results
        for p in t.results_by_partition
    }
