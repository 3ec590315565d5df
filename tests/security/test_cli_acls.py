"""`odradek acls add|list|remove` against a real broker process with an authorizer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from odradek.testing.process import BrokerProcess

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""The ``authorized_broker``'s authorizer (conftest)."""


def acls(broker: BrokerProcess, *args: str, ok: bool = True) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "odradek", "acls", *args, "-b", broker.bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (run.returncode == 0) is ok, run.stderr
    return run.stdout + run.stderr


def test_add_list_remove(authorized_broker: BrokerProcess, tmp_path: Path) -> None:
    out = acls(
        authorized_broker,
        "add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "DescribeConfigs",
        "--topic",
        "orders",
    )
    assert out.count("Added ") == 2
    assert "operation=DESCRIBE_CONFIGS, permissionType=ALLOW" in out
    acls(
        authorized_broker,
        "add",
        "--deny-principal",
        "User:bob",
        "--deny-host",
        "10.0.0.9",
        "--operation",
        "all",
        "--topic",
        "pay-",
        "--resource-pattern-type",
        "prefixed",
    )
    listed = acls(authorized_broker, "list")
    assert listed.count("\n") == 3
    assert (
        "ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED) principal=User:bob, "
        "host=10.0.0.9, operation=ALL, permissionType=DENY"
    ) in listed
    # MATCH: the ACLs that apply to a topic name
    matched = acls(authorized_broker, "list", "--topic", "pay-2", "--resource-pattern-type", "match")
    assert "User:bob" in matched and "User:alice" not in matched
    props = tmp_path / "client.properties"
    props.write_text("# no security on this listener\nclient.id=cli-test\n")
    removed = acls(
        authorized_broker,
        "remove",
        "--allow-principal",
        "User:alice",
        "--topic",
        "orders",
        "--command-config",
        str(props),
    )
    assert removed.count("Removed ") == 2
    assert "User:alice" not in acls(authorized_broker, "list")
    bad = acls(
        authorized_broker,
        "add",
        "--allow-principal",
        "alice",
        "--operation",
        "Read",
        "--topic",
        "t",
        ok=False,
    )
    assert "INVALID_REQUEST" in bad
