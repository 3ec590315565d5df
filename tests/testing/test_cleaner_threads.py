"""The log cleaner's threads start with the first compacted log, not with the broker.

A broker without a compacted log starts and stops no cleaner thread (an embedded broker per
test pays for nothing it does not use); the first topic with ``cleanup.policy=compact`` starts
them, and the cleaner compacts it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from odradek.testing import EmbeddedBroker
from odradek.testing.helpers import create_topic

pytestmark = pytest.mark.timeout(60)


_OTHERS: set[threading.Thread] = set()


def _cleaner_threads() -> list[str]:
    """The names of the cleaner threads started since ``_OTHERS`` was taken (another broker of
    this process, e.g. a session fixture's, may have its own)."""
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith("kafka-log-cleaner-thread") and t not in _OTHERS
    ]


@pytest.fixture(autouse=True)
def _other_brokers_threads() -> None:
    _OTHERS.clear()
    _OTHERS.update(threading.enumerate())


def test_cleaner_threads_start_with_the_first_compacted_log() -> None:
    with EmbeddedBroker({"log.cleaner.backoff.ms": 50}) as broker:
        create_topic(broker, "plain", 2)
        assert _cleaner_threads() == []
        assert broker.call(lambda: broker.broker.log_cleaner) is not None
        create_topic(broker, "table", 1, {"cleanup.policy": "compact"})
        deadline = time.monotonic() + 10  # the maintenance loop looks every second
        while not _cleaner_threads() and time.monotonic() < deadline:
            time.sleep(0.02)  # polling a condition with a deadline
        assert _cleaner_threads() == ["kafka-log-cleaner-thread-0"]
    assert _cleaner_threads() == []


def test_a_broker_restarted_with_a_compacted_log_starts_its_cleaner_at_once(tmp_path: Path) -> None:
    with EmbeddedBroker(storage="file", data_dir=tmp_path) as broker:
        create_topic(broker, "table", 1, {"cleanup.policy": "compact"})
    with EmbeddedBroker(storage="file", data_dir=tmp_path):
        assert _cleaner_threads() == ["kafka-log-cleaner-thread-0"]
    assert _cleaner_threads() == []
