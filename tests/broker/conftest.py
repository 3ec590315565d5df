"""The broker tests' shared fixture: ``wire``, one raw Kafka-protocol connection per test to the
module's ``broker`` (tests/conftest.py), closed after the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing.process import BrokerProcess

from .wire import Wire


@pytest.fixture
def wire(broker: BrokerProcess) -> Iterator[Wire]:
    with Wire(broker.bootstrap_servers) as w:
        yield w
