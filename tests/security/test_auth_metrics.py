"""Authentication outcomes on /metrics: Kafka's failed-authentication-total and
successful-authentication-total per listener and mechanism, as
``kafka_server_socket_server_metrics_{failed,successful}_authentication_total``.

A broker with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners and its HTTP listener;
confluent-kafka clients trying for 3 s each: a wrong password, an unknown user, a PLAINTEXT
client on each TLS port, and a good login. Every failed attempt is counted once and logged once
with the client's address (as many log lines as counts); /metrics shows the broker's counts.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramMechanism,
)

from odradek.testing.embedded import EmbeddedBroker

from .conftest import Certs, add_scram_users, listener_addr, server_tls

SLOW_RECONNECT = {"reconnect.backoff.ms": 60_000, "reconnect.backoff.max.ms": 60_000}
FAILED = "kafka_server_socket_server_metrics_failed_authentication_total"
SUCCEEDED = "kafka_server_socket_server_metrics_successful_authentication_total"


@pytest.fixture(scope="module")
def broker(certs: Certs) -> Iterator[EmbeddedBroker]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        **server_tls(certs),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "http.listeners": "http://127.0.0.1:0",
    }
    with EmbeddedBroker(settings) as b:
        add_scram_users(b, ("alice", ScramMechanism.SCRAM_SHA_512, 4096, b"alice-pw"))
        yield b


def _counts(b: EmbeddedBroker) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    counters = b.broker.endpoints.counters
    return b.call(lambda: (dict(counters.succeeded), dict(counters.failed)))


def _attempt(
    b: EmbeddedBroker,
    caplog: pytest.LogCaptureFixture,
    conf: dict[str, Any],
    key: tuple[str, str],
    log_prefix: str,
    *,
    failed: bool,
) -> list[str]:
    """A client with ``conf`` tries for up to 3 s (librdkafka may connect more than once);
    every attempt that fails is counted once under ``key`` and logged once, with the client's
    address: the count went up by exactly as many as log lines starting with ``log_prefix``
    appeared. Returns those lines."""
    before = _counts(b)[1 if failed else 0].get(key, 0)
    logged = len(caplog.records)
    admin = AdminClient({**conf, **SLOW_RECONNECT})
    if failed:
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=3)
    else:
        assert admin.list_topics(timeout=10).brokers
    del admin  # no further attempt
    deadline = time.monotonic() + 10
    while (now := _counts(b)[1 if failed else 0].get(key, 0)) == before:
        assert time.monotonic() < deadline, f"{key} was not counted"
        time.sleep(0.02)
    lines = [
        r.getMessage() for r in caplog.records[logged:] if r.getMessage().startswith(log_prefix)
    ]
    if failed:
        deadline = time.monotonic() + 5
        while len(lines) < now - before:  # the log record may trail the count by a moment
            assert time.monotonic() < deadline, (now - before, lines)
            time.sleep(0.02)
            lines = [
                r.getMessage()
                for r in caplog.records[logged:]
                if r.getMessage().startswith(log_prefix)
            ]
        assert len(lines) == now - before, (now - before, lines)
        assert all(" from 127.0.0.1: " in line for line in lines), lines
    return lines


def _metrics(b: EmbeddedBroker) -> dict[tuple[str, str, str], float]:
    address = b.broker.http_address
    assert address is not None
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    pattern = re.compile(
        r"^(kafka_server_socket_server_metrics_\w+_authentication_total)"
        r'\{listener="([^"]+)",mechanism="([^"]+)"\} (\S+)$'
    )
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            out[(m[1], m[2], m[3])] = float(m[4])
    return out


def test_failures_counted_once_logged_once_with_address_and_on_metrics(
    broker: EmbeddedBroker, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    sasl = {
        "bootstrap.servers": listener_addr(broker, "SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "ssl.ca.location": str(certs.ca_pem),
    }
    scram = ("SASL_SSL", "SCRAM-SHA-512")
    sasl_prefix = "failed authentication on listener SASL_SSL with mechanism SCRAM-SHA-512"
    with caplog.at_level(logging.WARNING, logger="odradek.security"):
        wrong = _attempt(
            broker,
            caplog,
            {**sasl, "sasl.username": "alice", "sasl.password": "wrong"},
            scram,
            sasl_prefix,
            failed=True,
        )
        unknown = _attempt(
            broker,
            caplog,
            {**sasl, "sasl.username": "nobody", "sasl.password": "x"},
            scram,
            sasl_prefix,
            failed=True,
        )
        for listener in ("SSL", "SASL_SSL"):  # a PLAINTEXT client on a TLS port
            _attempt(
                broker,
                caplog,
                {"bootstrap.servers": listener_addr(broker, listener)},
                (listener, "SSL"),
                f"failed TLS handshake on listener {listener} from",
                failed=True,
            )
        _attempt(
            broker,
            caplog,
            {**sasl, "sasl.username": "alice", "sasl.password": "alice-pw"},
            scram,
            sasl_prefix,
            failed=False,
        )
    # the same words for a wrong password and an unknown user: nothing says which it was
    assert {line.split(": ", 1)[1] for line in wrong + unknown} == {wrong[0].split(": ", 1)[1]}

    succeeded, failed = _counts(broker)
    want = {(FAILED, *k): float(v) for k, v in failed.items()}
    want.update({(SUCCEEDED, *k): float(v) for k, v in succeeded.items()})
    assert want[(FAILED, "SASL_SSL", "SCRAM-SHA-512")] >= 2
    assert want[(FAILED, "SSL", "SSL")] >= 1 and want[(FAILED, "SASL_SSL", "SSL")] >= 1
    assert want[(SUCCEEDED, "SASL_SSL", "SCRAM-SHA-512")] >= 1
    # /metrics is rendered at most every 5 s inside a broker: ask until it shows the counts
    deadline = time.monotonic() + 15
    while (shown := _metrics(broker)) != want:
        assert time.monotonic() < deadline, (shown, want)
        time.sleep(0.5)
