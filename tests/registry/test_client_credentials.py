"""odradek.client's registry client with Confluent's credential and TLS settings, against a
broker whose registry wants HTTP Basic auth (its SCRAM users) over HTTPS: registration and
decoding by id with ``basic.auth.user.info`` (or the URL's ``user:password@``, or a bearer
token), and a clean 401 naming the cause without or with wrong credentials; ``odradek console``
takes the same settings as ``-X schema.registry.<key>=...``."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType
from tests.certs import Certs, make_certs
from tests.console.secured import PASSWORDS, Secured, allow, running_secured_broker, unsecured_jwt

from odradek.client.avro import (
    AvroDeserializer,
    AvroSerializer,
    SchemaRegistryClient,
    SchemaRegistryError,
)

pytestmark = pytest.mark.timeout(90)

CLICK = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "page", "type": "string"}, {"name": "n", "type": "int"}],
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secured(certs: Certs) -> Iterator[Secured]:
    for s in running_secured_broker(certs):
        allow(s, "alice", ResourceType.TOPIC, "alice-", AclOperation.ALL, ResourcePatternType.PREFIXED)
        yield s


def alice(s: Secured, **extra: str) -> dict[str, str]:
    return {
        "basic.auth.user.info": f"alice:{PASSWORDS['alice']}",
        "ssl.ca.location": str(s.certs.ca_pem),
        **extra,
    }


def framed(s: Secured) -> tuple[int, bytes]:
    """A Click value registered as alice under a fresh subject: (schema id, framed bytes)."""
    ser = AvroSerializer(
        SchemaRegistryClient(s.registry, config=alice(s)),
        CLICK,
        topic=f"alice-{uuid.uuid4().hex[:8]}",
    )
    data = ser({"page": "/home", "n": 3})
    return ser.schema_id, data


def test_basic_auth_user_info_registers_and_decodes_by_id(secured: Secured) -> None:
    schema_id, data = framed(secured)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == schema_id
    # a fresh client (no cached schema) fetches the writer schema by id with the credentials
    fresh = SchemaRegistryClient(secured.registry, config=alice(secured))
    assert fresh.sends_credentials
    assert AvroDeserializer(fresh)(data) == {"page": "/home", "n": 3}
    explicit = alice(secured, **{"basic.auth.credentials.source": "USER_INFO"})
    assert AvroDeserializer(SchemaRegistryClient(secured.registry, config=explicit))(data) == {
        "page": "/home",
        "n": 3,
    }


def test_credentials_in_the_url_and_a_bearer_token(secured: Secured) -> None:
    schema_id, data = framed(secured)
    parts = urllib.parse.urlsplit(secured.registry)
    with_user = f"{parts.scheme}://alice:{PASSWORDS['alice']}@{parts.netloc}"
    ca = {"ssl.ca.location": str(secured.certs.ca_pem)}
    by_url = SchemaRegistryClient(with_user, config={"basic.auth.credentials.source": "URL", **ca})
    assert PASSWORDS["alice"] not in by_url.url  # never shown in errors
    assert AvroDeserializer(by_url)(data)["page"] == "/home"
    token = unsecured_jwt("alice", 4_000_000_000)
    bearer = SchemaRegistryClient(secured.registry, config={"bearer.auth.token": token, **ca})
    assert bearer.get_schema(schema_id)


def test_no_or_wrong_credentials_fail_with_401_at_once(secured: Secured) -> None:
    _, data = framed(secured)
    ca = {"ssl.ca.location": str(secured.certs.ca_pem)}
    anonymous = SchemaRegistryClient(secured.registry, config=ca, retries=3)
    with pytest.raises(SchemaRegistryError) as info:
        AvroDeserializer(anonymous)(data)
    assert info.value.status == 401
    assert "401 Unauthorized" in str(info.value) and "no credentials were sent" in str(info.value)
    assert secured.registry in str(info.value)
    wrong = SchemaRegistryClient(
        secured.registry, config={**ca, "basic.auth.user.info": "alice:not-her-password"}
    )
    with pytest.raises(SchemaRegistryError) as info:
        AvroDeserializer(wrong)(data)
    assert info.value.status == 401 and "credentials sent were refused" in str(info.value)
    assert "not-her-password" not in str(info.value)


def test_https_needs_the_ca() -> None:
    with pytest.raises(ValueError, match="https"):
        SchemaRegistryClient("http://127.0.0.1:1", config={"ssl.ca.location": "/nowhere.pem"})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"basic.auth.credentials.source": "SASL_INHERIT"}, "must be one of URL, USER_INFO"),
        ({"basic.auth.credentials.source": "USER_INFO"}, "needs basic.auth.user.info"),
        ({"basic.auth.user.info": "no-colon"}, "user:password"),
        ({"basic.auth.user.info": "a:b", "bearer.auth.token": "t"}, "not both"),
        ({"basic.auth.password": "x"}, "unknown schema registry client setting"),
    ],
)
def test_bad_settings_are_refused(config: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SchemaRegistryClient("http://127.0.0.1:1", config=config)


def _console(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "console", "--listen", "http://127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(30)
    if not (line and line[0]):
        proc.kill()
        raise AssertionError(f"no ready line: {proc.communicate(timeout=10)}")
    m = re.match(r"odradek console on (http://\S+) for ", line[0].decode())
    assert m, line[0]
    return proc, m.group(1)


def test_console_reads_the_registry_with_the_settings(secured: Secured) -> None:
    ser = AvroSerializer(
        SchemaRegistryClient(secured.registry, config=alice(secured)), CLICK, topic="alice-console"
    )
    ser({"page": "/a", "n": 1})
    settings: list[Any] = []
    for k, v in alice(secured).items():
        settings += ["-X", f"schema.registry.{k}={v}"]
    proc, url = _console(
        "-b", secured.bootstrap_servers, "--schema-registry", secured.registry, *settings
    )
    try:
        with urllib.request.urlopen(url + "/schemas", timeout=20) as r:
            page = r.read().decode()
        assert "alice-console-value" in page
    finally:
        proc.terminate()
        proc.wait(20)


def test_console_refuses_settings_without_a_registry() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "console", "-X", "schema.registry.basic.auth.user.info=a:b"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "needs a schema registry" in out.stdout + out.stderr
