"""The schema registry with authentication and authorization (a broker with an authorizer),
over HTTPS: confluent-kafka's SchemaRegistryClient with ``basic.auth.user.info`` and the test
CA, its Avro serializer, and raw requests for Confluent's exact error bodies."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
import requests
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from tests.certs import Certs, make_certs
from tests.console.secured import (
    PASSWORDS,
    TIMEOUT,
    Secured,
    allow,
    running_secured_broker,
    unsecured_jwt,
)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
USER = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [{"name": "name", "type": "string"}],
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secured(certs: Certs) -> Iterator[Secured]:
    for s in running_secured_broker(certs):
        prefixed = ResourcePatternType.PREFIXED
        allow(s, "alice", ResourceType.TOPIC, "alice-", AclOperation.READ, prefixed)
        allow(s, "alice", ResourceType.TOPIC, "alice-", AclOperation.WRITE, prefixed)
        allow(s, "bob", ResourceType.TOPIC, "bob-", AclOperation.ALL, prefixed)
        allow(s, "carol", ResourceType.TOPIC, "alice-", AclOperation.READ, prefixed)
        yield s


def client(s: Secured, user: str, password: str | None = None) -> SchemaRegistryClient:
    secret = PASSWORDS.get(user, "") if password is None else password
    return SchemaRegistryClient(
        {
            "url": s.registry,
            "basic.auth.user.info": f"{user}:{secret}",
            "ssl.ca.location": str(s.certs.ca_pem),
        }
    )


def raw(
    s: Secured, method: str, path: str, body: object = None, **kw: object
) -> requests.Response:
    return requests.request(
        method,
        s.registry + path,
        data=None if body is None else json.dumps(body),
        headers={"Content-Type": CONTENT_TYPE, **kw.pop("headers", {})},  # type: ignore[dict-item]
        verify=str(s.certs.ca_pem),
        timeout=TIMEOUT,
        **kw,  # type: ignore[arg-type]
    )


def avro() -> Schema:
    return Schema(json.dumps(USER), "AVRO")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_confluent_client_with_basic_auth_over_https(secured: Secured) -> None:
    topic = unique("alice")
    alice = client(secured, "alice")
    schema_id = alice.register_schema(f"{topic}-value", avro())
    assert json.loads(alice.get_schema(schema_id).schema_str) == USER
    latest = alice.get_latest_version(f"{topic}-value")
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    # the serializer registers and frames with the same credentials
    serializer = AvroSerializer(alice, json.dumps(USER))
    framed = serializer({"name": "x"}, SerializationContext(topic, MessageField.VALUE))
    assert framed is not None and framed[1:5] == schema_id.to_bytes(4, "big")


def test_wrong_password_and_no_credentials_get_401(secured: Secured) -> None:
    with pytest.raises(SchemaRegistryError) as err:
        client(secured, "alice", "wrong").get_subjects()
    assert (err.value.http_status_code, err.value.error_code) == (401, 401)
    with pytest.raises(SchemaRegistryError) as err:
        client(secured, "mallory", "whatever").get_subjects()
    assert (err.value.http_status_code, err.value.error_code) == (401, 401)
    r = raw(secured, "GET", "/subjects")
    assert r.status_code == 401
    assert r.content == b'{"error_code":401,"message":"Unauthorized"}'
    assert r.headers["content-type"] == CONTENT_TYPE
    assert r.headers["www-authenticate"].startswith('Basic realm="SchemaRegistry"')
    r = raw(secured, "GET", "/schemas/ids/1", headers={"Authorization": "Basic !!!"})
    assert r.status_code == 401


def test_subjects_are_authorized_on_their_topics_acls(secured: Secured) -> None:
    alice, bob = client(secured, "alice"), client(secured, "bob")
    bob_subject = f"{unique('bob')}-value"
    bob_id = bob.register_schema(bob_subject, avro())
    # alice may not write, read or delete bob's subject: 403 with Confluent's 40301
    with pytest.raises(SchemaRegistryError) as err:
        alice.register_schema(bob_subject, avro())
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    r = raw(secured, "GET", f"/subjects/{bob_subject}/versions", auth=("alice", PASSWORDS["alice"]))
    assert r.status_code == 403
    assert r.json() == {
        "error_code": 40301,
        "message": f"User is denied operation Read on Subject: {bob_subject}",
    }
    # lists keep only what the user may READ; a schema by id is any user's
    alice_subject = f"{unique('alice')}-value"
    alice.register_schema(alice_subject, avro())
    assert alice_subject in alice.get_subjects() and bob_subject not in alice.get_subjects()
    assert bob_subject in bob.get_subjects() and alice_subject not in bob.get_subjects()
    assert json.loads(alice.get_schema(bob_id).schema_str) == USER
    r = raw(secured, "GET", f"/schemas/ids/{bob_id}/versions", auth=("alice", PASSWORDS["alice"]))
    assert r.status_code == 200 and bob_subject not in r.text
    # READ and WRITE but no DELETE: alice cannot delete her own subject; bob (ALL) can his
    with pytest.raises(SchemaRegistryError) as err:
        alice.delete_subject(alice_subject)
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    assert bob.delete_subject(bob_subject) == [1]


def test_global_config_needs_alter_configs_on_the_cluster(secured: Secured) -> None:
    body = {"compatibility": "FULL"}
    r = raw(secured, "PUT", "/config", body, auth=("alice", PASSWORDS["alice"]))
    assert r.status_code == 403 and r.json()["error_code"] == 40301
    assert raw(secured, "GET", "/config", auth=("alice", PASSWORDS["alice"])).status_code == 200
    r = raw(secured, "PUT", "/config", {"compatibility": "BACKWARD"}, auth=("admin", "admin-secret"))
    assert r.status_code == 200, r.text


def test_a_bearer_token_is_accepted_too(secured: Secured) -> None:
    alice = client(secured, "alice")
    subject = f"{unique('alice')}-value"
    alice.register_schema(subject, avro())
    token = unsecured_jwt("carol", time.time() + 600)
    r = raw(secured, "GET", "/subjects", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and subject in r.json()
    r = raw(
        secured,
        "POST",
        f"/subjects/{subject}/versions",
        {"schema": json.dumps(USER)},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 403
