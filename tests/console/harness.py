"""What the console tests and the interop tests of old clients share: ``ConsoleBroker`` (a
broker process with its console) and ``running_console_broker`` (a fixture's body)."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

from odradek.testing.process import BrokerProcess


@dataclass
class ConsoleBroker:
    process: BrokerProcess
    url: str

    @property
    def bootstrap_servers(self) -> str:
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


def running_console_broker() -> Iterator[ConsoleBroker]:
    """A fixture's body (``yield from``): a broker process with its console on an ephemeral
    port, closed at teardown."""
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
        yield ConsoleBroker(process, process.console_url())
    finally:
        process.close()
