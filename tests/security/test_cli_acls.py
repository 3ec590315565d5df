"""`odradek acls add|list|remove` against a real broker process with an authorizer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def secured() -> Iterator[BrokerProcess]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with BrokerProcess(settings) as broker:
        yield broker


def acls(broker: BrokerProcess, *args: str, ok: bool = True) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "odradek", "acls", *args, "-b", broker.bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (run.returncode == 0) is ok, run.stderr
    return run.stdout + run.stderr


def test_add_list_remove(secured: BrokerProcess, tmp_path: Path) -> None:
    out = acls(
        secured,
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
        secured,
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
    listed = acls(secured, "list")
    assert listed.count("\n") == 3
    assert (
        "ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED) principal=User:bob, "
        "host=10.0.0.9, operation=ALL, permissionType=DENY"
    ) in listed
    # MATCH: the ACLs that apply to a topic name
    matched = acls(secured, "list", "--topic", "pay-2", "--resource-pattern-type", "match")
    assert "User:bob" in matched and "User:alice" not in matched
    props = tmp_path / "client.properties"
    props.write_text("# no security on this listener\nclient.id=cli-test\n")
    removed = acls(
        secured,
        "remove",
        "--allow-principal",
        "User:alice",
        "--topic",
        "orders",
        "--command-config",
        str(props),
    )
    assert removed.count("Removed ") == 2
    assert "User:alice" not in acls(secured, "list")
    bad = acls(
        secured,
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
