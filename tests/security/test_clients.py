"""Real clients against a broker with four listeners at once: PLAINTEXT, SSL (client
certificates required), SASL_SSL (SCRAM-SHA-256/512, PLAIN) and SASL_PLAINTEXT (PLAIN, SCRAM).

Users are created with AlterUserScramCredentials (confluent-kafka's AdminClient) over the
PLAINTEXT listener; confluent-kafka, kafka-python (SaslHandshake v1 and v0) then produce and
consume through the others. Metadata answers each client with the listener it came in on.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramMechanism,
)

from odradek.security.principal import KafkaPrincipal
from odradek.testing.embedded import EmbeddedBroker

from .conftest import (
    PLAIN_JAAS,
    UNSECURED_OAUTHBEARER,
    Certs,
    add_scram_users,
    listener_addr,
    listener_port,
    new_topic,
    server_tls,
)


@pytest.fixture(scope="module")
def broker(certs: Certs) -> Iterator[EmbeddedBroker]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
        "SASL_PLAINTEXT://127.0.0.1:0",
        **server_tls(certs),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=eng.*$/$1/L,DEFAULT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.server.max.receive.size": 4096,
        "auto.create.topics.enable": "false",
    }
    with EmbeddedBroker(settings) as b:
        add_scram_users(
            b,
            ("alice", ScramMechanism.SCRAM_SHA_512, 4096, b"alice-pw"),
            ("alice", ScramMechanism.SCRAM_SHA_256, 8192, b"alice-pw"),
        )
        yield b


def _principals_while_connected(b: EmbeddedBroker, conf: dict[str, Any], listener: str) -> set[str]:
    """The principals of the broker's connections on ``listener`` while an AdminClient with
    ``conf`` is connected (it keeps its connection open). Connections still authenticating
    (librdkafka opens a second one to the broker's advertised address after the bootstrap
    one) are left out: they are ``User:ANONYMOUS`` until their SASL exchange completes."""
    admin = AdminClient(conf)
    assert admin.list_topics(timeout=10).brokers
    deadline = time.monotonic() + 10
    while True:
        principals = b.call(
            lambda: {
                str(c.principal)
                for c in b.broker.listener.connections()
                if c.listener_name == listener and (c._auth is None or c._auth.authenticated)
            }
        )
        if principals or time.monotonic() > deadline:
            return principals
        time.sleep(0.02)


def _roundtrip(b: EmbeddedBroker, conf: dict[str, Any], n: int = 20) -> None:
    topic = new_topic(b)
    producer = Producer({**conf, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer(
        {
            **conf,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(n)]


def test_every_listener_advertises_itself(broker: EmbeddedBroker, certs: Certs) -> None:
    for listener, extra in (
        ("PLAINTEXT", {}),
        (
            "SASL_PLAINTEXT",
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN",
                "sasl.username": "carol",
                "sasl.password": "carol-pw",
            },
        ),
    ):
        admin = AdminClient({"bootstrap.servers": listener_addr(broker, listener), **extra})
        md = admin.list_topics(timeout=10)
        assert [(b.host, b.port) for b in md.brokers.values()] == [
            ("127.0.0.1", listener_port(broker, listener))
        ]


def test_confluent_sasl_ssl_scram_sha_512(broker: EmbeddedBroker, certs: Certs) -> None:
    _roundtrip(
        broker,
        {
            "bootstrap.servers": listener_addr(broker, "SASL_SSL"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-pw",
            "ssl.ca.location": str(certs.ca_pem),
        },
    )
    conf = {
        "bootstrap.servers": listener_addr(broker, "SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-pw",
        "ssl.ca.location": str(certs.ca_pem),
    }
    assert _principals_while_connected(broker, conf, "SASL_SSL") == {"User:alice"}


def test_confluent_sasl_plaintext_scram_sha_256_and_plain(broker: EmbeddedBroker) -> None:
    for mech, user, pw in (("SCRAM-SHA-256", "alice", "alice-pw"), ("PLAIN", "carol", "carol-pw")):
        admin = AdminClient(
            {
                "bootstrap.servers": listener_addr(broker, "SASL_PLAINTEXT"),
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": mech,
                "sasl.username": user,
                "sasl.password": pw,
            }
        )
        assert admin.list_topics(timeout=10).brokers


def test_confluent_ssl_client_certificate_principal(broker: EmbeddedBroker, certs: Certs) -> None:
    conf = {
        "bootstrap.servers": listener_addr(broker, "SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca_pem),
        "ssl.certificate.location": str(certs.client_chain),
        "ssl.key.location": str(certs.client_key),
    }
    _roundtrip(broker, conf)
    # RULE:^CN=([a-z]+),OU=eng.*$/$1/L maps CN=alice,OU=eng,O=Acme to alice
    assert _principals_while_connected(broker, conf, "SSL") == {str(KafkaPrincipal.user("alice"))}


def test_ssl_without_client_certificate_is_refused(broker: EmbeddedBroker, certs: Certs) -> None:
    admin = AdminClient(
        {
            "bootstrap.servers": listener_addr(broker, "SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca_pem),
        }
    )
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_wrong_password_fails_alike_for_unknown_users(broker: EmbeddedBroker, certs: Certs) -> None:
    counters = broker.broker.endpoints.counters
    before = sum(counters.failed.values())
    for user in ("alice", "nobody"):
        admin = AdminClient(
            {
                "bootstrap.servers": listener_addr(broker, "SASL_SSL"),
                "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "SCRAM-SHA-512",
                "sasl.username": user,
                "sasl.password": "wrong",
                "ssl.ca.location": str(certs.ca_pem),
                "reconnect.backoff.ms": 1000,
            }
        )
        with pytest.raises(KafkaException) as err:
            admin.list_topics(timeout=3)
        assert "Local: Broker transport failure" in str(err.value) or "Authentication" in str(
            err.value
        )
    assert sum(counters.failed.values()) > before


def _kafka_python_conf(broker: EmbeddedBroker, mech: str, api_version: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap_servers": listener_addr(broker, "SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mech,
        "sasl_plain_username": "alice" if mech.startswith("SCRAM") else "carol",
        "sasl_plain_password": "alice-pw" if mech.startswith("SCRAM") else "carol-pw",
    }
    if api_version is not None:
        conf["api_version"] = api_version
    return conf


@pytest.mark.parametrize("api_version", [None, (0, 10, 1)], ids=["handshake-v1", "handshake-v0"])
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python(broker: EmbeddedBroker, mech: str, api_version: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = new_topic(broker)
    producer = KafkaProducer(**_kafka_python_conf(broker, mech, api_version), acks=1)
    try:
        producer.send(topic, b"hello").get(timeout=15)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        topic,
        **_kafka_python_conf(broker, mech, api_version),
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    try:  # the first record, or StopIteration after 10 s without one
        values = [next(consumer).value]
    except StopIteration:
        values = []
    finally:
        consumer.close()
    assert values == [b"hello"]


# -- bad input: each gets a closed connection; the broker keeps serving -----------------------


def _raw(host_port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", host_port), timeout=10) as s:
        s.sendall(payload)
        chunks = []
        while True:
            try:
                data = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)


def _request(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"t"
    return struct.pack(">i", len(header) + len(body)) + header + body


def test_plaintext_and_garbage_to_tls_ports(broker: EmbeddedBroker) -> None:
    metadata_v0 = _request(3, 0, struct.pack(">i", 0))
    counters = broker.broker.endpoints.counters
    for listener in ("SSL", "SASL_SSL"):
        before = counters.failed[(listener, "SSL")]
        assert _raw(listener_port(broker, listener), metadata_v0) == b""
        assert _raw(listener_port(broker, listener), b"\x16\x03\x01\x00\x05garbage-after-a-hello") == b""
        deadline = time.monotonic() + 10
        while counters.failed[(listener, "SSL")] < before + 2:  # counted and logged, each
            assert time.monotonic() < deadline, counters.failed
            time.sleep(0.02)


def test_sasl_listener_refuses_requests_before_authentication(broker: EmbeddedBroker) -> None:
    # Metadata before SaslHandshake: closed without an answer
    assert _raw(listener_port(broker, "SASL_PLAINTEXT"), _request(3, 0, struct.pack(">i", 0))) == b""
    # SaslHandshake v1 with an unknown mechanism: UNSUPPORTED_SASL_MECHANISM, then closed
    answer = _raw(listener_port(broker, "SASL_PLAINTEXT"), _request(17, 1, struct.pack(">h", 6) + b"GSSAPI"))
    size, correlation, error = struct.unpack_from(">iih", answer)
    assert (size + 4, correlation, error) == (len(answer), 1, 33)
    assert b"SCRAM-SHA-512" in answer


def test_oversize_token_closes(broker: EmbeddedBroker) -> None:
    with socket.create_connection(("127.0.0.1", listener_port(broker, "SASL_PLAINTEXT")), timeout=10) as s:
        s.sendall(_request(17, 0, struct.pack(">h", 5) + b"PLAIN"))
        answer = s.recv(64)
        assert struct.unpack_from(">iih", answer)[2] == 0  # the handshake is answered
        # a raw token above sasl.server.max.receive.size (4096): closed, nothing answered
        try:
            s.sendall(struct.pack(">i", 100_000) + b"\x00" * 100_000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            assert s.recv(64) == b""
        except ConnectionResetError:
            pass


def test_broker_still_serves_after_bad_input(broker: EmbeddedBroker, certs: Certs) -> None:
    ctx = ssl.create_default_context(cafile=str(certs.ca_pem))
    raw = socket.create_connection(("127.0.0.1", listener_port(broker, "SASL_SSL")), timeout=10)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        s.sendall(_request(18, 0, b""))  # ApiVersions is answered before authentication
        header = s.recv(8)
        assert struct.unpack(">ii", header)[1] == 1
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert admin.list_topics(timeout=10).brokers


def test_confluent_oauthbearer_unsecured_jwt() -> None:
    with EmbeddedBroker(UNSECURED_OAUTHBEARER) as b:
        base = {
            "bootstrap.servers": listener_addr(b, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
        }
        good = {**base, "sasl.oauthbearer.config": "principal=dave scope=kafka"}
        assert _principals_while_connected(b, good, "SASL_PLAINTEXT") == {"User:dave"}
        no_scope = {
            **base,
            "sasl.oauthbearer.config": "principal=eve",
            "reconnect.backoff.ms": 1000,
        }
        with pytest.raises(KafkaException):
            AdminClient(no_scope).list_topics(timeout=3)
        assert b.broker.endpoints.counters.failed[("SASL_PLAINTEXT", "OAUTHBEARER")] >= 1


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_sasl_ssl_scram_sha_512(broker: EmbeddedBroker, certs: Certs) -> None:
    """Debian's kcat (librdkafka 2.0.2, older than the SCRAM fix of 2.6.1) produces and reads."""
    topic = new_topic(broker)
    security = [
        "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
        "-X", "sasl.username=alice", "-X", "sasl.password=alice-pw",
        "-X", f"ssl.ca.location={certs.ca_pem}",
    ]  # fmt: skip
    bootstrap = ["-b", listener_addr(broker, "SASL_SSL")]
    produced = subprocess.run(
        ["kcat", *bootstrap, *security, "-P", "-t", topic],
        input=b"one\ntwo\n",
        capture_output=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", *bootstrap, *security, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e"],
        capture_output=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [b"one", b"two"]


