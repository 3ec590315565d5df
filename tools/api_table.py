#!/usr/bin/env python3
"""Write the API table of ``docs/compatibility.md``: for every API a Kafka 3.9 broker in
ZooKeeper mode advertises, Kafka's version range and odradek's side by side, and the reason
for each difference.

odradek's side comes from the code (``odradek.broker.registry.load_registry``: what
ApiVersions advertises is what is served); Kafka's from ``KAFKA_3_9`` below, and each
difference must have its reason in ``REASONS`` (a reason for an API that no longer differs is
an error as well, so the table cannot keep an excuse that has gone stale). The table sits in
the page between the ``<!-- api-table:start -->`` and ``<!-- api-table:end -->`` markers.

    PYTHONPATH=src python tools/api_table.py           # rewrite the table
    PYTHONPATH=src python tools/api_table.py --check   # exit 1 when page and code disagree
"""

from __future__ import annotations

import sys
from pathlib import Path

from odradek.broker.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "compatibility.md"
NONE = "\u2013"  # an en dash: not served
START = "<!-- api-table:start -->"
END = "<!-- api-table:end -->"

KAFKA_3_9: dict[int, tuple[str, int, int]] = {
    0: ("Produce", 0, 11),
    1: ("Fetch", 0, 17),
    2: ("ListOffsets", 0, 9),
    3: ("Metadata", 0, 12),
    4: ("LeaderAndIsr", 0, 7),
    5: ("StopReplica", 0, 4),
    6: ("UpdateMetadata", 0, 8),
    7: ("ControlledShutdown", 0, 3),
    8: ("OffsetCommit", 0, 9),
    9: ("OffsetFetch", 0, 9),
    10: ("FindCoordinator", 0, 6),
    11: ("JoinGroup", 0, 9),
    12: ("Heartbeat", 0, 4),
    13: ("LeaveGroup", 0, 5),
    14: ("SyncGroup", 0, 5),
    15: ("DescribeGroups", 0, 5),
    16: ("ListGroups", 0, 5),
    17: ("SaslHandshake", 0, 1),
    18: ("ApiVersions", 0, 4),
    19: ("CreateTopics", 0, 7),
    20: ("DeleteTopics", 0, 6),
    21: ("DeleteRecords", 0, 2),
    22: ("InitProducerId", 0, 5),
    23: ("OffsetForLeaderEpoch", 0, 4),
    24: ("AddPartitionsToTxn", 0, 5),
    25: ("AddOffsetsToTxn", 0, 4),
    26: ("EndTxn", 0, 4),
    27: ("WriteTxnMarkers", 0, 1),
    28: ("TxnOffsetCommit", 0, 4),
    29: ("DescribeAcls", 0, 3),
    30: ("CreateAcls", 0, 3),
    31: ("DeleteAcls", 0, 3),
    32: ("DescribeConfigs", 0, 4),
    33: ("AlterConfigs", 0, 2),
    34: ("AlterReplicaLogDirs", 0, 2),
    35: ("DescribeLogDirs", 0, 4),
    36: ("SaslAuthenticate", 0, 2),
    37: ("CreatePartitions", 0, 3),
    38: ("CreateDelegationToken", 0, 3),
    39: ("RenewDelegationToken", 0, 2),
    40: ("ExpireDelegationToken", 0, 2),
    41: ("DescribeDelegationToken", 0, 3),
    42: ("DeleteGroups", 0, 2),
    43: ("ElectLeaders", 0, 2),
    44: ("IncrementalAlterConfigs", 0, 1),
    45: ("AlterPartitionReassignments", 0, 0),
    46: ("ListPartitionReassignments", 0, 0),
    47: ("OffsetDelete", 0, 0),
    48: ("DescribeClientQuotas", 0, 1),
    49: ("AlterClientQuotas", 0, 1),
    50: ("DescribeUserScramCredentials", 0, 0),
    51: ("AlterUserScramCredentials", 0, 0),
    56: ("AlterPartition", 0, 3),
    57: ("UpdateFeatures", 0, 1),
    58: ("Envelope", 0, 0),
    60: ("DescribeCluster", 0, 1),
    61: ("DescribeProducers", 0, 0),
    65: ("DescribeTransactions", 0, 0),
    66: ("ListTransactions", 0, 1),
    67: ("AllocateProducerIds", 0, 0),
    68: ("ConsumerGroupHeartbeat", 0, 0),
    69: ("ConsumerGroupDescribe", 0, 0),
}
"""What a Kafka 3.9 broker in ZooKeeper mode advertises: the APIs whose message definition
(``clients/src/main/resources/common/message/*Request.json`` at the 3.9.0 tag) lists the
``zkBroker`` listener, with their ``validVersions`` (none of these marks its newest version
unstable). GetTelemetrySubscriptions, PushTelemetry and ListClientMetricsResources (71, 72,
74) list only the KRaft ``broker`` listener, as do DescribeTopicPartitions (75) and the
share-group APIs."""

