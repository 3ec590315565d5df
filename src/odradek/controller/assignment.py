"""Kafka's replica assignment (``AdminUtils.assignReplicasToBrokers``, rack-unaware and
rack-aware) and the assignment of new partitions in CreatePartitions (``AdminZkClient.createNewPartitionsAssignment``).

With the brokers sorted by id (n of them), a start index and a replica shift (random in [0, n)
unless fixed):

* partition p's first replica (its preferred leader) is broker ``(p + start) % n``, so leaders go
  round-robin;
* the shift grows by one each time p passes a multiple of n (p > 0), so followers differ between
  rounds;
* its j-th follower is broker ``(first + 1 + (shift + j) % (n - 1)) % n``, never the first.

With racks (every broker has one; ``assign_replicas_to_brokers_rack_aware``) the brokers are
first arranged rack-alternated: racks sorted by name, each rack's brokers sorted by id, one broker
taken from each rack in turn (racks a: 0, 5; b: 3, 4; c: 1, 2 give 0, 3, 1, 5, 4, 2). The first
replica is taken as above from that list; the followers walk the list from the shift (times the
number of racks) as above, skipping a broker whose rack already holds a replica while some rack
holds none, and a broker already chosen while some broker is not. With as many racks as the
replication factor, a partition's replicas are on distinct racks.

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
    "RackInformationError",
    "assign_replicas",
    "assign_replicas_to_brokers",
    "assign_replicas_to_brokers_rack_aware",
    "create_new_partitions_assignment",
    "rack_alternated_broker_list",
]


class InvalidPartitionsError(ValueError):
    """Kafka's INVALID_PARTITIONS (37)."""


class InvalidReplicationFactorError(ValueError):
    """Kafka's INVALID_REPLICATION_FACTOR (38)."""


class RackInformationError(ValueError):
    """Kafka's AdminOperationException: some brokers have a rack and some do not."""


def _check(n_partitions: int, replication_factor: int, n_brokers: int) -> None:
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > n_brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n_brokers}."
        )


def assign_replicas(
    broker_racks: Mapping[int, str | None],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Kafka's ``assignReplicasToBrokers`` in its enforced rack-aware mode (topic creation):
    rack-unaware when no broker (id -> rack) has a rack, rack-aware when all do,
    ``RackInformationError`` otherwise."""
    with_rack = {b: r for b, r in broker_racks.items() if r is not None}
    if not with_rack:
        return assign_replicas_to_brokers(
            list(broker_racks),
            n_partitions,
            replication_factor,
            fixed_start_index,
            start_partition_id,
            rng,
        )
    if len(with_rack) < len(broker_racks):
        raise RackInformationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    return assign_replicas_to_brokers_rack_aware(
        with_rack, n_partitions, replication_factor, fixed_start_index, start_partition_id, rng
    )


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: racks in name order, each rack's brokers in id
    order, one broker from each rack in turn (a rack that has run out is skipped)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(broker_racks):
        out.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return out


def assign_replicas_to_brokers_rack_aware(
    broker_racks: Mapping[int, str],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Kafka's ``assignReplicasToBrokersRackAware`` (see the module docstring)."""
    _check(n_partitions, replication_factor, len(broker_racks))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    n_racks = len(set(broker_racks.values()))
    rng = rng or random.Random()
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition = max(0, start_partition_id)
    out: dict[int, tuple[int, ...]] = {}
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks = {broker_racks[leader]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[(first + 1 + (shift * n_racks + k) % (n - 1)) % n]
                rack = broker_racks[broker]
                k += 1
                if (rack not in racks or len(racks) == n_racks) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    racks.add(rack)
                    break
        out[partition] = tuple(replicas)
        partition += 1
    return out


def assign_replicas_to_brokers(
    broker_ids: Sequence[int],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """partition id -> replicas (preference order) for ``n_partitions`` partitions."""
    _check(n_partitions, replication_factor, len(broker_ids))
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
    existing: Mapping[int, Sequence[int]],
    broker_ids: Sequence[int],
    num_partitions: int,
    broker_racks: Mapping[int, str | None] | None = None,
) -> dict[int, tuple[int, ...]]:
    """The assignment of the partitions that take a topic from ``len(existing)`` to ``num_partitions``
    (rack-aware as ``assign_replicas`` when ``broker_racks``, id -> rack, names racks)."""
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
    racks = (
        dict.fromkeys(brokers)
        if broker_racks is None
        else {b: broker_racks.get(b) for b in brokers}
    )
    return assign_replicas(racks, to_add, len(existing[0]), max(0, start), len(existing))
