"""pytest plugin for odradek (registered through the ``pytest11`` entry point).

Imports nothing heavy at import time: it is loaded in every pytest run of every project that
has odradek installed, including odradek's own test suite.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "odradek_broker(settings=None, *, storage='memory', **settings): broker settings for the "
        "odradek_broker fixture",
    )