def test_confluent_reauthenticates_before_its_session_expires(certs: Certs) -> None:
    """connections.max.reauth.ms (KIP-368): librdkafka re-authenticates on the same connection
    before the lifetime SaslAuthenticate told it; producing goes on through several re-logins."""
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": 1500,
    }
    with EmbeddedBroker(settings) as b:
        topic = new_topic(b)
        conf = {
            "bootstrap.servers": listener_addr(b, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "carol",
            "sasl.password": "carol-pw",
        }
        producer = Producer(conf)
        counters = b.broker.endpoints.counters
        producer.produce(topic, value=b"first")
        assert producer.flush(10) == 0

        def sasl_connections() -> set[int]:
            return b.call(
                lambda: {
                    c.connection_id
                    for c in b.broker.listener.connections()
                    if c.listener_name == "SASL_PLAINTEXT"
                }
            )

        first = sasl_connections()
        deadline = time.monotonic() + 30
        sent = 0
        while counters.succeeded[("SASL_PLAINTEXT", "PLAIN")] < 5:  # logins + re-logins
            assert time.monotonic() < deadline, counters.succeeded
            producer.produce(topic, value=b"x")
            sent += 1
            assert producer.flush(10) == 0
            time.sleep(0.1)
        assert counters.failed[("SASL_PLAINTEXT", "PLAIN")] == 0
        assert first & sasl_connections(), "re-authenticated on the same connections"
        principals = b.call(
            lambda: {
                str(c.principal)
                for c in b.broker.listener.connections()
                if c.listener_name == "SASL_PLAINTEXT" and c._auth is not None and c._auth.principal
            }
        )
        assert principals == {"User:carol"}  # a re-authentication keeps the principal


def test_confluent_oauthbearer_signed_jwt_against_a_jwks(tmp_path: Path) -> None:
    import json as _json

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = _json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(_json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": "odradek",
        "sasl.oauthbearer.expected.issuer": "https://issuer.example",
    }

    def token(kid: str, aud: str, signer: Any = key) -> Any:
        def cb(_config: str) -> tuple[str, float]:
            exp = time.time() + 300
            claims = {"sub": "frank", "aud": aud, "iss": "https://issuer.example", "exp": exp}
            return jwt.encode(claims, signer, "RS256", headers={"kid": kid}), exp

        return cb

    with EmbeddedBroker(settings) as b:
        base = {
            "bootstrap.servers": listener_addr(b, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER",
        }
        good = {**base, "oauth_cb": token("k1", "odradek")}
        assert _principals_while_connected(b, good, "SASL_PLAINTEXT") == {"User:frank"}
        other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        for cb in (
            token("k1", "someone-else"),
            token("k1", "odradek", other_key),
            token("k2", "odradek"),
        ):
            bad = {**base, "oauth_cb": cb, "reconnect.backoff.ms": 1000}
            with pytest.raises(KafkaException):
                AdminClient(bad).list_topics(timeout=3)


def test_sasl_requests_off_sasl_listeners_are_illegal_sasl_state(broker: EmbeddedBroker) -> None:
    handshake = _raw_call(
        listener_port(broker, "PLAINTEXT"), _request(17, 1, struct.pack(">h", 5) + b"PLAIN")
    )
    assert struct.unpack_from(">ih", handshake)[1] == 34  # ILLEGAL_SASL_STATE
    token = b"\x00admin\x00admin-pw"
    authenticate = _raw_call(
        listener_port(broker, "PLAINTEXT"), _request(36, 1, struct.pack(">i", len(token)) + token)
    )
    assert struct.unpack_from(">ih", authenticate)[1] == 34


def _raw_call(host_port: int, request: bytes) -> bytes:
    """One request on a fresh PLAINTEXT connection; the answer without its size prefix."""
    with socket.create_connection(("127.0.0.1", host_port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed before the answer"
            data += chunk
        return data[4:]
