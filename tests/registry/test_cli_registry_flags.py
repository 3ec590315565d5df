"""``--schema-registry`` (and ``schema.registry.url``) on ``odradek console`` and
``odradek pipeline warehouse``: the console against a broker's registry shows its subjects and
decodes Avro values; bad or contradictory flags fail at once with exit code 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.client import Admin, Producer
from odradek.client.avro import AvroSerializer

from .conftest import RegistryBroker

pytestmark = pytest.mark.timeout(90)

SCHEMA = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "page", "type": "string"}, {"name": "n", "type": "int"}],
}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return str(r.read().decode())


class ConsoleProcess:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "console", "--listen", "http://127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(30)
        assert line and line[0], "no ready line"
        self.line = line[0].decode()
        m = re.match(r"odradek console on (http://\S+) for ", self.line)
        assert m, self.line
        self.url = m.group(1)

    def close(self) -> int:
        self.proc.terminate()
        return self.proc.wait(20)


@pytest.fixture(scope="module")
def clicks(registry: RegistryBroker) -> Iterator[RegistryBroker]:
    conf = {"bootstrap.servers": registry.bootstrap_servers}
    with Admin(conf) as admin:
        admin.create_topics(["clicks"])
    ser = AvroSerializer(registry.url, SCHEMA, topic="clicks")
    with Producer(conf) as p:
        p.send("clicks", ser({"page": "/home", "n": 3}), partition=0).result(10)
    yield registry


@pytest.mark.parametrize("how", ["--schema-registry", "-X"])
def test_console_shows_the_registry(clicks: RegistryBroker, how: str) -> None:
    flag = [how, clicks.url] if how == "--schema-registry" else ["-X", f"schema.registry.url={clicks.url}"]
    console = ConsoleProcess("--bootstrap-server", clicks.bootstrap_servers, *flag)
    try:
        assert f"(schema registry {clicks.url})" in console.line
        page = _get(console.url + "/schemas")
        assert "clicks-value" in page and clicks.url in page
        assert "Click" in _get(console.url + "/schemas/" + urllib.parse.quote("clicks-value"))
        deadline = time.monotonic() + 20
        while True:  # the console's snapshot may not know the topic yet
            try:
                rows: Any = json.loads(_get(console.url + "/api/topics/clicks/messages?partition=0&offset=0"))
                break
            except urllib.error.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert rows[0]["value_decoded"] == {"page": "/home", "n": 3}
        assert rows[0]["value_schema_id"] > 0
    finally:
        assert console.close() == 0


def test_console_without_registry_says_so(clicks: RegistryBroker) -> None:
    console = ConsoleProcess("--bootstrap-server", clicks.bootstrap_servers)
    try:
        assert "schema registry" not in console.line
        assert "clicks-value" not in _get(console.url + "/schemas")
    finally:
        assert console.close() == 0


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["console", "--schema-registry", "localhost:8081"], "not an http:// or https:// URL"),
        (
            ["console", "--schema-registry", "http://a:1", "-X", "schema.registry.url=http://b:2"],
            "differ",
        ),
        (
            ["pipeline", "warehouse", "-o", "/nonexistent", "--subscribe", "t",
             "--schema-registry", "http://a:1", "--value-format", "json"],
            "needs --value-format avro",
        ),
        (
            ["pipeline", "warehouse", "-o", "/nonexistent", "--subscribe", "t",
             "--value-subject", "s"],
            "needs --schema-registry",
        ),
        (
            ["pipeline", "warehouse", "-o", "/nonexistent", "--subscribe", "t",
             "--set", "schema.registry.url=ftp://x"],
            "not an http:// or https:// URL",
        ),
    ],
)
def test_bad_registry_flags_fail_at_once(args: list[str], message: str) -> None:
    run = _run(*args)
    assert run.returncode == 2, run.stderr
    assert message in " ".join(run.stderr.replace("│", " ").split()), run.stderr  # rich's box
