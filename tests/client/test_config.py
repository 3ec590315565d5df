from __future__ import annotations

import pytest

from odradek.client._config import CONSUMER, PRODUCER, parse_bootstrap, parse_config
from odradek.client.errors import ConfigError


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"'linger\.mss'"):
        parse_config({"bootstrap.servers": "x:1", "linger.mss": 5}, PRODUCER, "producer")


def test_bad_value_is_named() -> None:
    with pytest.raises(ConfigError, match="'acks'"):
        parse_config({"bootstrap.servers": "x:1", "acks": "2"}, PRODUCER, "producer")
    with pytest.raises(ConfigError, match=r"auto\.offset\.reset"):
        parse_config({"bootstrap.servers": "x:1", "auto.offset.reset": "middle"}, CONSUMER, "consumer")


def test_conversions_and_defaults() -> None:
    c = parse_config({"bootstrap.servers": "a:1,b:2", "acks": "all", "linger.ms": "7", "enable.idempotence": "true"}, PRODUCER, "producer")
    assert c["acks"] == -1 and c["linger.ms"] == 7 and c["enable.idempotence"] is True
    assert c["bootstrap.servers"] == ["a:1", "b:2"]
    assert c["max.in.flight.requests.per.connection"] == 5
    c = parse_config({"bootstrap.servers": "a:1", "acks": 1}, PRODUCER, "producer")
    assert c["enable.idempotence"] is False  # Java: idempotence silently off unless acks=all
    with pytest.raises(ConfigError):
        parse_config({"bootstrap.servers": "a:1", "acks": 1, "enable.idempotence": True}, PRODUCER, "producer")
    with pytest.raises(ConfigError):
        parse_config({"bootstrap.servers": "a:1", "max.in.flight.requests.per.connection": 6}, PRODUCER, "producer")


def test_assignor_names() -> None:
    c = parse_config({"bootstrap.servers": "a:1", "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor,range"}, CONSUMER, "consumer")
    assert c["partition.assignment.strategy"] == ["roundrobin", "range"]
    with pytest.raises(ConfigError):
        parse_config({"bootstrap.servers": "a:1", "partition.assignment.strategy": "sticky-ish"}, CONSUMER, "consumer")


def test_bootstrap_required_and_parsed() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        parse_config({}, PRODUCER, "producer")
    assert parse_bootstrap(["PLAINTEXT://h:9093", "[::1]:9094", "host"]) == [("h", 9093), ("::1", 9094), ("host", 9092)]


def test_facades_reject_unknown_keys() -> None:
    from odradek.client import Admin, Consumer, Producer

    for cls in (Producer, Consumer, Admin):
        with pytest.raises(ConfigError, match="'nope'"):
            cls({"bootstrap.servers": "127.0.0.1:1", "nope": 1})


def test_security_keys_are_the_java_clients() -> None:
    import base64
    import json

    from odradek.client._config import ADMIN
    from odradek.client._security import ClientSecurity, unsecured_jwt

    plain = parse_config({"bootstrap.servers": "a:1"}, ADMIN, "admin")
    assert plain["security.protocol"] == "PLAINTEXT"
    assert ClientSecurity.from_config(plain) is None  # PLAINTEXT: nothing added to connections
    scram = parse_config({
        "bootstrap.servers": "a:1", "security.protocol": "sasl_plaintext", "sasl.mechanism": "scram-sha-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p\\"w";',
    }, ADMIN, "admin")
    sec = ClientSecurity.from_config(scram)
    assert sec is not None and sec.ssl_context is None
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == ("SASL_PLAINTEXT", "SCRAM-SHA-256", "u", 'p"w')
    token = unsecured_jwt({"unsecuredLoginStringClaim_sub": "dave", "unsecuredLoginListClaim_scope": ",a,b",
                           "unsecuredLoginNumberClaim_n": "3", "unsecuredLoginLifetimeSeconds": "60"}, 1000.5)
    header, payload, signature = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    assert json.loads(base64.urlsafe_b64decode(pad(header))) == {"alg": "none"}
    assert json.loads(base64.urlsafe_b64decode(pad(payload))) == {"iat": 1000, "exp": 1060, "sub": "dave", "scope": ["a", "b"], "n": 3}
    assert signature == ""
    with pytest.raises(ValueError, match="sub"):
        unsecured_jwt({}, 0)
