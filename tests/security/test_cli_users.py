"""`odradek users scram add|list|remove` with --command-config against a SASL_SSL listener;
the user it adds then logs in with confluent-kafka."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from odradek.testing.embedded import EmbeddedBroker

from .conftest import ADMIN_JAAS, Certs, admin_sasl_ssl_broker


@pytest.fixture(scope="module")
def broker(certs: Certs) -> Iterator[EmbeddedBroker]:
    yield from admin_sasl_ssl_broker(certs, "PLAIN,SCRAM-SHA-256")


def _users(broker: EmbeddedBroker, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "users", "scram", *args,
         "-b", broker.bootstrap_servers, "--command-config", str(config)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_add_list_remove(broker: EmbeddedBroker, certs: Certs, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={ADMIN_JAAS}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca_pem}\n"
    )
    added = _users(broker, config, "add", "--user", "bob", "--password", "bob-pw",
                   "--mechanism", "SCRAM-SHA-256", "--iterations", "4096")  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = _users(broker, config, "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["bob\tSCRAM-SHA-256\titerations=4096"]
    admin = AdminClient({
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "bob-pw",
        "ssl.ca.location": str(certs.ca_pem),
    })  # fmt: skip
    assert admin.list_topics(timeout=10).brokers
    removed = _users(broker, config, "remove", "--user", "bob", "--mechanism", "SCRAM-SHA-256")
    assert removed.returncode == 0, removed.stderr
    assert _users(broker, config, "list").stdout == ""
    again = _users(broker, config, "remove", "--user", "bob", "--mechanism", "SCRAM-SHA-256")
    assert again.returncode == 1 and "RESOURCE_NOT_FOUND" in again.stderr.upper()
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(config.read_text().replace('password="admin-pw"', 'password="nope"'))
    refused = _users(broker, wrong, "list")
    assert refused.returncode == 1 and "Invalid username or password" in refused.stderr


def test_single_node_credentials_file(tmp_path: Path) -> None:
    """Single-node mode: the credential is in the data dir's config-entities file, owner-only,
    in Kafka's format, never the password."""
    import json
    import stat

    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism
    from confluent_kafka.admin import UserScramCredentialUpsertion as Upsert

    with EmbeddedBroker({}, storage="file", data_dir=tmp_path / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        for f in admin.alter_user_scram_credentials([Upsert("gina", info, b"gina-pw")]).values():
            f.result(10)
        path = tmp_path / "data" / "odradek-config-entities.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        text = path.read_text()
        assert "gina-pw" not in text
        credential = json.loads(text)["entities"]["users"]["gina"]["SCRAM-SHA-256"]
        assert credential.startswith("salt=") and credential.endswith(",iterations=4096")
