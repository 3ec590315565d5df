"""Kafka's rack-unaware replica assignment (``AdminUtils.assignReplicasToBrokersRackUnaware``) and
the assignment of new partitions in CreatePartitions (``AdminZkClient.createNewPartitionsAssignment``).

With the brokers sorted by id (n of them), a start index and a replica shift (random in [0, n)
unless fixed):

* partition p's first replica (its preferred leader) is broker ``(p + start) % n``, so leaders go
  round-robin;
* the shift grows by one each time p passes a multiple of n (p > 0), so followers differ between
  rounds;
* its j-th follower is broker ``(first + 1 + (shift + j) % (n - 1)) % n``, never the first.

New partitions continue the ids (``start_partition_id`` = the current count) with start index and
shift both the position of the first broker whose id >= partition 0's first replica, so the
leaders continue partition 0's round.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

__all__ = [
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "assign_replicas_to_brokers",
    "create_new_partitions_assignment",
]


class InvalidPartitionsError(ValueError):
    """Kafka's INVALID_PARTITIONS (37)."""


class InvalidReplicationFactorError(ValueError):
    """Kafka's INVALID_REPLICATION_FACTOR (38)."""


def assign_replicas_to_brokers(
    broker_ids: Sequence[int],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """partition id -> replicas (preference order) for ``n_partitions`` partitions."""
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(broker_ids):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(broker_ids)}."
        )
    brokers = sorted(broker_ids)
    n = len(brokers)
    rng = rng or random.Random()
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition = max(0, start_partition_id)
    out: dict[int, tuple[int, ...]] = {}
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out[partition] = tuple(replicas)
        partition += 1
    return out


def create_new_partitions_assignment(
    existing: Mapping[int, Sequence[int]], broker_ids: Sequence[int], num_partitions: int
) -> dict[int, tuple[int, ...]]:
    """The assignment of the partitions that take a topic from ``len(existing)`` to ``num_partitions``."""
    if 0 not in existing:
        raise InvalidPartitionsError("partition 0 is missing from the existing assignment")
    to_add = num_partitions - len(existing)
    if to_add <= 0:
        raise InvalidPartitionsError(
            f"The number of partitions for a topic can only be increased. Topic currently has "
            f"{len(existing)} partitions, {num_partitions} would not be an increase."
        )
    brokers = sorted(broker_ids)
    head = existing[0][0]
    start = next((i for i, b in enumerate(brokers) if b >= head), -1)
    return assign_replicas_to_brokers(brokers, to_add, len(existing[0]), max(0, start), len(existing))
