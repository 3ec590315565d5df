"""Kafka's rack-unaware replica assignment, on Kafka's own examples and as properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.controller.assignment import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
    create_new_partitions_assignment,
)


def test_kafka_example_five_brokers_ten_partitions() -> None:
    # Kafka's AdminTest.testReplicaAssignment (brokers 0-4, 10 partitions, RF 3, start index 0)
    expected = {
        0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
        5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2),
    }
    assert assign_replicas_to_brokers([4, 3, 2, 1, 0], 10, 3, fixed_start_index=0) == expected


def test_errors() -> None:
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers([1, 2], 0, 1)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers([1, 2], 3, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers([1, 2], 3, 3)
    with pytest.raises(InvalidPartitionsError):
        create_new_partitions_assignment({0: (1, 2), 1: (2, 1)}, [1, 2], 2)


def test_create_partitions_continues_ids_and_the_leader_round() -> None:
    brokers = [1, 2, 3]
    existing = assign_replicas_to_brokers(brokers, 2, 2, fixed_start_index=1)  # leaders 2, 3
    assert [r[0] for r in existing.values()] == [2, 3]
    added = create_new_partitions_assignment(existing, brokers, 5)
    assert sorted(added) == [2, 3, 4]
    # start index = position of broker 2 (partition 0's leader) = 1; partition 2 -> (2 + 1) % 3 = 0
    assert [added[p][0] for p in (2, 3, 4)] == [1, 2, 3]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in added.values())


@given(
    n_brokers=st.integers(1, 8),
    n_partitions=st.integers(1, 40),
    rf=st.integers(1, 8),
    seed=st.integers(0, 2**32),
)
def test_properties(n_brokers: int, n_partitions: int, rf: int, seed: int) -> None:
    brokers = random.Random(seed).sample(range(100), n_brokers)
    if rf > n_brokers:
        with pytest.raises(InvalidReplicationFactorError):
            assign_replicas_to_brokers(brokers, n_partitions, rf)
        return
    a = assign_replicas_to_brokers(brokers, n_partitions, rf, rng=random.Random(seed))
    assert sorted(a) == list(range(n_partitions))
    for replicas in a.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(brokers)
    leaders = Counter(r[0] for r in a.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1  # leaders round-robin
    total = Counter(b for r in a.values() for b in r)
    assert max(total.values()) - min(total.get(b, 0) for b in brokers) <= rf
