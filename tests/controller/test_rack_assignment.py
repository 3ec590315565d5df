"""Kafka's rack-aware replica assignment, on Kafka's own example and as properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.controller.assignment import (
    RackInformationError,
    assign_replicas,
    assign_replicas_to_brokers,
    assign_replicas_to_brokers_rack_aware,
    create_new_partitions_assignment,
    rack_alternated_broker_list,
)

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_kafka_example_rack_alternated_list_and_assignment() -> None:
    # Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    assert rack_alternated_broker_list(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in RACKS.items() if b != 5}) == [
        0,
        3,
        1,
        4,
        2,
    ]
    expected = {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2),
        4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2),
    }  # fmt: skip
    assert assign_replicas_to_brokers_rack_aware(RACKS, 7, 3, 0, 0) == expected
    assert assign_replicas(RACKS, 7, 3, 0, 0) == expected


def test_no_racks_is_rack_unaware_and_some_racks_is_an_error() -> None:
    ids = list(RACKS)
    assert assign_replicas(dict.fromkeys(ids), 7, 3, 0, 0) == assign_replicas_to_brokers(
        ids, 7, 3, 0, 0
    )
    with pytest.raises(RackInformationError):
        assign_replicas({**RACKS, 6: None}, 7, 3)


def test_new_partitions_are_rack_aware() -> None:
    existing = assign_replicas(RACKS, 3, 3, 0, 0)
    added = create_new_partitions_assignment(existing, list(RACKS), 12, RACKS)
    assert sorted(added) == list(range(3, 12))
    for replicas in added.values():
        assert len({RACKS[b] for b in replicas}) == 3


@given(
    rf=st.integers(1, 5),
    extra=st.lists(st.integers(0, 4), max_size=10),
    n_partitions=st.integers(1, 60),
    seed=st.integers(0, 2**32),
)
def test_as_many_racks_as_replicas_puts_replicas_on_distinct_racks(
    rf: int, extra: list[int], n_partitions: int, seed: int
) -> None:
    """With ``rf`` racks (each with one broker plus any extra), every partition's replicas are
    on ``rf`` distinct racks and the leaders are spread evenly over the brokers."""
    rnd = random.Random(seed)
    racks = [f"r{i}" for i in range(rf)] + [f"r{e % rf}" for e in extra]
    ids = rnd.sample(range(1000), len(racks))
    broker_racks = dict(zip(ids, racks, strict=True))
    a = assign_replicas(broker_racks, n_partitions, rf, rng=rnd)
    assert sorted(a) == list(range(n_partitions))
    for replicas in a.values():
        assert len(set(replicas)) == rf
        assert len({broker_racks[b] for b in replicas}) == rf
    leaders = Counter(r[0] for r in a.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1
