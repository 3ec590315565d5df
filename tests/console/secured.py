"""A broker process with an authorizer, SCRAM users, ACLs and its HTTP listeners on HTTPS,
shared by the console's and the registry's login tests.

The Kafka port is PLAINTEXT with ``User:ANONYMOUS`` a super user: the console's and the
registry's own clients connect unauthenticated (odradek.client speaks PLAINTEXT), and the tests
set users and ACLs up through it. A second listener, SASL_PLAINTEXT with OAUTHBEARER (unsecured
JWTs), gives the HTTP listeners their bearer-token validator.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from tests.certs import Certs

from odradek.testing.process import BrokerProcess

TIMEOUT = 15.0
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
REGISTRY_RE = re.compile(r"schema registry listening on (https?://\S+)")
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"


@dataclass
class Secured:
    process: BrokerProcess
    console: str
    registry: str
    certs: Certs
    _admin: AdminClient | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.process.bootstrap_servers

    def admin(self) -> AdminClient:
        """One admin client (User:ANONYMOUS, a super user) for the broker's lifetime."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin


def unsecured_jwt(sub: str, exp_s: float) -> str:
    """An unsecured JWT (``alg: none``) as Kafka's unsecured validator takes it."""

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'exp': exp_s, 'iat': int(time.time())})}."


def set_password(s: Secured, user: str, password: str, mechanism: ScramMechanism) -> None:
    info = ScramCredentialInfo(mechanism, 4096)
    upsert = UserScramCredentialUpsertion(user, info, password.encode())
    for f in s.admin().alter_user_scram_credentials([upsert]).values():
        f.result(TIMEOUT)


def allow(
    s: Secured,
    user: str,
    rtype: ResourceType,
    name: str,
    op: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> None:
    binding = AclBinding(rtype, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW)
    for f in s.admin().create_acls([binding], request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)


def create_topics(s: Secured, *names: str) -> None:
    for f in s.admin().create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(timeout=TIMEOUT)


def _registry_url(process: BrokerProcess, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        m = REGISTRY_RE.search(process.stderr_tail(1 << 20))
        if m:
            return m.group(1)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no registry line in the broker log: {process.stderr_tail()}")
        time.sleep(0.05)


def running_secured_broker(certs: Certs, **settings: Any) -> Iterator[Secured]:
    """A fixture's body (``yield from``): the broker, users alice (SCRAM-SHA-256) and bob
    (SCRAM-SHA-512), no ACL yet."""
    process = BrokerProcess(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS;User:admin",
            "http.listeners": "https://127.0.0.1:0",
            "schema.registry.listeners": "https://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.server_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs.ca_pem),
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 1,
            **settings,
        },
        log_level="info",
    )
    process.start()
    try:
        s = Secured(process, process.console_url(), _registry_url(process), certs)
        set_password(s, "alice", PASSWORDS["alice"], ScramMechanism.SCRAM_SHA_256)
        set_password(s, "bob", PASSWORDS["bob"], ScramMechanism.SCRAM_SHA_512)
        set_password(s, "admin", "admin-secret", ScramMechanism.SCRAM_SHA_512)
        yield s
    finally:
        process.close()
