"""Schema-aware mirroring: two broker processes, each with its own schema registry; records
produced on A with odradek.client's AvroSerializer are read on B with an AvroDeserializer pointed
at B's registry. B's registry holds unrelated schemas first, so A's ids mean something else on B."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.client import Producer
from odradek.client.avro import AvroDeserializer, AvroSerializer, SchemaRegistryClient, frame
from odradek.mirror.schemas import framed_id
from odradek.testing.process import BrokerProcess

from .conftest import SETTINGS, MirrorProcess, base_properties, end_offsets, read_topic, wait_until

REGISTRY_RE = re.compile(r"schema registry listening on (http://\S+)")

USER = {"type": "record", "name": "User", "namespace": "t",
        "fields": [{"name": "name", "type": "string"}, {"name": "n", "type": "long"}]}
KEY = {"type": "record", "name": "Key", "namespace": "t", "fields": [{"name": "id", "type": "int"}]}
ADDRESS = {"type": "record", "name": "Address", "namespace": "t", "fields": [{"name": "city", "type": "string"}]}
PERSON = {"type": "record", "name": "Person", "namespace": "t",
          "fields": [{"name": "home", "type": "t.Address"}]}
N = 200


class RegistryCluster:
    def __init__(self) -> None:
        self.process = BrokerProcess({**SETTINGS, "schema.registry.listeners": "http://127.0.0.1:0",
                                      "offsets.topic.num.partitions": 1}, log_level="info")
        self.process.start()
        deadline = time.monotonic() + 30
        while not (m := REGISTRY_RE.search(self.process.stderr_tail(1 << 20))):
            assert time.monotonic() < deadline, "no registry line in the broker log"
            time.sleep(0.05)
        self.url = m.group(1)
        self.bootstrap_servers = self.process.bootstrap_servers

    def call(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(self.url + path, None if body is None else json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(req, timeout=15) as r:
            return json.loads(r.read())


@pytest.fixture(scope="module")
def registries() -> Iterator[tuple[RegistryCluster, RegistryCluster]]:
    a = RegistryCluster()
    try:
        b = RegistryCluster()
        try:
            yield a, b
        finally:
            b.process.close()
    finally:
        a.process.close()


def _produce(a: RegistryCluster, topic: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """N framed records (Avro key and value), one plain record, one framed with an id A does not
    know, one Person (a schema with a reference). The source ids by name."""
    values = [{"name": f"user-{i}", "n": i} for i in range(N)]
    ser = AvroSerializer(a.url, USER, topic=topic)
    kser = AvroSerializer(a.url, KEY, topic=topic, is_key=True)
    reg = SchemaRegistryClient(a.url)
    reg.register("address", json.dumps(ADDRESS))
    person_id = reg.register_full(f"{topic}-person", {
        "schema": json.dumps(PERSON), "references": [{"name": "t.Address", "subject": "address", "version": 1}]})
    import io

    import fastavro

    person = io.BytesIO()
    fastavro.schemaless_writer(person, fastavro.parse_schema({**PERSON, "fields": [{"name": "home", "type": ADDRESS}]}),
                               {"home": {"city": "Lund"}})
    with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
        for i, v in enumerate(values):
            p.send(topic, ser(v), key=kser({"id": i}), partition=0)
        p.send(topic, b"\x00\x00\x00\x27\x0fnot known", partition=0)  # framed, id 9999 unknown to A
        p.send(topic, b"plain text", partition=0)
        p.send(topic, frame(person_id, person.getvalue()), partition=0)
        p.flush(10)
    return values, {"user": ser.schema_id, "key": kser.schema_id, "person": person_id}


@pytest.mark.parametrize("eos", ["enabled", "disabled"])
def test_ids_rewritten_to_targets_registry(
    registries: tuple[RegistryCluster, RegistryCluster], mirrors: Callable[..., MirrorProcess], eos: str
) -> None:
    a, b = registries
    topic = f"users-{eos}"
    # unrelated schemas on B first: A's ids cannot coincide with B's
    for i in range(6):
        SchemaRegistryClient(b.url).register(f"unrelated-{eos}-{i}", json.dumps(
            {"type": "record", "name": f"Other{eos}{i}", "fields": [{"name": "x", "type": "int"}]}))
    values, src_ids = _produce(a, topic)
    props = base_properties(a.process, b.process, **{
        "A->B.topics": topic, "exactly.once.source.support": eos, "A.consumer.isolation.level": "read_committed",
        "A.schema.registry.url": a.url, "B.schema.registry.url": b.url, "emit.checkpoints.enabled": "false"})
    m = mirrors(props, name=f"mirror-{eos}").start()
    remote = f"A.{topic}"
    wait_until(lambda: end_offsets(b.bootstrap_servers, remote, read_committed=True).get(0, 0) >= N + 3, 60,
               f"{remote} filled", m.log)
    assert m.terminate() == 0
    recs = read_topic(b.bootstrap_servers, remote, read_committed=True)[0]
    assert len(recs) == N + 3  # exactly once here, and nothing dropped

    de, kde = AvroDeserializer(b.url), AvroDeserializer(b.url, is_key=True)
    assert [de.decode_record(r) for r in recs[:N]] == values
    assert [kde.decode_record(r) for r in recs[:N]] == [{"id": i} for i in range(N)]
    dst_user, dst_key = framed_id(recs[0].value), framed_id(recs[0].key)
    assert dst_user is not None and dst_user != src_ids["user"] and dst_key != src_ids["key"]
    # the same schema under the same subject on B
    on_b = b.call("GET", f"/subjects/{topic}-value/versions/latest")
    assert on_b["id"] == dst_user and json.loads(on_b["schema"]) == json.loads(a.call("GET", f"/schemas/ids/{src_ids['user']}")["schema"])

    # unknown id: copied unchanged, logged with topic/partition/offset, counted
    assert recs[N].value == b"\x00\x00\x00\x27\x0fnot known"
    log = m.log()
    assert re.search(rf"{topic}/0 offset {N}: value of the record: schema id 9999 is not in the source registry", log), log[-3000:]
    assert recs[N + 1].value == b"plain text"

    # a schema with a reference: the referenced subject registered on B first, the reference rewritten
    dst_person = framed_id(recs[N + 2].value)
    assert dst_person is not None and dst_person != src_ids["person"]
    person_on_b = b.call("GET", f"/schemas/ids/{dst_person}")
    addr_version = person_on_b["references"][0]["version"]
    addr_on_b = b.call("GET", f"/subjects/address/versions/{addr_version}")
    assert json.loads(addr_on_b["schema"]) == ADDRESS
    assert {"subject": f"{topic}-person", "version": 1} in b.call("GET", f"/schemas/ids/{dst_person}/versions")
    assert (recs[N + 2].value or b"")[5:] == (read_topic(a.bootstrap_servers, topic)[0][N + 2].value or b"")[5:]


def test_target_registry_down_writes_nothing_untranslated(
    registries: tuple[RegistryCluster, RegistryCluster], mirrors: Callable[..., MirrorProcess]
) -> None:
    """A target registry that does not answer fails the batch before anything is written; once it
    answers, every record arrives once, translated."""
    a, b = registries
    topic = "users-down"
    ser = AvroSerializer(a.url, USER, topic=topic)
    with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
        for i in range(20):
            p.send(topic, ser({"name": f"u{i}", "n": i}), partition=0)
        p.flush(10)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    common = {"A->B.topics": topic, "exactly.once.source.support": "enabled", "emit.checkpoints.enabled": "false",
              "A.schema.registry.url": a.url}
    m = mirrors(base_properties(a.process, b.process, **common, **{"B.schema.registry.url": dead}), name="down").start()
    wait_until(lambda: re.search(rf"flow A->B: schema registry {re.escape(dead)} unreachable: .*; 20 records of {topic} 0 held back", m.log()), 60,
               "the unreachable registry logged", m.log)
    assert end_offsets(b.bootstrap_servers, f"A.{topic}", read_committed=True).get(0, 0) == 0
    assert m.terminate() == 0
    m2 = mirrors(base_properties(a.process, b.process, **common, **{"B.schema.registry.url": b.url}), name="up").start()
    wait_until(lambda: end_offsets(b.bootstrap_servers, f"A.{topic}", read_committed=True).get(0, 0) >= 20, 60,
               "the records on B", m2.log)
    assert m2.terminate() == 0
    recs = read_topic(b.bootstrap_servers, f"A.{topic}", read_committed=True)[0]
    de = AvroDeserializer(b.url)
    assert [de.decode_record(r) for r in recs] == [{"name": f"u{i}", "n": i} for i in range(20)]
