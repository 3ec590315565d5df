"""Old request versions (those Kafka 3.9 serves and kio cannot decode) over TCP to a real broker.

The old requests are encoded, and the old responses decoded, by kafka-python 3.0's message
classes (generated from Kafka's JSON specs, independently of kio and of odradek), over a raw
socket with request header v1 and response header v0.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest
from kafka.protocol import admin as kp_admin
from kafka.protocol.consumer import fetch as kp_fetch
from kafka.protocol.consumer import offsets as kp_offsets
from kafka.protocol.producer import produce as kp_produce

from broker.wire import Wire, kp_build, metadata_request, produce_request, req
from odradek.broker.registry import API_SPECS
from odradek.protocol.legacy_records import encode_message, iter_messages
from odradek.protocol.legacy_versions import legacy_codec
from odradek.protocol.messages import request_codec
from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(120)

BROKER_SETTINGS = {"num.partitions": 1}

KAFKA_3_9 = {
    0: (0, 11),  # Produce
    1: (0, 17),  # Fetch
    2: (0, 9),  # ListOffsets
    3: (0, 12),  # Metadata
    4: (0, 7),  # LeaderAndIsr (inter-broker, ZooKeeper mode)
    5: (0, 4),  # StopReplica (inter-broker)
    6: (0, 8),  # UpdateMetadata (inter-broker)
    7: (0, 3),  # ControlledShutdown (inter-broker)
    8: (0, 9),  # OffsetCommit
    9: (0, 9),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (0, 1),  # SaslHandshake
    18: (0, 4),  # ApiVersions
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (0, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn
    27: (0, 1),  # WriteTxnMarkers
    28: (0, 4),  # TxnOffsetCommit
    29: (0, 3),  # DescribeAcls
    30: (0, 3),  # CreateAcls
    31: (0, 3),  # DeleteAcls
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    34: (0, 2),  # AlterReplicaLogDirs
    35: (0, 4),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    56: (0, 3),  # AlterPartition (broker to controller)
    60: (0, 1),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions
    71: (0, 0),  # GetTelemetrySubscriptions (a KRaft broker's: KIP-714)
    72: (0, 0),  # PushTelemetry (a KRaft broker's: KIP-714)
    74: (0, 0),  # ListClientMetricsResources (a KRaft broker's: KIP-714)
}
"""The request versions Apache Kafka 3.9's broker serves, for the APIs odradek has: the
``validVersions`` of clients/src/main/resources/common/message/*Request.json at the 3.9.0-rc3
tag (released as 3.9.0), read on 2026-11-26."""

KNOWN_GAPS: dict[int, str] = {}
"""APIs whose newest Kafka 3.9 versions odradek does not serve (docs/internals.md lists them)."""

INTER_BROKER_MINIMUM = {4: 6, 5: 3, 6: 7, 7: 3, 27: 1, 56: 2}
"""Inter-broker APIs are served from the versions odradek's own controller and brokers send
(only odradek brokers talk to an odradek cluster); Kafka 3.9 also serves older ones."""


class OldWire:
    """Raw old-version calls: request header v1, response header v0."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation_id = 100

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: bytes) -> int:
        self.correlation_id += 1
        client = b"old-wire"
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(client)) + client
        self.sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        return self.correlation_id

    def recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return bytes(buf)

    def receive(self, correlation_id: int) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exactly(4))
        frame = self.recv_exactly(size)
        assert struct.unpack_from(">i", frame)[0] == correlation_id
        return frame[4:]

    def call(self, kp_request: Any, kp_response: Any, version: int, values: dict[str, Any]) -> Any:
        request_cls = kp_request[version]
        body = bytes(kp_build(request_cls, values).encode())
        got = self.receive(self.send(request_cls.API_KEY, version, body))
        return kp_response[version].decode(got).to_dict()


@pytest.fixture
def old(broker: BrokerProcess) -> Any:
    w = OldWire(broker.bootstrap_servers)
    try:
        yield w
    finally:
        w.close()


def _ensure_topics(broker: BrokerProcess, *topics: str) -> None:
    """What a producer does first: Metadata allowing auto-creation (Produce never creates)."""
    with Wire(broker.bootstrap_servers) as w:
        r = w.call(metadata_request(list(topics)))
        assert [int(t.error_code) for t in r.topics] == [0] * len(topics)


def _produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    _ensure_topics(broker, topic)
    with Wire(broker.bootstrap_servers) as w:
        rows = [(b"k", v, (), 1_700_000_000_000 + i) for i, v in enumerate(values)]
        r = w.call(produce_request(topic, 0, build_batch(rows)))
        assert r.responses[0].partition_responses[0].error_code.value == 0


def test_api_versions_advertises_exactly_what_is_served(broker: BrokerProcess) -> None:
    """Every advertised version decodes (kio or the legacy codec), each API starts at v0 where
    Kafka 3.9 does, and the maximum is Kafka 3.9's except the listed gaps."""
    with Wire(broker.bootstrap_servers) as w:
        response = w.call(req(18, 3, client_software_name="t", client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {s.key: (s.min_version, s.max_version) for s in API_SPECS}
    for key, (lo, hi) in advertised.items():
        for version in range(lo, hi + 1):
            assert request_codec(key, version) or legacy_codec(key, version), (key, version)
        kafka_lo, kafka_hi = KAFKA_3_9[key]
        assert lo == INTER_BROKER_MINIMUM.get(key, kafka_lo), key
        if key in KNOWN_GAPS:
            assert hi < kafka_hi, (key, "the gap is closed: update KNOWN_GAPS and the docs")
        else:
            assert hi >= kafka_hi, key


@pytest.mark.parametrize("version", [0, 1])
def test_offset_for_leader_epoch_v0_v1(broker: BrokerProcess, old: OldWire, version: int) -> None:
    _produce(broker, f"ofle{version}", [b"a", b"b", b"c"])
    r = old.call(
        kp_offsets.OffsetForLeaderEpochRequest,
        kp_offsets.OffsetForLeaderEpochResponse,
        version,
        {
            "topics": [
                {"topic": f"ofle{version}", "partitions": [{"partition": 0, "leader_epoch": 0}]},
                {"topic": "no-such-topic", "partitions": [{"partition": 0, "leader_epoch": 0}]},
            ]
        },
    )
    found, missing = r["topics"]
    p = found["partitions"][0]
    assert (p["error_code"], p["partition"], p["end_offset"]) == (0, 0, 3)
    if version == 1:
        assert p["leader_epoch"] == 0
    assert missing["partitions"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_v0_as_burrow_sends_it(broker: BrokerProcess, old: OldWire) -> None:
    _produce(broker, "lo0", [b"x"] * 5)
    for timestamp, offsets in ((-1, [5]), (-2, [0])):  # latest, earliest
        r = old.call(
            kp_offsets.ListOffsetsRequest,
            kp_offsets.ListOffsetsResponse,
            0,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "name": "lo0",
                        "partitions": [
                            {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": 1}
                        ],
                    }
                ],
            },
        )
        assert r["topics"][0]["partitions"][0]["old_style_offsets"] == offsets, timestamp


def test_produce_v0_acks_0_answers_nothing_and_v1_message_sets_are_stored_as_v2(
    broker: BrokerProcess, old: OldWire
) -> None:
    messages = b"".join(
        encode_message(i, 1, b"k%d" % i, b"v%d" % i, timestamp=1_700_000_000_000 + i)
        for i in range(3)
    )

    def produce(acks: int, version: int) -> dict[str, Any]:
        return {
            "acks": acks,
            "timeout_ms": 5000,
            "topic_data": [{"name": "p0", "partition_data": [{"index": 0, "records": messages}]}],
        }

    _ensure_topics(broker, "p0")
    request = kp_produce.ProduceRequest[0]
    old.send(0, 0, bytes(kp_build(request, produce(0, 0)).encode()))  # acks=0: no answer
    r = old.call(kp_produce.ProduceRequest, kp_produce.ProduceResponse, 2, produce(1, 2))
    # the acks=0 request was answered with nothing: this is the next correlation id's answer
    p = r["responses"][0]["partition_responses"][0]
    assert (p["error_code"], p["base_offset"]) == (0, 3)
    # a modern consumer reads v2 batches with the v1 timestamps kept
    with Wire(broker.bootstrap_servers) as w:
        from broker.wire import fetch_request, fetched_batches

        fetched = w.call(fetch_request("p0", {0: 0}))
    batches = fetched_batches(fetched.responses[0].partitions[0].records)
    records = [r for b in batches for r in b.records()]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (o + base, b"k%d" % o, b"v%d" % o, 1_700_000_000_000 + o)
        for base in (0, 3)
        for o in range(3)
    ]
    assert all(b.magic == 2 for b in batches)


def test_corrupt_message_set_is_refused_for_its_partition_only(
    broker: BrokerProcess, old: OldWire
) -> None:
    good = encode_message(0, 0, None, b"good")
    bad = bytearray(encode_message(0, 0, None, b"bad"))
    bad[12] ^= 0xFF  # the CRC
    _ensure_topics(broker, "crc-a", "crc-b")
    r = old.call(
        kp_produce.ProduceRequest,
        kp_produce.ProduceResponse,
        1,
        {
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [
                {"name": "crc-a", "partition_data": [{"index": 0, "records": bytes(bad)}]},
                {"name": "crc-b", "partition_data": [{"index": 0, "records": good}]},
            ],
        },
    )
    codes = [t["partition_responses"][0]["error_code"] for t in r["responses"]]
    assert codes == [2, 0]  # CORRUPT_MESSAGE for the bad one; the good one is written


@pytest.mark.parametrize("version", [0, 3])
def test_fetch_below_v4_streams_a_large_down_converted_response(
    broker: BrokerProcess, old: OldWire, version: int
) -> None:
    """Several MiB of v2 batches down-converted chunk by chunk, read slowly, arrive whole."""
    topic = f"big{version}"
    value = bytes(range(256)) * 16  # 4 KiB
    _ensure_topics(broker, topic)
    with Wire(broker.bootstrap_servers) as w:
        for b in range(24):
            rows = [(None, value, (), 1_700_000_000_000) for _ in range(64)]  # 256 KiB batches
            r = w.call(produce_request(topic, 0, build_batch(rows)))
            assert r.responses[0].partition_responses[0].error_code.value == 0, b
    total = 24 * 64
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 64 << 20,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 64 << 20}
                ],
            }
        ],
    }
    old.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    corr = old.send(1, version, bytes(kp_build(kp_fetch.FetchRequest[version], body).encode()))
    (size,) = struct.unpack(">i", old.recv_exactly(4))
    frame = bytearray()
    while len(frame) < size:  # a slow reader: 64 KiB at a time
        frame += old.recv_exactly(min(64 * 1024, size - len(frame)))
    assert struct.unpack_from(">i", frame)[0] == corr
    p = kp_fetch.FetchResponse[version].decode(bytes(frame[4:])).responses[0].partitions[0]
    assert (p.error_code, p.high_watermark) == (0, total)
    records = p.records if isinstance(p.records, bytes) else bytes(p.records.buffer())
    messages = list(iter_messages(records, partial_ok=True))
    assert [m.offset for m in messages] == list(range(len(messages)))
    # the size is declared before conversion (Kafka's LazyDownConversionRecords): converted
    # messages are larger than v2 records, so the last batch may be cut (a partial message)
    assert total - 64 <= len(messages) <= total
    assert all(m.value == value and m.magic == (0 if version <= 1 else 1) for m in messages)
    assert all(m.key is None for m in messages)
    # the connection is still in sync
    r = old.call(
        kp_admin.DescribeConfigsRequest,
        kp_admin.DescribeConfigsResponse,
        0,
        {
            "resources": [
                {"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]}
            ]
        },
    )
    config = r["results"][0]["configs"][0]
    assert (config["name"], config["value"], config["is_default"]) == (
        "retention.ms",
        "604800000",
        True,
    )


def _fetch_old(old: OldWire, version: int, topic: str) -> Any:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    request = bytes(kp_build(kp_fetch.FetchRequest[version], body).encode())
    got = old.receive(old.send(1, version, request))
    return kp_fetch.FetchResponse[version].decode(got).responses[0].partitions[0]


@pytest.mark.parametrize("version", [0, 3])
def test_fetch_below_v4_of_a_topic_without_down_conversion_is_unsupported_version(
    broker: BrokerProcess, old: OldWire, version: int
) -> None:
    """message.downconversion.enable=false: an old consumer's fetch gets UNSUPPORTED_VERSION
    (35) for the topic, as in Kafka, while v4+ reads it; altering the config back to true lets
    the old version read it at once."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    topic = f"nodown{version}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    new = NewTopic(topic, 1, 1, config={"message.downconversion.enable": "false"})
    admin.create_topics([new])[topic].result(15)
    _produce(broker, topic, [b"a", b"b"])
    _produce(broker, "plain", [b"c"])

    p = _fetch_old(old, version, topic)
    assert (p.error_code, p.high_watermark) == (35, -1)
    assert _fetch_old(old, version, "plain").error_code == 0  # other topics are unaffected
    with Wire(broker.bootstrap_servers) as w:
        from broker.wire import fetch_request, fetched_batches

        fetched = w.call(fetch_request(topic, {0: 0}))
    assert fetched.responses[0].partitions[0].error_code.value == 0
    assert len(fetched_batches(fetched.responses[0].partitions[0].records)) == 1

    resource = ConfigResource("topic", topic, set_config={"message.downconversion.enable": "true"})
    admin.alter_configs([resource])[resource].result(15)
    p = _fetch_old(old, version, topic)
    assert (p.error_code, p.high_watermark) == (0, 2)
    messages = iter_messages(_records_bytes(p.records), partial_ok=True)  # then an overflow entry
    assert [m.value for m in messages] == [b"a", b"b"]


def _records_bytes(records: Any) -> bytes:
    return records if isinstance(records, bytes) else bytes(records.buffer())
