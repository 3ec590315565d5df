"""Client configuration: Java client keys, defaults, validation.

A config is a plain dict with Kafka's Java client keys (``"bootstrap.servers"``, ``"linger.ms"``
...). Values may be given as str or as the native type; ``parse_config`` returns a new dict with
every known key present and converted. An unknown key raises ``ConfigError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .errors import ConfigError

__all__ = ["ADMIN", "CONSUMER", "PRODUCER", "parse_config"]


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError("not an integer")
    return int(v)


def _str(v: Any) -> str:
    return str(v)


def _list(v: Any) -> list[str]:
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return [str(p) for p in v]


def _choice(*choices: str) -> Callable[[Any], str]:
    def conv(v: Any) -> str:
        s = str(v).strip().lower()
        if s not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return s

    return conv


def _upper_choice(*choices: str) -> Callable[[Any], str]:
    def conv(v: Any) -> str:
        s = str(v).strip().upper()
        if s not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return s

    return conv


def _secret(v: Any) -> Any:
    """A password or token: kept as given (a str, or for ``sasl.oauthbearer.token`` a callable)."""
    return v


def _acks(v: Any) -> int:
    s = str(v).strip().lower()
    if s == "all":
        return -1
    n = int(s)
    if n not in (-1, 0, 1):
        raise ValueError("must be 0, 1, -1 or all")
    return n


Spec = dict[str, tuple[Callable[[Any], Any], Any]]

COMMON: Spec = {
    "bootstrap.servers": (_list, None),
    "client.id": (_str, "odradek"),
    "request.timeout.ms": (_int, 30000),
    "retry.backoff.ms": (_int, 100),
    "retry.backoff.max.ms": (_int, 1000),
    "reconnect.backoff.ms": (_int, 50),
    "reconnect.backoff.max.ms": (_int, 1000),
    "metadata.max.age.ms": (_int, 300000),
    "socket.connection.setup.timeout.ms": (_int, 10000),
    "connections.max.idle.ms": (_int, 540000),
    # security (client/_security.py): Kafka's Java client keys
    "security.protocol": (_upper_choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "PLAINTEXT"),
    "ssl.truststore.location": (_str, None),
    "ssl.truststore.type": (_upper_choice("PEM", "PKCS12", "JKS"), None),
    "ssl.truststore.password": (_secret, None),
    "ssl.truststore.certificates": (_str, None),
    "ssl.keystore.location": (_str, None),
    "ssl.keystore.type": (_upper_choice("PEM", "PKCS12", "JKS"), None),
    "ssl.keystore.password": (_secret, None),
    "ssl.keystore.key": (_secret, None),
    "ssl.keystore.certificate.chain": (_str, None),
    "ssl.key.password": (_secret, None),
    "ssl.endpoint.identification.algorithm": (lambda v: str(v).strip().lower(), "https"),
    "ssl.enabled.protocols": (_str, "TLSv1.2,TLSv1.3"),
    "ssl.cipher.suites": (_str, ""),
    "sasl.mechanism": (_upper_choice("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"), "GSSAPI"),
    "sasl.jaas.config": (_secret, None),
    "sasl.oauthbearer.token": (_secret, None),
    "receive.buffer.bytes": (_int, 65536),
    "send.buffer.bytes": (_int, 131072),
}

PRODUCER: Spec = {
    **COMMON,
    "acks": (_acks, -1),
    "linger.ms": (_int, 5),
    "batch.size": (_int, 16384),
    "compression.type": (_choice("none", "gzip", "snappy", "lz4", "zstd"), "none"),
    "enable.idempotence": (_bool, True),
    "max.in.flight.requests.per.connection": (_int, 5),
    "retries": (_int, 2147483647),
    "delivery.timeout.ms": (_int, 120000),
    "buffer.memory": (_int, 33554432),
    "max.block.ms": (_int, 60000),
    "max.request.size": (_int, 1048576),
    "partitioner.class": (_choice("default", "murmur2", "sticky", "round_robin"), "default"),
    "partitioner.ignore.keys": (_bool, False),
    "transactional.id": (_str, None),
    "transaction.timeout.ms": (_int, 60000),
    "key.serializer": (lambda v: v, None),
    "value.serializer": (lambda v: v, None),
}

CONSUMER: Spec = {
    **COMMON,
    "group.id": (_str, None),
    "group.instance.id": (_str, None),
    "auto.offset.reset": (_choice("earliest", "latest", "none"), "latest"),
    "enable.auto.commit": (_bool, True),
    "auto.commit.interval.ms": (_int, 5000),
    "session.timeout.ms": (_int, 45000),
    "heartbeat.interval.ms": (_int, 3000),
    "max.poll.interval.ms": (_int, 300000),
    "max.poll.records": (_int, 500),
    "fetch.min.bytes": (_int, 1),
    "fetch.max.bytes": (_int, 52428800),
    "fetch.max.wait.ms": (_int, 500),
    "max.partition.fetch.bytes": (_int, 1048576),
    "isolation.level": (_choice("read_uncommitted", "read_committed"), "read_uncommitted"),
    "partition.assignment.strategy": (_list, ["range", "cooperative-sticky"]),
    "check.crcs": (_bool, True),
    "exclude.internal.topics": (_bool, True),
    "allow.auto.create.topics": (_bool, True),
    "key.deserializer": (lambda v: v, None),
    "value.deserializer": (lambda v: v, None),
}

ADMIN: Spec = {**COMMON}

_ASSIGNORS = {"range", "roundrobin", "cooperative-sticky"}
_ASSIGNOR_ALIASES = {
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
}


def parse_config(config: Mapping[str, Any] | None, spec: Spec, kind: str) -> dict[str, Any]:
    """Validate ``config`` against ``spec``; return every key with its converted value.

    Raises ``ConfigError`` for an unknown key, a bad value, or a missing ``bootstrap.servers``.
    """
    out: dict[str, Any] = {k: default for k, (_conv, default) in spec.items()}
    for key, value in (config or {}).items():
        if key not in spec:
            raise ConfigError(f"unknown {kind} configuration key {key!r}")
        conv, _default = spec[key]
        if value is None:
            out[key] = None
            continue
        try:
            out[key] = conv(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"invalid value {value!r} for {kind} configuration key {key!r}: {exc}") from None
    if not out["bootstrap.servers"]:
        raise ConfigError(f"{kind} configuration needs 'bootstrap.servers'")
    if kind == "producer":
        mif = out["max.in.flight.requests.per.connection"]
        if mif < 1:
            raise ConfigError("max.in.flight.requests.per.connection must be >= 1")
        if out["enable.idempotence"]:
            if mif > 5:
                raise ConfigError("enable.idempotence requires max.in.flight.requests.per.connection <= 5")
            if out["acks"] != -1:
                if config and "enable.idempotence" in config:
                    raise ConfigError("enable.idempotence requires acks=all")
                out["enable.idempotence"] = False  # Java: idempotence is silently off when acks != all
        if out["transactional.id"] is not None:
            # as Java: a transactional producer is idempotent with acks=all
            if config and "enable.idempotence" in config and not out["enable.idempotence"]:
                raise ConfigError("transactional.id requires enable.idempotence=true")
            if out["acks"] != -1:
                raise ConfigError("transactional.id requires acks=all")
            if not out["transactional.id"]:
                raise ConfigError("transactional.id must not be empty")
            out["enable.idempotence"] = True
    if kind == "consumer":
        names = []
        for name in out["partition.assignment.strategy"]:
            n = _ASSIGNOR_ALIASES.get(name.lower(), name.lower())
            if n not in _ASSIGNORS:
                raise ConfigError(f"unknown partition.assignment.strategy {name!r}")
            names.append(n)
        out["partition.assignment.strategy"] = names
    return out


def parse_bootstrap(servers: list[str]) -> list[tuple[str, int]]:
    out = []
    for s in servers:
        s = s.split("://", 1)[-1]
        host, _, port = s.rpartition(":")
        if not host:
            host, port = port, "9092"
        out.append((host.strip("[]"), int(port)))
    return out
