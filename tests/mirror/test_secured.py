"""Mirroring from a PLAINTEXT cluster into a secured one: the target listens on SASL_SSL with
SCRAM-SHA-512 users and ACLs (StandardAuthorizer, nothing allowed without an ACL), and the
mirror reaches it as ``User:mirror`` with MM2's per-cluster client settings
(``B.security.protocol``, ``B.sasl.*``, ``B.ssl.*``), copying with exactly-once on B.

The target's PLAINTEXT listener is the administrator's (``User:ANONYMOUS`` is a super user
there, as in docs/security.md's set-up): the test creates the users and ACLs through it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.client import Admin, NewTopic, Producer
from odradek.client.errors import SaslAuthenticationError
from odradek.testing.embedded import EmbeddedBroker
from odradek.testing.process import BrokerProcess

from .conftest import SETTINGS, MirrorProcess, end_offsets, read_topic, wait_until

COUNT = 2000
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    keystore = tmp / "broker-keystore.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca_path = tmp / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    yield ca_path, keystore


@pytest.fixture(scope="module")
def secured(ca_pem: tuple[Path, Path]) -> Iterator[EmbeddedBroker]:
    _ca, keystore = ca_pem
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "group.initial.rebalance.delay.ms": 0,
    }
    with EmbeddedBroker(settings) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        users = [UserScramCredentialUpsertion(u, info, f"{u}-pw".encode()) for u in ("mirror", "eve")]
        for f in admin.alter_user_scram_credentials(users).values():
            f.result(10)
        acls = [
            AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:mirror", "*", AclOperation.ALL,
                       AclPermissionType.ALLOW)
            for rtype, name in (
                (ResourceType.TOPIC, "*"),
                (ResourceType.GROUP, "*"),
                (ResourceType.TRANSACTIONAL_ID, "*"),
                (ResourceType.BROKER, "kafka-cluster"),
            )
        ]
        for f in admin.create_acls(acls).values():
            f.result(10)
        yield b


def sasl_ssl(b: EmbeddedBroker) -> str:
    endpoint = b.broker.endpoints.by_name("SASL_SSL")
    assert endpoint is not None
    return f"127.0.0.1:{endpoint.bound_port}"


def client_settings(ca: Path, user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
    }


def test_plaintext_to_sasl_ssl_scram_acl_exactly_once(
    secured: EmbeddedBroker, ca_pem: tuple[Path, Path], mirrors: Callable[..., MirrorProcess]
) -> None:
    ca, _keystore = ca_pem
    with BrokerProcess(SETTINGS) as a:
        with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic("secure.orders", 2, 1)])
        with Producer({"bootstrap.servers": a.bootstrap_servers, "linger.ms": 5}) as p:
            p.send_batch("secure.orders", [b"v-%d" % i for i in range(COUNT)],
                         keys=[b"k-%d" % (i % 97) for i in range(COUNT)],
                         headers=[[("seq", b"%d" % i)] for i in range(COUNT)]).result(30)
        lines = [
            "clusters = A, B",
            f"A.bootstrap.servers = {a.bootstrap_servers}",
            f"B.bootstrap.servers = {sasl_ssl(secured)}",
            *(f"B.{k} = {v}" for k, v in client_settings(ca, "mirror", "mirror-pw").items()),
            "A->B.enabled = true",
            "A->B.topics = secure\\..*",
            "B.exactly.once.source.support = enabled",
            "replication.factor = 1",
            "offset-syncs.topic.replication.factor = 1",
            "heartbeats.topic.replication.factor = 1",
            "checkpoints.topic.replication.factor = 1",
        ]
        m = mirrors("\n".join(lines) + "\n")
        m.start()
        target = secured.bootstrap_servers  # the administrator's PLAINTEXT view of B
        failed_before = sum(secured.broker.endpoints.counters.failed.values())
        wait_until(lambda: sum(end_offsets(target, "A.secure.orders", read_committed=True).values()) >= COUNT,
                   60, f"{COUNT} records on B", m.log)
        assert m.terminate() == 0, m.log()[-3000:]
        got = read_topic(target, "A.secure.orders", read_committed=True)
        seqs = sorted(int(dict(r.headers)["seq"]) for recs in got.values() for r in recs)
        assert seqs == list(range(COUNT))  # every record once
        for recs in got.values():  # each partition in source order
            order = [int(dict(r.headers)["seq"]) for r in recs]
            assert order == sorted(order)
        # the mirror authenticated as User:mirror over SASL_SSL, never refused
        assert sum(secured.broker.endpoints.counters.failed.values()) == failed_before
        assert sum(secured.broker.endpoints.counters.succeeded.values()) > 0


def test_acls_apply_to_other_users_and_wrong_passwords_fail(
    secured: EmbeddedBroker, ca_pem: tuple[Path, Path]
) -> None:
    ca, _keystore = ca_pem
    with Admin({"bootstrap.servers": secured.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("secure.private", 1, 1)], raise_on_exists=False)
    with Admin({"bootstrap.servers": sasl_ssl(secured), **client_settings(ca, "eve", "eve-pw")}) as admin:
        assert "secure.private" not in admin.list_topics()  # no ACL: not even described
    with Admin({"bootstrap.servers": sasl_ssl(secured), **client_settings(ca, "mirror", "mirror-pw")}) as admin:
        assert "secure.private" in admin.list_topics()
    with pytest.raises(SaslAuthenticationError):
        Admin({"bootstrap.servers": sasl_ssl(secured), **client_settings(ca, "mirror", "wrong")})


def test_wrong_password_is_logged_naming_the_cluster(
    secured: EmbeddedBroker, ca_pem: tuple[Path, Path], mirrors: Callable[..., MirrorProcess]
) -> None:
    ca, _keystore = ca_pem
    lines = [
        "clusters = A, B",
        f"A.bootstrap.servers = {secured.bootstrap_servers}",  # the same broker's PLAINTEXT listener
        f"B.bootstrap.servers = {sasl_ssl(secured)}",
        *(f"B.{k} = {v}" for k, v in client_settings(ca, "mirror", "not-the-password").items()),
        "A->B.enabled = true",
        "A->B.topics = nothing-here",
    ]
    m = mirrors("\n".join(lines) + "\n", "wrong-password")
    m.start()
    wait_until(lambda: "SASL_AUTHENTICATION_FAILED" in m.log(), 30, "the refusal in the log", m.log)
    line = next(x for x in m.log().splitlines() if "SASL_AUTHENTICATION_FAILED" in x)
    assert f"cluster B ({sasl_ssl(secured)})" in line and "Authentication failed" in line
    assert m.terminate() == 0
