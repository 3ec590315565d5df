"""Ready means ready: when `odradek broker` prints its ready line, what it starts is up.

The console (``http.listeners``) is listening and answers ``/health`` with ``ready`` at that
moment: its start is counted in the broker's start, not left for the seconds after it.
"""

from __future__ import annotations

import urllib.request

import pytest

from odradek.testing.helpers import api_versions
from odradek.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(60)


def test_the_console_answers_at_the_ready_line() -> None:
    with BrokerProcess({"http.listeners": "http://127.0.0.1:0"}, log_level="info") as broker:
        # start() returned at the ready line; the console's own line was logged before it
        url = broker.console_url(timeout=0)
        with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
            assert response.status == 200
            assert response.read().strip() == b"ready"
        api_versions(broker.bootstrap_servers)
