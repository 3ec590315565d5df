"""A broker process with its console on an ephemeral port (``http.listeners``)."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from odradek.testing.process import BrokerProcess

_CONSOLE_RE = re.compile(r"console listening on (http://[^\s]+)")


@dataclass
class ConsoleBroker:
    process: BrokerProcess
    url: str

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap_servers

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=15) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def post(self, path: str, form: dict[str, str], headers: dict[str, str]) -> tuple[int, str]:
        data = urllib.parse.urlencode(form).encode()
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=15) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def console_url(process: BrokerProcess, timeout: float = 10.0) -> str:
    """The console's URL from the broker's log (logged before the ready line)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = _CONSOLE_RE.search(process.stderr_tail(1 << 20))
        if m:
            return m.group(1)
        time.sleep(0.05)
    raise AssertionError(f"no console line in the broker log: {process.stderr_tail()}")


@pytest.fixture(scope="module")
def console_broker() -> Iterator[ConsoleBroker]:
    process = BrokerProcess(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "http.listeners": "http://127.0.0.1:0",
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 1,
        },
        log_level="info",
    )
    process.start()
    try:
        yield ConsoleBroker(process, console_url(process))
    finally:
        process.close()
