"""A broker process with the schema registry on an ephemeral port (``schema.registry.listeners``)
and a small HTTP helper that returns (status, content type, parsed JSON) for exact checks."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from odradek.testing.process import BrokerProcess

REGISTRY_RE = re.compile(r"schema registry listening on (https?://\S+)")


def registry_url(process: BrokerProcess, timeout: float = 30.0) -> str:
    """The registry's URL from the ``schema registry listening on <url>`` line of the log."""
    deadline = time.monotonic() + timeout
    while True:
        m = REGISTRY_RE.search(process.stderr_tail(1 << 20))
        if m:
            return m.group(1)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no registry line in the broker log: {process.stderr_tail()}")
        time.sleep(0.05)


@dataclass
class RegistryBroker:
    process: BrokerProcess
    url: str

    @property
    def bootstrap_servers(self) -> str:
        return self.process.bootstrap_servers

    def call(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None
    ) -> tuple[int, str, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=15) as r:
                status, ctype, text = r.status, r.headers.get("content-type"), r.read()
        except urllib.error.HTTPError as exc:
            status, ctype, text = exc.code, exc.headers.get("content-type"), exc.read()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text.decode()
        return status, ctype, parsed


def start_registry_broker(
    settings: dict[str, Any] | None = None, **kw: Any
) -> tuple[BrokerProcess, str]:
    process = BrokerProcess(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "schema.registry.listeners": "http://127.0.0.1:0",
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 1,
            **(settings or {}),
        },
        log_level="info",
        **kw,
    )
    process.start()
    try:
        return process, registry_url(process)
    except BaseException:
        process.close()
        raise


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryBroker]:
    process, url = start_registry_broker()
    try:
        yield RegistryBroker(process, url)
    finally:
        process.close()
