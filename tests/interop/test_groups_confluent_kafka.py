"""Consumer groups with confluent against odradek (scenarios in test_groups_scenarios.py)."""

from __future__ import annotations

import pytest

from .test_groups_scenarios import GroupScenarios

pytestmark = pytest.mark.interop

# Short session timeouts (a killed member is noticed in seconds), the first rebalance at once,
# and ten __consumer_offsets partitions (the restart test reloads them all).
BROKER_SETTINGS = {
    "group.min.session.timeout.ms": 500,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 10,
}


class TestConfluentKafkaGroups(GroupScenarios):
    client = "confluent"
