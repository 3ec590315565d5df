"""pytest plugin for odradek, registered through the ``pytest11`` entry point, so installing
odradek is enough: no ``pytest_plugins`` line or conftest import is needed.

Fixtures:

* ``odradek_broker`` (function scope): a fresh, isolated ``EmbeddedBroker`` per test, started
  before the test and stopped (every connection closed) after it. Settings come from the
  ``odradek_broker`` marker::

      @pytest.mark.odradek_broker(settings={"num.partitions": 3}, storage="file")
      def test_x(odradek_broker): ...

      @pytest.mark.odradek_broker(num_partitions=3)        # keyword form: _ stands for .

  The marker may sit on the test, its class or its module (``pytestmark``); the closest one
  wins, and its settings are merged over the ``odradek_broker_settings`` ini option.
* ``odradek_broker_session`` (session scope): one broker shared by every test of the session
  (topics and groups persist between tests: use unique names). Its settings come from the
  ``odradek_broker_settings`` ini option (lines of ``key=value``).
* ``odradek_bootstrap`` (function scope): shorthand for ``odradek_broker.bootstrap_servers``.

This module imports only pytest at import time: it is loaded in every pytest run of every
project that has odradek installed (odradek's own test suite included), so the broker is
imported inside the fixtures, when a test asks for one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from odradek.testing.embedded import EmbeddedBroker

MARKER = "odradek_broker"
INI_SETTINGS = "odradek_broker_settings"
INI_STORAGE = "odradek_broker_storage"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        INI_SETTINGS,
        type="linelist",
        default=[],
        help="odradek: broker settings (key=value per line) for odradek_broker and "
        "odradek_broker_session",
    )
    parser.addini(
        INI_STORAGE,
        default="memory",
        help="odradek: storage engine of the test brokers, memory (default) or file",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(settings=None, *, storage=None, **settings): broker settings for the "
        "odradek_broker fixture (Kafka's keys; in keywords _ stands for .)",
    )


def _ini_settings(config: pytest.Config) -> dict[str, object]:
    out: dict[str, object] = {}
    for line in config.getini(INI_SETTINGS):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"{INI_SETTINGS}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def _marker_options(request: pytest.FixtureRequest) -> tuple[dict[str, object], str | None]:
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return {}, None
    settings: dict[str, object] = {}
    storage: str | None = None
    for arg in marker.args:
        if not isinstance(arg, dict):
            raise pytest.UsageError(f"@pytest.mark.{MARKER}: positional argument must be a dict")
        settings.update(arg)
    for key, value in marker.kwargs.items():
        if key == "settings":
            settings.update(value or {})
        elif key == "storage":
            storage = value
        else:
            settings[key.replace("_", ".")] = value
    return settings, storage


def _make_broker(config: pytest.Config, settings: dict[str, object], storage: str | None) -> Any:
    # lazy: the plugin loads in every pytest run; the broker only when a test asks for one
    from odradek.testing.embedded import EmbeddedBroker

    merged = _ini_settings(config)
    merged.update(settings)
    engine = storage or str(config.getini(INI_STORAGE) or "memory")
    return EmbeddedBroker(merged, storage=engine)  # type: ignore[arg-type]


@pytest.fixture
def odradek_broker(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    """A fresh odradek broker for this test (settings from the ``odradek_broker`` marker)."""
    settings, storage = _marker_options(request)
    broker = _make_broker(request.config, settings, storage)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def odradek_bootstrap(odradek_broker: EmbeddedBroker) -> str:
    """``bootstrap.servers`` of this test's fresh broker."""
    return odradek_broker.bootstrap_servers


@pytest.fixture(scope="session")
def odradek_broker_session(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    """One odradek broker for the whole session (settings from ``odradek_broker_settings``)."""
    broker = _make_broker(request.config, {}, None)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
