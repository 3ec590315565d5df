"""mm2.properties parsing and resolution (pure)."""

from __future__ import annotations

import pytest

from odradek.mirror.config import MirrorConfigError, load_config, parse_properties
from odradek.mirror.policy import IdentityReplicationPolicy, ReplicationPolicy

# an MM2 user's file, as MM2's documentation writes it (connect-mirror-maker.properties)
MM2 = """\
# Kafka datacenters.
clusters = A, B
A.bootstrap.servers = 127.0.0.1:9092
B.bootstrap.servers: 127.0.0.1:9093

A->B.enabled = true
A->B.topics = orders.*, payments
B->A.enabled = false

replication.factor=1
checkpoints.topic.replication.factor=1
heartbeats.topic.replication.factor=1
offset-syncs.topic.replication.factor=1
offset.storage.replication.factor=1
sync.topic.acls.enabled = false
emit.checkpoints.interval.seconds = 5
B.exactly.once.source.support = enabled
A.consumer.max.poll.records = 1000
A.producer.linger.ms \\
   = 20
"""


def test_mm2_file_resolves_to_one_flow_with_mm2_defaults() -> None:
    cfg = load_config(parse_properties(MM2, "mm2.properties"))
    assert cfg.clusters == ("A", "B")
    (flow,) = cfg.flows
    assert flow.name == "A->B"
    assert flow["replication.factor"] == 1
    assert flow["emit.checkpoints.interval.seconds"] == 5
    assert flow["offset.lag.max"] == 100
    assert flow["refresh.topics.interval.seconds"] == 600
    assert flow["emit.heartbeats.interval.seconds"] == 1
    assert flow["sync.group.offsets.enabled"] is False
    assert flow.exactly_once  # per target cluster
    assert flow.source_client["consumer"]["bootstrap.servers"] == "127.0.0.1:9092"
    assert flow.source_client["consumer"]["max.poll.records"] == "1000"
    assert "max.poll.records" not in flow.source_client["producer"]
    assert flow.source_client["producer"]["linger.ms"] == "20"
    assert flow.target_client["admin"]["bootstrap.servers"] == "127.0.0.1:9093"
    assert "offset.storage.replication.factor" in cfg.ignored


def test_topic_filters_are_mm2_defaults() -> None:
    cfg = load_config("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\n")
    (f,) = cfg.flows
    for t in ("orders", "a.b", "x-y"):
        assert f.should_replicate_topic(t), t
    for t in ("__consumer_offsets", "mm2-offset-syncs.B.internal", "A.checkpoints.internal", "foo-internal",
              "x.replica", "B.orders", "A.B.orders"):
        assert not f.should_replicate_topic(t), t
    assert f.should_replicate_topic("heartbeats")
    assert f.should_replicate_topic("C.heartbeats")
    assert not f.should_replicate_topic("B.heartbeats")  # came from the target: a cycle
    assert f.group_selected("app")
    for g in ("console-consumer-123", "connect-x", "__x"):
        assert not f.group_selected(g)
    assert f.config_selected("retention.ms")
    assert not f.config_selected("min.insync.replicas")
    assert not f.config_selected("message.timestamp.type")


def test_flow_overrides_top_level_and_topics_are_full_matches() -> None:
    cfg = load_config(
        "clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nB->A.enabled=true\n"
        "topics=orders.*\nB->A.topics=pay\ntopics.exclude=orders\\\\.tmp\noffset.lag.max=7\nB->A.offset.lag.max=0\n"
    )
    ab, ba = cfg.flows
    assert (ab.name, ba.name) == ("A->B", "B->A")
    assert ab.topic_selected("orders.eu") and not ab.topic_selected("xorders") and not ab.topic_selected("orders.tmp")
    assert ba.topic_selected("pay") and not ba.topic_selected("pay2") and not ba.topic_selected("orders")
    assert (ab["offset.lag.max"], ba["offset.lag.max"]) == (7, 0)
    assert not ab.exactly_once


def test_clusters_option_keeps_flows_into_those_targets() -> None:
    text = "clusters=A,B,C\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nC.bootstrap.servers=h:3\nA->B.enabled=true\nC->A.enabled=true\n"
    assert [f.name for f in load_config(text, ["B"]).flows] == ["A->B"]
    assert [f.name for f in load_config(text, ["A"]).flows] == ["C->A"]
    with pytest.raises(MirrorConfigError, match="--clusters D"):
        load_config(text, ["D"])


def test_replication_policies() -> None:
    cfg = load_config(
        "clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\n"
        "replication.policy.separator=_\n"
    )
    p = cfg.flows[0].policy
    assert type(p) is ReplicationPolicy
    assert p.format_remote_topic("A", "orders") == "A_orders"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert p.checkpoints_topic("A") == "A_checkpoints_internal"
    assert p.is_cycle("B_orders", "B") and p.is_cycle("C_B_orders", "B") and not p.is_cycle("C_orders", "B")
    ident = load_config(
        "clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\n"
        "A->B.replication.policy.class=org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    ).flows[0].policy
    assert isinstance(ident, IdentityReplicationPolicy)
    assert ident.format_remote_topic("A", "orders") == "orders"
    assert ident.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert not ident.is_cycle("B.orders", "B")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("A.bootstrap.servers=h:1\n", "clusters: missing"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=maybe\n", "<properties>:4: A->B.enabled: invalid value 'maybe'"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\n\ntopics=orders(\n", "<properties>:6: topics: invalid value"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nA->B.offset.lag.max=x\n", ":5: A->B.offset.lag.max"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nA->B.enabled=true\n", "B.bootstrap.servers: missing"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->C.enabled=true\n", ":4: A->C.enabled: flow 'A->C' names a cluster"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nreplication.policy.class=Foo\n", ":5: replication.policy.class: unknown"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nB.exactly.once.source.support=yes\n", ":5: B.exactly.once.source.support: invalid value"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nA.consumer.fetch.min.bytes=lots\n", ":5: A.consumer.fetch.min.bytes"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nA.security.protocol=SASL_TLS\n", ":5: A.security.protocol"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nA.security.protocol=SASL_SSL\nA.sasl.mechanism=SCRAM-SHA-512\n", "needs sasl.jaas.config"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nB.security.protocol=SASL_SSL\nB.sasl.mechanism=PLAIN\nB.sasl.jaas.config=nonsense\n", ":7: B.sasl.jaas.config"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\nA.security.protocol=SSL\nA.ssl.truststore.location=/nonexistent/ca.pem\n", "A.ssl.truststore.location"),
        ("clusters=A,B\nA.bootstrap.servers=h:1\nB.bootstrap.servers=h:2\nA->B.enabled=true\n= 3\n", "<properties>:5: a value without a key"),
    ],
)
def test_malformed_file_fails_naming_key_and_line(text: str, message: str) -> None:
    with pytest.raises(MirrorConfigError) as info:
        load_config(text)
    assert message in str(info.value)


def test_properties_syntax() -> None:
    p = parse_properties("a=1\n  ! comment\nb : two words \nc three\\\n  four\nd\\=x=5\ne=\\u0041\\t\nf==g\n", "f")
    assert p.values == {"a": "1", "b": "two words ", "c": "threefour", "d=x": "5", "e": "A\t", "f": "=g"}
    assert p.lines["c"] == 4 and p.lines["f"] == 8
