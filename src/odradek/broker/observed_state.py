"""The broker state that metrics read at scrape time, handed to the console by the broker.

``ObservedState`` implements ``odradek.metrics.BrokerState`` (structurally: this module imports
nothing from the console or the metrics) from the parts it is given: the log manager, the
replica manager, the purgatory and a connection count. The console is handed one in its
``ConsoleHost`` and never sees the Broker itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_manager import ReplicaManager
from odradek.storage import LogManager
from odradek.storage.api import PartitionLog

__all__ = ["ObservedState"]

AuthenticationCounts = tuple[Mapping[tuple[str, str], int], Mapping[tuple[str, str], int]]
"""(succeeded, failed) authentications per (listener, mechanism)."""


class ObservedState:
    """Partition logs, open connections, purgatory size, ISR changes and authentication
    outcomes, read when asked."""

    def __init__(
        self,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        purgatory: Purgatory,
        connection_count: Callable[[], int],
        authentications: Callable[[], AuthenticationCounts] | None = None,
    ) -> None:
        self._log_manager = log_manager
        self._replica_manager = replica_manager
        self._purgatory = purgatory
        self._connection_count = connection_count
        self._authentications = authentications

    def logs(self) -> Iterable[PartitionLog]:
        return self._log_manager.all_logs()

    def connection_count(self) -> int:
        return self._connection_count()

    def purgatory_size(self) -> int:
        return self._purgatory.watching()

    def under_replicated(self) -> int:
        """Partitions led here whose ISR is smaller than their replica set (Kafka's
        UnderReplicatedPartitions); always 0 alone (replicas = ISR = this broker)."""
        return sum(
            1
            for p in self._replica_manager.partitions()
            if p.is_leader and len(p.state.isr) < len(p.state.replicas)
        )

    def isr_changes(self) -> tuple[int, int]:
        """(ISR shrinks, ISR expands) of partitions led here since the broker started."""
        rm = self._replica_manager
        return rm.isr_shrinks, rm.isr_expands

    def authentications(self) -> AuthenticationCounts:
        """(succeeded, failed) authentications per (listener, mechanism) since the start
        (``endpoints.AuthCounters``; copies)."""
        if self._authentications is None:
            return {}, {}
        succeeded, failed = self._authentications()
        return dict(succeeded), dict(failed)
