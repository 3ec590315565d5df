"""``ReplicaFetcherManager``: which ``ReplicaFetcher`` copies which followed partition (Kafka's
``ReplicaFetcherManager`` / ``AbstractFetcherManager``).

* Fetchers are keyed by (leader broker id, fetcher id): ``num.replica.fetchers`` per leader
  broker, a partition's by ``fetcher_id(topic, partition, num.replica.fetchers)`` (Kafka's
  ``getFetcherId``), so the partitions followed from one leader spread over that many
  connections, and a partition always lands on the same one.
* ``add_fetcher_for_partition(leader_id, host, port, partition)`` hands a follower to its
  fetcher (created on first use; it truncates first, then fetches). A leader whose address
  changed takes all its partitions along: its old fetchers close, and their partitions move to
  new fetchers towards the new address.
* ``remove_fetcher_for_partitions(keys)`` takes partitions off every fetcher (a LeaderAndIsr
  that changes them, a StopReplica, a deleted topic); ``shutdown_idle_fetchers()`` closes the
  fetchers left without partitions (Kafka's ``shutdownIdleFetcherThreads``), called once per
  LeaderAndIsr / StopReplica.
* ``close_all()`` closes every fetcher at broker shutdown and returns them (await each one's
  ``wait_closed``).

Every fetcher shares the broker's ``InterBrokerClient`` (None: each opens its own) and the
``FetcherConfig`` derived from the broker's replication settings. Event-loop only; no I/O here
(the fetchers do theirs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from odradek.broker.inter_broker_client import InterBrokerClient
from odradek.broker.partition import Partition
from odradek.broker.replica_fetcher import FetcherConfig, ReplicaFetcher, fetcher_id
from odradek.clock import Clock

__all__ = ["ReplicaFetcherManager"]


class ReplicaFetcherManager:
    """The replica fetchers of one broker. See the module docstring."""

    def __init__(
        self,
        node_id: int,
        config: FetcherConfig,
        num_fetchers: int,
        clock: Clock,
        inter_broker_client: InterBrokerClient | None = None,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.num_fetchers = num_fetchers
        self.clock = clock
        self.inter_broker_client = inter_broker_client
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        """By (leader broker id, fetcher id)."""
        self.on_storage_error: Callable[[str, int, str], None] | None = None
        """``(topic, partition, reason)`` when a follower append raised an ``OSError`` (the
        partition's log dir goes offline: ``LogDirs.log_dir_failed``); handed to every fetcher."""

    def add_fetcher_for_partition(
        self, leader_id: int, host: str, port: int, handle: Partition
    ) -> ReplicaFetcher:
        """Hand ``handle`` (a follower) to its fetcher towards ``leader_id`` at host:port and
        return that fetcher (see the module docstring for a leader that moved)."""
        moved: list[Partition] = []
        for k in [k for k in self._fetchers if k[0] == leader_id]:
            if self._fetchers[k].address != (host, port):
                old = self._fetchers.pop(k)
                moved.extend(old.partitions())
                old.close()
        for other in moved:
            self._fetcher(leader_id, host, port, other).add_partition(other)
        fetcher = self._fetcher(leader_id, host, port, handle)
        fetcher.add_partition(handle)
        return fetcher

    def _fetcher(self, leader_id: int, host: str, port: int, handle: Partition) -> ReplicaFetcher:
        fid = fetcher_id(handle.topic, handle.partition, self.num_fetchers)
        fetcher = self._fetchers.get((leader_id, fid))
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.node_id,
                leader_id,
                host,
                port,
                self.config,
                self.clock,
                fid,
                self.inter_broker_client,
            )
            fetcher.on_storage_error = self.on_storage_error
            self._fetchers[(leader_id, fid)] = fetcher
        return fetcher

    def remove_fetcher_for_partitions(self, keys: Iterable[tuple[str, int]]) -> None:
        """Take the (topic, partition)s of ``keys`` off every fetcher."""
        keys = list(keys)
        for fetcher in self._fetchers.values():
            fetcher.remove_partitions(keys)

    def shutdown_idle_fetchers(self) -> None:
        """Close and forget every fetcher left without partitions."""
        for key in [k for k, f in self._fetchers.items() if not f.partition_count()]:
            self._fetchers.pop(key).close()

    def fetchers(self) -> dict[tuple[int, int], ReplicaFetcher]:
        """The fetchers by (leader broker id, fetcher id) (a copy; for tests and metrics)."""
        return dict(self._fetchers)

    def close_all(self) -> list[ReplicaFetcher]:
        """Close every fetcher (broker shutdown); the closed fetchers, whose ``wait_closed``
        the caller awaits."""
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.close()
        return fetchers
