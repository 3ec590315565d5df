"""`odradek quotas alter|describe` round trip with --command-config against a SASL_SSL
listener (kafka-configs' terms), and its refusals of bad arguments (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.embedded import EmbeddedBroker

from .conftest import ADMIN_JAAS, Certs, admin_sasl_ssl_broker


@pytest.fixture(scope="module")
def broker(certs: Certs) -> Iterator[EmbeddedBroker]:
    yield from admin_sasl_ssl_broker(certs, "PLAIN")


@pytest.fixture
def config(certs: Certs, tmp_path: Path) -> Path:
    path = tmp_path / "admin.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={ADMIN_JAAS}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca_pem}\n"
    )
    return path


def quotas(broker: EmbeddedBroker, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "quotas", *args,
         "--bootstrap-server", broker.bootstrap_servers, "--command-config", str(config)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_alter_and_describe_round_trip(broker: EmbeddedBroker, config: Path) -> None:
    done = quotas(broker, config, "alter", "--user", "alice", "--client-id", "app",
                  "--add", "producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Completed updating config for user-principal 'alice', client-id 'app'.\n"
    done = quotas(broker, config, "alter", "--user", "alice", "--client-id", "app",
                  "--add", "consumer_byte_rate=4096", "--delete", "request_percentage")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = quotas(
        broker, config, "alter", "--user-defaults", "--add-config", "request_percentage=200"
    )
    assert done.returncode == 0, done.stderr
    done = quotas(broker, config, "alter", "--entity-type", "clients", "--entity-name", "cli",
                  "--add-config", "controller_mutation_rate=2.5")  # fmt: skip
    assert done.returncode == 0, done.stderr

    both = quotas(broker, config, "describe", "--user", "alice", "--client-id", "app")
    assert both.returncode == 0, both.stderr
    assert both.stdout.splitlines() == [
        "Quota configs for user-principal 'alice', client-id 'app' are "
        "consumer_byte_rate=4096.0, producer_byte_rate=1024.0"
    ]
    defaults = quotas(broker, config, "describe", "--user-defaults")
    assert defaults.stdout.splitlines() == [
        "Quota configs for the default user-principal are request_percentage=200.0"
    ]
    clients = quotas(broker, config, "describe", "--entity-type", "clients")
    assert clients.stdout.splitlines() == [
        "Quota configs for client-id 'cli' are controller_mutation_rate=2.5"
    ]
    everything = quotas(broker, config, "describe")
    assert len(everything.stdout.splitlines()) == 3
    # only alice's own user entity: there is none
    assert quotas(broker, config, "describe", "--user", "alice").stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["alter", "--add", "producer_byte_rate=1"], "name an entity"),
        (["alter", "--user", "a"], "nothing to change"),
        (["alter", "--user", "a", "--add", "bytes=1"], "unknown quota 'bytes'"),
        (["alter", "--user", "a", "--add", "producer_byte_rate"], "expected key=value"),
        (["alter", "--user", "a", "--add", "producer_byte_rate=fast"], "not a number"),
        (["alter", "--user", "a", "--add", "producer_byte_rate=-1"], "must be positive"),
        (["alter", "--user", "a", "--user-defaults", "--delete", "request_percentage"], "not both"),
        (
            [
                "alter",
                "--user",
                "a",
                "--add",
                "request_percentage=1",
                "--delete",
                "request_percentage",
            ],
            "named twice",
        ),
        (["describe", "--entity-type", "topics"], "users or clients"),
    ],
)
def test_bad_arguments_exit_2(
    broker: EmbeddedBroker, config: Path, args: list[str], message: str
) -> None:
    result = quotas(broker, config, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr


def test_a_refusal_by_the_broker_exits_1(broker: EmbeddedBroker, config: Path) -> None:
    # a whole number is required for byte rates (Kafka's LONG keys)
    result = quotas(broker, config, "alter", "--client-id", "x", "--add", "producer_byte_rate=1.5")
    assert result.returncode == 1 and "INVALID_REQUEST" in result.stderr.upper(), result.stderr