_INTER_BROKER = (
    "inter-broker: served from the first version odradek's own controller and brokers send "
    "(only odradek brokers join an odradek cluster)"
)
_SECURITY = "security: delegation tokens are not served"
_TELEMETRY = (
    "client telemetry (KIP-714) is served as a Kafka 3.9 KRaft broker serves it; ZooKeeper "
    "mode does not list it"
)

REASONS: dict[int, str] = {
    4: _INTER_BROKER,
    5: _INTER_BROKER,
    6: _INTER_BROKER,
    7: _INTER_BROKER,
    27: _INTER_BROKER,
    38: _SECURITY,
    39: _SECURITY,
    40: _SECURITY,
    41: _SECURITY,
    56: _INTER_BROKER,
    57: "feature flags (KIP-584) are not versioned: every broker of a cluster runs one release",
    58: "forwarding to a KRaft controller (ZooKeeper migration, KIP-866) does not exist here",
    67: (
        "producer id blocks are taken from ZooKeeper's /latest_producer_id_block by each "
        "broker, as Kafka does before IBP 3.0"
    ),
    68: (
        "the consumer group protocol (KIP-848) is not implemented; a Kafka 3.9 ZooKeeper "
        "broker lists it but answers UNSUPPORTED_VERSION, and librdkafka uses it once offered"
    ),
    69: (
        "the consumer group protocol (KIP-848) is not implemented; librdkafka's "
        "describe_consumer_groups uses it once offered"
    ),
    71: _TELEMETRY,
    72: _TELEMETRY,
    74: _TELEMETRY,
}
"""Why odradek's range differs from Kafka 3.9's, per API key."""


def rows() -> list[tuple[int, str, str, str, str]]:
    """(key, API, Kafka 3.9, odradek, difference) per API either side serves."""
    served = {k: (s.name, s.min_version, s.max_version) for k, s in load_registry().items()}
    out = []
    for key in sorted(set(KAFKA_3_9) | set(served)):
        kafka = KAFKA_3_9.get(key)
        ours = served.get(key)
        name = (kafka or ours or ("?", 0, 0))[0]
        k_range = NONE if kafka is None else _range(kafka[1], kafka[2])
        o_range = NONE if ours is None else _range(ours[1], ours[2])
        same = kafka is not None and ours is not None and kafka[1:] == ours[1:]
        out.append((key, name, k_range, o_range, "" if same else REASONS.get(key, "")))
    return out


def _range(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def problems() -> list[str]:
    """Differences without a reason, and reasons without a difference."""
    out = []
    for key, name, k_range, o_range, _ in rows():
        differs = k_range != o_range
        if differs and key not in REASONS:
            out.append(f"{name} ({key}): odradek {o_range}, Kafka 3.9 {k_range}, no reason given")
        if not differs and key in REASONS:
            out.append(f"{name} ({key}): no longer differs; drop its reason")
    return out


def render() -> str:
    lines = [
        "| key | API | Kafka 3.9 (ZooKeeper mode) | odradek | difference |",
        "|---|---|---|---|---|",
    ]
    for key, name, k_range, o_range, reason in rows():
        lines.append(f"| {key} | {name} | {k_range} | {o_range} | {reason} |")
    return "\n".join(lines)


def _splice(page: str, table: str) -> str:
    start = page.index(START) + len(START)
    end = page.index(END)
    return page[:start] + "\n" + table + "\n" + page[end:]


def main(argv: list[str]) -> int:
    errors = problems()
    for e in errors:
        print(e, file=sys.stderr)
    page = PAGE.read_text(encoding="utf-8")
    wanted = _splice(page, render())
    if "--check" in argv:
        if wanted != page:
            print(
                f"{PAGE}: the API table differs from the code; run tools/api_table.py",
                file=sys.stderr,
            )
            return 1
        return 1 if errors else 0
    PAGE.write_text(wanted, encoding="utf-8")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
