"""Fixtures for the interop tests.

`kafka` is the broker under test, module-scoped: odradek's `broker` fixture (a real
`odradek broker` process, tests/conftest.py) by default, or Tansu when
``ODRADEK_INTEROP_BROKER=tansu`` (to debug the tests themselves; Tansu keeps data in memory, so
restart tests are skipped there, and features Tansu lacks are skipped via `kafka.require`;
``INTEROP_NO_SKIP=1`` runs them anyway).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.tansu import TansuProcess

from .support import env_target, kcat_binary

pytestmark = pytest.mark.interop

# Features Tansu 0.6 is known not to get right (what these tests found).
TANSU_GAPS = {
    "restart": "Tansu runs on memory storage here: a restart loses everything",
    "idempotence": "Tansu's InitProducerId is broken",
    "latest_offset": "Tansu answers a wrong 'latest' offset",
    "message_max_bytes": "Tansu does not enforce message.max.bytes",
    "crc": "Tansu does not check batch CRCs",
    "max_timestamp": "Tansu has no ListOffsets max timestamp",
    "kcat": "Tansu writes tagged fields kcat's librdkafka 2.0 cannot read (Read underflow)",
}


class Target:
    """The broker under test, as the interop tests see it."""

    def __init__(self, name: str, handle: Any) -> None:
        self.name = name
        self.handle = handle

    @property
    def bootstrap_servers(self) -> str:
        return str(self.handle.bootstrap_servers)

    def require(self, feature: str) -> None:
        """Skip the calling test when the target is known not to support `feature`."""
        if self.name == "tansu" and feature in TANSU_GAPS and not os.environ.get("INTEROP_NO_SKIP"):
            pytest.skip(f"tansu: {TANSU_GAPS[feature]}")

    def restart(self) -> None:
        self.require("restart")
        self.handle.restart()


@pytest.fixture(scope="module")
def kafka(request: pytest.FixtureRequest) -> Iterator[Target]:
    if env_target() == "tansu":
        tansu = TansuProcess().start()
        try:
            yield Target("tansu", tansu)
        finally:
            tansu.stop()
    else:
        try:
            handle = request.getfixturevalue("broker")
        except pytest.FixtureLookupError:
            # tests/conftest.py's `broker` fixture not there (yet): run the process ourselves.
            from odradek.testing.process import BrokerProcess

            with BrokerProcess() as process:
                yield Target("odradek", process)
            return
        yield Target("odradek", handle)


@pytest.fixture(scope="session")
def kcat() -> str:
    path = kcat_binary()
    if path is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    return path
