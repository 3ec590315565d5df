"""odradek's own client (sync and asyncio) over SSL (client certificates required), SASL_SSL
(SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) and SASL_PLAINTEXT (OAUTHBEARER), configured with the
Java client's keys; refusals (a wrong password, an unknown user, no client certificate, an
untrusted broker) raise a clear exception at once instead of retrying until a timeout.

Users are created with AlterUserScramCredentials (confluent-kafka) over the PLAINTEXT listener.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.client import Admin, Consumer, Producer
from odradek.client.aio import AsyncConsumer, AsyncProducer
from odradek.client.errors import ConfigError, SaslAuthenticationError, SslAuthenticationError
from odradek.testing.embedded import EmbeddedBroker

from .conftest import (
    PLAIN_JAAS,
    UNSECURED_OAUTHBEARER,
    Certs,
    add_scram_users,
    listener_addr,
    new_topic,
    server_tls,
)

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
FAST_FAIL_S = 10.0  # a refusal is raised well before any client timeout (30 s and more)


@pytest.fixture(scope="module")
def broker(certs: Certs) -> Iterator[EmbeddedBroker]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        **server_tls(certs),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=eng.*$/$1/L,DEFAULT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": 0,
    }
    with EmbeddedBroker(settings) as b:
        add_scram_users(
            b,
            ("alice", ScramMechanism.SCRAM_SHA_512, 4096, b"alice-pw"),
            ("alice", ScramMechanism.SCRAM_SHA_256, 4096, b"alice-pw"),
        )
        yield b


def topic(b: EmbeddedBroker) -> str:
    return new_topic(b, partitions=2)


def ssl_conf(b: EmbeddedBroker, certs: Certs, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": listener_addr(b, "SSL"),
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_pem),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.client_keystore),
        **extra,
    }


def scram_conf(b: EmbeddedBroker, certs: Certs, mechanism: str = "SCRAM-SHA-512", user: str = "alice",
               password: str = "alice-pw", module: str = SCRAM) -> dict[str, Any]:
    return {
        "bootstrap.servers": listener_addr(b, "SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.truststore.location": str(certs.ca_pem),
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="{user}" password="{password}";',
    }


def principals(b: EmbeddedBroker, listener: str) -> set[str]:
    return b.call(
        lambda: {
            str(c.principal)
            for c in b.broker.listener.connections()
            if c.listener_name == listener and (c._auth is None or c._auth.authenticated)
        }
    )


def roundtrip(b: EmbeddedBroker, conf: dict[str, Any], listener: str, expected_principal: str, n: int = 20) -> None:
    """Produce ``n`` records and consume them in a group, over ``conf``; while the consumer is
    connected, every connection on ``listener`` is ``expected_principal``."""
    name = topic(b)
    with Producer({**conf, "linger.ms": 2}) as producer:
        futures = [producer.send(name, f"v{i}".encode(), key=f"k{i}".encode()) for i in range(n)]
        for f in futures:
            f.result(15)
    got: list[bytes] = []
    with Consumer({**conf, "group.id": f"g-{name}", "auto.offset.reset": "earliest"}, name) as consumer:
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(0.5))
        assert principals(b, listener) == {expected_principal}
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(n))


def test_ssl_with_a_client_certificate(broker: EmbeddedBroker, certs: Certs) -> None:
    # RULE:^CN=([a-z]+),OU=eng.*$/$1/L maps the certificate's CN=alice,OU=eng,O=Acme to alice
    roundtrip(broker, ssl_conf(broker, certs), "SSL", "User:alice")


def test_ssl_inline_pem_key_store(broker: EmbeddedBroker, certs: Certs) -> None:
    """KIP-651: the key and chain as text; the trust store inline too."""
    conf = {
        "bootstrap.servers": listener_addr(broker, "SSL"),
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": certs.ca_pem.read_text(),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": certs.client_key.read_text(),
        "ssl.keystore.certificate.chain": certs.client_chain.read_text(),
    }
    with Admin(conf) as admin:
        assert admin.describe_cluster()["brokers"]


def _pkcs12(certs: Certs, tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    key = serialization.load_pem_private_key(certs.client_key.read_bytes(), None)
    chain = x509.load_pem_x509_certificates(certs.client_chain.read_bytes())
    ca = x509.load_pem_x509_certificate(certs.ca_pem.read_bytes())
    enc = serialization.BestAvailableEncryption(b"store-pw")
    keystore = tmp / "client.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(b"client", key, chain[0], chain[1:], enc))  # type: ignore[arg-type]
    truststore = tmp / "trust.p12"
    truststore.write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca], enc))
    return keystore, truststore


def test_ssl_pkcs12_stores(broker: EmbeddedBroker, certs: Certs, tmp_path: Path) -> None:
    keystore, truststore = _pkcs12(certs, tmp_path)
    conf = {
        "bootstrap.servers": listener_addr(broker, "SSL"),
        "security.protocol": "SSL",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(truststore),
        "ssl.truststore.password": "store-pw",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": "store-pw",
    }
    with Admin(conf) as admin:
        assert admin.describe_cluster()["brokers"]
    with pytest.raises(ConfigError, match="ssl"):
        Admin({**conf, "ssl.keystore.password": "wrong"})


def test_ssl_without_a_client_certificate_is_refused(broker: EmbeddedBroker, certs: Certs) -> None:
    conf = ssl_conf(broker, certs)
    del conf["ssl.keystore.location"]
    start = time.monotonic()
    with pytest.raises(SslAuthenticationError):
        Admin(conf)
    assert time.monotonic() - start < FAST_FAIL_S


def test_untrusted_broker_is_refused(broker: EmbeddedBroker, certs: Certs, tmp_path: Path) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    start = time.monotonic()
    with pytest.raises(SslAuthenticationError, match="certificate verify failed"):
        Admin(ssl_conf(broker, certs, **{"ssl.truststore.location": str(other)}))
    assert time.monotonic() - start < FAST_FAIL_S


def test_host_name_is_checked_unless_turned_off(broker: EmbeddedBroker, certs: Certs, tmp_path: Path) -> None:
    """The broker's certificate names 127.0.0.1 and localhost; one naming only another host
    is refused with ``https`` (the default) and accepted with the check off (empty)."""
    ca = trustme.CA()
    elsewhere = ca.issue_cert("broker.example")
    keystore = tmp_path / "elsewhere.pem"
    elsewhere.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca_pem = tmp_path / "ca2.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    with EmbeddedBroker(settings) as b:
        conf = {
            "bootstrap.servers": b.bootstrap_servers,
            "security.protocol": "SSL",
            "ssl.truststore.location": str(ca_pem),
        }
        with pytest.raises(SslAuthenticationError, match=r"match|mismatch|hostname|IP address"):
            Admin(conf)
        with Admin({**conf, "ssl.endpoint.identification.algorithm": ""}) as admin:
            assert admin.describe_cluster()["brokers"]


def test_sasl_ssl_scram_sha_512(broker: EmbeddedBroker, certs: Certs) -> None:
    roundtrip(broker, scram_conf(broker, certs), "SASL_SSL", "User:alice")


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "module"),
    [("SCRAM-SHA-256", "alice", "alice-pw", SCRAM), ("PLAIN", "carol", "carol-pw", PLAIN)],
)
def test_sasl_ssl_scram_sha_256_and_plain(
    broker: EmbeddedBroker, certs: Certs, mechanism: str, user: str, password: str, module: str
) -> None:
    with Admin(scram_conf(broker, certs, mechanism, user, password, module)) as admin:
        assert admin.describe_cluster()["brokers"]
        assert principals(broker, "SASL_SSL") == {f"User:{user}"}


@pytest.mark.parametrize("user", ["alice", "nobody"])
def test_wrong_password_is_a_clear_error(broker: EmbeddedBroker, certs: Certs, user: str) -> None:
    failed = broker.broker.endpoints.counters.failed
    before = failed[("SASL_SSL", "SCRAM-SHA-512")]
    conf = scram_conf(broker, certs, password="wrong")
    for make in (
        lambda: Admin(conf),
        lambda: Producer(conf),
        lambda: Consumer({**conf, "group.id": "g"}, "t"),
    ):
        start = time.monotonic()
        with pytest.raises(SaslAuthenticationError) as err:
            make()
        assert time.monotonic() - start < FAST_FAIL_S
        assert "Authentication failed" in str(err.value)
        assert err.value.code == 58 and not err.value.retriable
    assert failed[("SASL_SSL", "SCRAM-SHA-512")] >= before + 3


def test_mechanism_the_listener_does_not_enable(broker: EmbeddedBroker, certs: Certs) -> None:
    conf = {**scram_conf(broker, certs), "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token": "a.b.c"}
    with pytest.raises(SaslAuthenticationError, match="does not enable SASL mechanism OAUTHBEARER"):
        Admin(conf)


def test_aio_clients_over_sasl_ssl(broker: EmbeddedBroker, certs: Certs) -> None:
    name = topic(broker)
    conf = scram_conf(broker, certs)

    async def run() -> list[bytes]:
        async with AsyncProducer(conf) as producer:
            for i in range(5):
                await producer.send_and_wait(name, f"a{i}".encode(), partition=0)
        consumer = AsyncConsumer({**conf, "auto.offset.reset": "earliest"})
        await consumer.start()
        try:
            consumer.assign([(name, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 15
            while len(got) < 5 and time.monotonic() < deadline:
                got.extend(r.value for r in await consumer.poll(0.5))
            return got
        finally:
            await consumer.close()

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(5)]


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs sasl.jaas.config"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
          "sasl.jaas.config": 'x required username="a"'}, "sasl.jaas.config"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
          "sasl.jaas.config": f'{PLAIN} required username="a" password="b";'}, "needs org.apache.kafka.common.security.scram.ScramLoginModule"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": f'{PLAIN} required username="a" password="b";'},
         "sasl.mechanism GSSAPI is not supported"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"}, "ssl"),
        ({"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": "x.jks"}, "JKS"),
        ({"security.protocol": "TLS"}, "security.protocol"),
    ],
)
def test_bad_security_config_names_the_key(conf: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Admin({"bootstrap.servers": "127.0.0.1:1", **conf})


def test_oauthbearer_unsecured_and_given_token() -> None:
    from odradek.client._security import unsecured_jwt

    with EmbeddedBroker(UNSECURED_OAUTHBEARER) as b:
        base = {
            "bootstrap.servers": listener_addr(b, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
        }
        login = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        good = {**base, "sasl.jaas.config": login + 'unsecuredLoginStringClaim_sub="dave" unsecuredLoginListClaim_scope=",kafka";'}
        with Admin(good) as admin:
            assert admin.describe_cluster()["brokers"]
            assert principals(b, "SASL_PLAINTEXT") == {"User:dave"}
        calls: list[int] = []

        def token() -> str:
            calls.append(1)
            return unsecured_jwt({"unsecuredLoginStringClaim_sub": "erin", "unsecuredLoginStringClaim_scope": "kafka"}, time.time())

        with Admin({**base, "sasl.oauthbearer.token": token}) as admin:
            assert admin.describe_cluster()["brokers"]
            assert principals(b, "SASL_PLAINTEXT") == {"User:erin"}
        assert calls
        no_scope = {**base, "sasl.jaas.config": login + 'unsecuredLoginStringClaim_sub="eve";'}
        with pytest.raises(SaslAuthenticationError, match="scope"):
            Admin(no_scope)


def test_credentials_removed_while_running_fail_sends_and_polls(broker: EmbeddedBroker, certs: Certs) -> None:
    """A user deleted while its clients run: their next connection is refused; queued sends
    fail and poll raises with SaslAuthenticationError, instead of retrying until a timeout."""
    from confluent_kafka.admin import UserScramCredentialDeletion

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion("frank", info, b"frank-pw")]).values():
        f.result(10)
    name = topic(broker)
    conf = scram_conf(broker, certs, user="frank", password="frank-pw")
    with Producer({**conf, "linger.ms": 0}) as producer, Consumer({**conf, "auto.offset.reset": "earliest"}) as consumer:
        producer.send(name, b"before", partition=0).result(10)
        consumer.assign([(name, 0)])
        deadline = time.monotonic() + 10
        while not consumer.poll(0.2):
            assert time.monotonic() < deadline
        for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_512)]).values():
            f.result(10)
        broker.call(lambda: [c.abort("dropped by the test") for c in broker.broker.listener.connections()
                             if c.listener_name == "SASL_SSL"])
        start = time.monotonic()
        with pytest.raises(SaslAuthenticationError):
            producer.send(name, b"after", partition=0).result(30)
        with pytest.raises(SaslAuthenticationError):
            while time.monotonic() - start < 30:
                consumer.poll(0.2)
        assert time.monotonic() - start < FAST_FAIL_S


def _reauth_broker(reauth_ms: int) -> EmbeddedBroker:
    return EmbeddedBroker({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": reauth_ms,
        "auto.create.topics.enable": "false",
    })


def _sasl_connections(b: EmbeddedBroker) -> set[int]:
    return b.call(lambda: {c.connection_id for c in b.broker.listener.connections() if c.listener_name == "SASL_PLAINTEXT"})


def _plain(b: EmbeddedBroker) -> dict[str, Any]:
    return {
        "bootstrap.servers": listener_addr(b, "SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required username="carol" password="carol-pw";',
    }


def _records(b: EmbeddedBroker, name: str) -> int:
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        ends = admin.list_offsets({(name, p): -1 for p in range(2)})
    return sum(offset for offset, _ts in ends.values())


def test_reauthenticates_on_the_same_connection() -> None:
    """KIP-368: with connections.max.reauth.ms the broker tells each login's lifetime; the
    client authenticates again on the same connections before it runs out, while producing."""
    with _reauth_broker(1000) as b:
        name = topic(b)
        succeeded = b.broker.endpoints.counters.succeeded
        with Producer({**_plain(b), "linger.ms": 0}) as producer:
            producer.send(name, b"first").result(10)
            first = _sasl_connections(b)
            logins = succeeded[("SASL_PLAINTEXT", "PLAIN")]
            deadline = time.monotonic() + 20
            sent = 1
            while succeeded[("SASL_PLAINTEXT", "PLAIN")] < logins + 2 * len(first):  # two rounds each
                assert time.monotonic() < deadline and sent < 200_000, succeeded
                producer.send(name, b"x").result(15)
                sent += 1
            assert _sasl_connections(b) == first  # none closed, none opened
        assert b.broker.endpoints.counters.failed[("SASL_PLAINTEXT", "PLAIN")] == 0
        assert _records(b, name) == sent


def test_reconnects_authenticate_again() -> None:
    """Connections the broker drops are opened again, each authenticating anew."""
    with _reauth_broker(0) as b:
        name = topic(b)
        succeeded = b.broker.endpoints.counters.succeeded
        with Producer({**_plain(b), "linger.ms": 0}) as producer:
            producer.send(name, b"first").result(10)
            first = _sasl_connections(b)
            logins = succeeded[("SASL_PLAINTEXT", "PLAIN")]
            b.call(lambda: [c.abort("dropped by the test") for c in b.broker.listener.connections()
                            if c.listener_name == "SASL_PLAINTEXT"])
            producer.send(name, b"second").result(15)
            assert succeeded[("SASL_PLAINTEXT", "PLAIN")] > logins
            assert not _sasl_connections(b) & first
        assert _records(b, name) == 2


# -- the client-based commands with --command-config --------------------------------------------


def _cli(*args: str, input: str | None = None) -> Any:
    from typer.testing import CliRunner

    from odradek.cli.main import _register, app

    _register()
    return CliRunner().invoke(app, list(args), input=input)


def test_cli_commands_with_command_config(broker: EmbeddedBroker, certs: Certs, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        "# a Java client's properties file\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f"ssl.truststore.location={certs.ca_pem}\n"
        "ssl.truststore.type=PEM\n"
        "linger.ms=1\n"  # a producer key: the other commands leave it out
        "isolation.level=read_committed\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n'
        '    username="alice" password="alice-pw";\n'
    )
    b = ["--bootstrap-server", listener_addr(broker, "SASL_SSL"), "--command-config", str(props)]
    name = f"cli-{uuid.uuid4().hex[:6]}"
    r = _cli("topics", "create", name, "--partitions", "1", *b)
    assert r.exit_code == 0, r.output
    assert name in _cli("topics", "list", *b).output.split()
    assert "PartitionCount: 1" in _cli("topics", "describe", name, *b).output
    r = _cli("produce", name, *b, input="one\ntwo\nthree\n")
    assert r.exit_code == 0, r.output
    r = _cli("consume", name, "--from-beginning", "--max-messages", "3", "--timeout-ms", "10000",
             "--group", f"g-{name}", *b)
    assert r.exit_code == 0, r.output
    assert r.output.split()[:3] == ["one", "two", "three"]
    r = _cli("groups", "list", *b)
    assert r.exit_code == 0 and f"g-{name}" in r.output, r.output
    r = _cli("groups", "describe", f"g-{name}", *b)
    assert r.exit_code == 0 and name in r.output, r.output
    r = _cli("perf", "produce", "--topic", name, "--num-records", "200", "--quiet", *b)
    assert r.exit_code == 0, r.output
    r = _cli("perf", "consume", "--topic", name, "--messages", "203", "--quiet", "--timeout", "10000", *b)
    assert r.exit_code == 0, r.output
    # without the file the same commands cannot reach the SASL_SSL listener
    r = _cli("topics", "list", "--bootstrap-server", listener_addr(broker, "SASL_SSL"))
    assert r.exit_code != 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "No such file"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "needs sasl.jaas.config"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=nonsense\n", ":3: sasl.jaas.config"),
        ("security.protocol=TLS\n", ":1: security.protocol"),
        ("linger.mss=5\n", ":1: linger.mss"),
        ("ssl.truststore.location=/nonexistent.pem\nsecurity.protocol=SSL\n", "ssl"),
    ],
)
def test_cli_bad_command_config_exits_2(tmp_path: Path, text: str | None, message: str) -> None:
    props = tmp_path / "bad.properties"
    if text is not None:
        props.write_text(text)
    commands = [["topics", "list"]]
    if text is None:  # every command reads the file the same way
        commands += [["produce", "t"], ["consume", "t"], ["groups", "list"], ["perf", "produce", "--topic", "t"]]
    for command in commands:
        r = _cli(*command, "--bootstrap-server", "127.0.0.1:1", "--command-config", str(props), input="")
        assert r.exit_code == 2, (command, r.output)
        assert message in r.output, (command, r.output)
