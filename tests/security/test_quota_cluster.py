"""Client quotas in a cluster on ZooKeeper: three broker processes; a quota altered through
broker 1 throttles a producer on broker 3 within a second (Kafka's /config/changes
notifications), the znodes hold Kafka's JSON byte for byte (read with kazoo), and a user's
quotas share /config/users/<user> with the user's SCRAM credentials without clobbering them."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from tests.broker.wire import Wire, produce_request, req
from tests.cluster.conftest import Cluster, running_zookeeper

from odradek.cluster.zookeeper import ZooKeeperServer
from odradek.protocol.messages import encode_request
from odradek.protocol.records import build_batch
from odradek.security.quota_store import encode_entity_config

DEADLINE = 1.0
"""Kafka's promise: every broker applies a change within a second."""

RETRIABLE = (3, 6)
"""UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER: what a Produce may get on a broker that
has not yet taken a new topic's metadata or its leadership."""


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zookeeper")


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    c = Cluster(zookeeper, Path(tmp_path_factory.mktemp("quota-cluster")), 3)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture
def kz(cluster: Cluster, zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.connect_string + cluster.chroot)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


class ClientWire(Wire):
    """A Wire whose requests carry ``client_id``."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        super().__init__(bootstrap)
        self.client_id = client_id

    def send(self, entity: Any) -> int:
        self.correlation_id += 1
        self.sock.sendall(
            encode_request(entity, correlation_id=self.correlation_id, client_id=self.client_id)
        )
        return self.correlation_id


def alter(bootstrap: str, entity: dict[str, str | None], **ops: float | None) -> None:
    """AlterClientQuotas: ``key=value`` sets, ``key=None`` removes."""
    entry = req(
        49, 1, "EntryData",
        entity=tuple(req(49, 1, "EntityData", entity_type=t, entity_name=n)
                     for t, n in entity.items()),
        ops=tuple(req(49, 1, "OpData", key=k, value=v or 0.0, remove=v is None)
                  for k, v in ops.items()),
    )  # fmt: skip
    with Wire(bootstrap) as w:
        resp = w.call(req(49, 1, entries=(entry,), validate_only=False))
    assert [(int(e.error_code), e.error_message) for e in resp.entries] == [(0, None)]


def describe(bootstrap: str, entity: dict[str, str | None]) -> dict[str, float]:
    """The quotas of exactly ``entity`` as one broker answers DescribeClientQuotas."""
    components = tuple(
        req(48, 1, "ComponentData", entity_type=t, match_type=0 if n is not None else 1, match=n)
        for t, n in entity.items()
    )
    with Wire(bootstrap) as w:
        resp = w.call(req(48, 1, components=components, strict=True))
    assert int(resp.error_code) == 0
    return {v.key: v.value for e in resp.entries for v in e.values}


def wait_for(bootstrap: str, entity: dict[str, str | None], want: dict[str, float]) -> float:
    """Seconds until the broker describes ``want`` (polled, bounded by 10 s)."""
    start = time.monotonic()
    while describe(bootstrap, entity) != want:
        assert time.monotonic() - start < 10, f"{bootstrap} never applied {want}"
        time.sleep(0.02)
    return time.monotonic() - start


def last_notification(kz: KazooClient) -> Any:
    newest = max(kz.get_children("/config/changes"))
    return json.loads(kz.get(f"/config/changes/{newest}")[0])


def test_a_quota_altered_on_one_broker_throttles_on_another(
    cluster: Cluster, kz: KazooClient
) -> None:
    one = cluster.brokers[1].bootstrap_servers
    three = cluster.brokers[3].bootstrap_servers
    topic, client = f"q-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:8]}"
    assignment = req(19, 7, "CreatableReplicaAssignment", partition_index=0, broker_ids=(3,))
    creatable = req(19, 7, "CreatableTopic", name=topic, num_partitions=-1,
                    replication_factor=-1, assignments=(assignment,), configs=())  # fmt: skip
    with Wire(one) as w:
        created = w.call(req(19, 7, topics=(creatable,), timeout=ms(15000), validate_only=False))
    assert int(created.topics[0].error_code) == 0
    cluster.wait_metadata(
        lambda md: any(t.name == topic and t.partitions and t.partitions[0].leader_id == 3
                       for t in md.topics)
    )  # fmt: skip
    batch = build_batch([(None, os.urandom(30_000), (), int(time.time() * 1000))])

    # no quota yet: broker 3 does not throttle this client (asked until broker 3 has taken
    # the partition's leadership: the metadata above may come from another broker first)
    start = time.monotonic()
    with ClientWire(three, client) as w:
        while True:
            free = w.call(produce_request(topic, 0, batch))
            code = int(free.responses[0].partition_responses[0].error_code)
            if code == 0:
                break
            # Kafka's retriable answers while broker 3 learns of the topic and its leadership
            assert code in RETRIABLE, (code, cluster.logs())
            assert time.monotonic() - start < 15, (code, cluster.logs())
            time.sleep(0.05)
    assert free.throttle_time.total_seconds() == 0

    alter(one, {"client-id": client}, producer_byte_rate=1024)
    assert wait_for(three, {"client-id": client}, {"producer_byte_rate": 1024.0}) < DEADLINE
    with ClientWire(three, client) as w:
        throttled = w.call(produce_request(topic, 0, batch))
    assert int(throttled.responses[0].partition_responses[0].error_code) == 0
    assert throttled.throttle_time.total_seconds() > 1  # 30 kB at 1 kB/s over 11 s

    # Kafka's znodes, byte for byte
    data, _ = kz.get(f"/config/clients/{client}")
    assert data == b'{"version":1,"config":{"producer_byte_rate":"1024"}}'
    assert last_notification(kz) == {"version": 2, "entity_path": f"clients/{client}"}

    # removed through broker 2: broker 3 lets the client go again
    alter(cluster.brokers[2].bootstrap_servers, {"client-id": client}, producer_byte_rate=None)
    assert wait_for(three, {"client-id": client}, {}) < DEADLINE
    assert kz.get(f"/config/clients/{client}")[0] == b'{"version":1,"config":{}}'
    with ClientWire(three, client) as w:
        again = w.call(produce_request(topic, 0, batch))
    assert again.throttle_time.total_seconds() == 0


def test_default_entities_and_names_are_written_as_kafka_does(
    cluster: Cluster, kz: KazooClient
) -> None:
    one, two = cluster.brokers[1].bootstrap_servers, cluster.brokers[2].bootstrap_servers
    alter(one, {"user": None, "client-id": None}, request_percentage=200, producer_byte_rate=2048)
    wait_for(two, {"user": None, "client-id": None},
             {"request_percentage": 200.0, "producer_byte_rate": 2048.0})  # fmt: skip
    data, _ = kz.get("/config/users/<default>/clients/<default>")
    assert data == (
        b'{"version":1,"config":{"request_percentage":"200.0","producer_byte_rate":"2048"}}'
    )
    assert last_notification(kz) == {
        "version": 2,
        "entity_path": "users/<default>/clients/<default>",
    }
    user = "CN=bob smith,O=Acme"  # a TLS principal: sanitized in the path
    alter(one, {"user": user, "client-id": "app"}, controller_mutation_rate=10)
    path = "/config/users/CN%3Dbob%20smith%2CO%3DAcme/clients/app"
    assert kz.get(path)[0] == b'{"version":1,"config":{"controller_mutation_rate":"10.0"}}'
    wait_for(two, {"user": user, "client-id": "app"}, {"controller_mutation_rate": 10.0})
    alter(one, {"user": None, "client-id": None}, request_percentage=None, producer_byte_rate=None)
    alter(one, {"user": user, "client-id": "app"}, controller_mutation_rate=None)


def test_a_users_quotas_and_scram_credentials_share_its_znode(
    cluster: Cluster, kz: KazooClient
) -> None:
    one, two, three = (cluster.brokers[i].bootstrap_servers for i in (1, 2, 3))
    user = f"alice-{uuid.uuid4().hex[:6]}"
    upsert = req(51, 0, "ScramCredentialUpsertion", name=user, mechanism=1, iterations=4096,
                 salt=b"s" * 16, salted_password=b"p" * 32)  # fmt: skip
    with Wire(two) as w:
        resp = w.call(req(51, 0, deletions=(), upsertions=(upsert,)))
    assert int(resp.results[0].error_code) == 0
    path = f"/config/users/{user}"
    scram = json.loads(kz.get(path)[0])["config"]
    assert list(scram) == ["SCRAM-SHA-256"]

    alter(one, {"user": user}, producer_byte_rate=1024, consumer_byte_rate=2048)
    data, _ = kz.get(path)
    assert data == encode_entity_config(
        {**scram, "producer_byte_rate": "1024", "consumer_byte_rate": "2048"}
    )
    wait_for(three, {"user": user}, {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0})

    alter(three, {"user": user}, producer_byte_rate=None, consumer_byte_rate=None)
    assert json.loads(kz.get(path)[0])["config"] == scram  # the credential is still there
    with Wire(one) as w:
        described = w.call(req(50, 0, users=None))
    assert user in {r.user for r in described.results}


def ms(n: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=n)
