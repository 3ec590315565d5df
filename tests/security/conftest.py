"""The broker set-up the security tests share: certificates (``tests.certs``) for a module, the
PLAIN JAAS users, a broker whose one listener is SASL_SSL, SCRAM users created over the
PLAINTEXT listener, a listener's address, a fresh topic and a client-id quota set with
AlterClientQuotas."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)
from tests.certs import Certs, make_certs, server_tls

from odradek.testing.embedded import EmbeddedBroker
from odradek.testing.process import BrokerProcess

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw" user_carol="carol-pw";'
)
"""The broker's PLAIN users (admin, carol) and its own login as admin."""
ADMIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw";'
)
"""One PLAIN user, admin (password admin-pw), and the login as admin: the broker's and the
command-line tools' ``sasl.jaas.config``."""
UNSECURED_OAUTHBEARER = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorRequiredScope="kafka";'
    ),
}
"""A broker's settings: PLAINTEXT, and SASL_PLAINTEXT with OAUTHBEARER accepting unsecured JWTs
that carry the scope ``kafka``."""


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def admin_sasl_ssl_broker(certs: Certs, mechanisms: str) -> Iterator[EmbeddedBroker]:
    """A fixture's body: a broker with one listener, SASL_SSL (the server certificate, no
    client certificates), ``sasl.enabled.mechanisms`` ``mechanisms`` and the PLAIN user admin
    (``ADMIN_JAAS``)."""
    settings = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        **server_tls(certs, truststore=False),
        "sasl.enabled.mechanisms": mechanisms,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
    }
    with EmbeddedBroker(settings) as b:
        yield b


def add_scram_users(b: EmbeddedBroker, *users: tuple[str, ScramMechanism, int, bytes]) -> None:
    """Creates SCRAM credentials, each ``(user, mechanism, iterations, password)``, with
    AlterUserScramCredentials (confluent-kafka) on ``b``'s bootstrap (PLAINTEXT) listener."""
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password)
        for user, mechanism, iterations, password in users
    ]
    for f in admin.alter_user_scram_credentials(upserts).values():
        f.result(10)


def listener_port(b: EmbeddedBroker, listener: str) -> int:
    """The port ``b`` bound for the listener named ``listener`` (e.g. ``SASL_SSL``)."""
    endpoints = b.broker.endpoints
    assert endpoints is not None
    endpoint = endpoints.by_name(listener)
    assert endpoint is not None
    return endpoint.bound_port


def listener_addr(b: EmbeddedBroker, listener: str) -> str:
    """``127.0.0.1:<port>`` of the listener named ``listener``."""
    return f"127.0.0.1:{listener_port(b, listener)}"


def new_topic(b: EmbeddedBroker, partitions: int = 1) -> str:
    """Creates a topic with a fresh name (``t-`` and 8 hex digits), ``partitions`` partitions
    and replication factor 1, over ``b``'s bootstrap listener; returns its name."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def set_quota(broker: BrokerProcess, client_id: str, key: str, value: float) -> None:
    """Sets the quota ``key`` (e.g. ``producer_byte_rate``, ``request_percentage``,
    ``controller_mutation_rate``) of the client id ``client_id`` to ``value`` with
    AlterClientQuotas v1 on ``broker``'s bootstrap listener; asserts it was accepted."""
    from tests.broker.wire import Wire, req

    entity = req(49, 1, "EntityData", entity_type="client-id", entity_name=client_id)
    op = req(49, 1, "OpData", key=key, value=value, remove=False)
    entry = req(49, 1, "EntryData", entity=(entity,), ops=(op,))
    with Wire(broker.bootstrap_servers) as w:
        resp = w.call(req(49, 1, entries=(entry,), validate_only=False))
    assert [int(e.error_code) for e in resp.entries] == [0]
