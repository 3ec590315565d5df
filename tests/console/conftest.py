"""A broker process with its console on an ephemeral port (``http.listeners``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import ConsoleBroker, running_console_broker


@pytest.fixture(scope="module")
def console_broker() -> Iterator[ConsoleBroker]:
    yield from running_console_broker()
