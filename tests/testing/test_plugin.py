"""The pytest plugin as another project sees it: the example project under example_project/
is copied into a pytester directory and run in a subprocess (the plugin arrives through the
pytest11 entry point only)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).parent / "example_project"
N_FRESH = 200


@pytest.fixture
def example(pytester: pytest.Pytester) -> pytest.Pytester:
    pytest.importorskip("odradek.broker.server")
    for item in EXAMPLE.iterdir():
        if item.name == "__pycache__":
            continue
        if item.is_dir():
            shutil.copytree(item, pytester.path / item.name)
        else:
            shutil.copy(item, pytester.path / item.name)
    return pytester


def _run(example: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str):
    report = tmp_path / "resources.json"
    monkeypatch.setenv("ODRADEK_EXAMPLE_LEAK_CHECK", "1")
    monkeypatch.setenv("ODRADEK_EXAMPLE_REPORT", str(report))
    started = time.monotonic()
    result = example.runpytest_subprocess("-q", "-p", "no:randomly", *args, timeout=240)
    elapsed = time.monotonic() - started
    resources = json.loads(report.read_text()) if report.exists() else None
    return result, resources, elapsed


def _assert_outcomes(result: pytest.RunResult, **outcomes: int) -> None:
    try:
        result.assert_outcomes(**outcomes)
    except AssertionError:
        print("\n".join(result.outlines[-200:]))
        raise


def _assert_nothing_left(resources: dict) -> None:
    before, after = resources["before"], resources["after"]
    assert after["listening"] == before["listening"] == 0, resources
    assert after["threads"] == before["threads"], resources
    assert after["fds"] <= before["fds"], resources


@pytest.mark.timeout(300)
def test_clients_through_the_fixtures(example, monkeypatch, tmp_path):
    result, resources, elapsed = _run(
        example,
        monkeypatch,
        tmp_path,
        "test_confluent_kafka.py",
        "test_kafka_python.py",
        "test_aiokafka.py",
        "test_odradek_client.py",
    )
    print(f"client tests: {elapsed:.1f} s")
    _assert_outcomes(result, passed=13)
    _assert_nothing_left(resources)


@pytest.mark.timeout(300)
def test_200_fresh_brokers(example, monkeypatch, tmp_path):
    result, resources, elapsed = _run(example, monkeypatch, tmp_path, "test_many_fresh_brokers.py")
    _assert_outcomes(result, passed=N_FRESH)
    durations = re.search(r"passed in ([0-9.]+)s", result.stdout.str())
    print(
        f"{N_FRESH} fresh brokers: {elapsed:.1f} s wall, pytest says {durations and durations[1]} s"
    )
    _assert_nothing_left(resources)


def test_plugin_is_loaded_and_cheap(pytester: pytest.Pytester):
    """The entry point loads the plugin in any project, and loading it imports no broker code."""
    pytester.makepyfile(
        """
        import sys

        def test_loaded(request):
            assert request.config.pluginmanager.has_plugin("odradek")
            loaded = [m for m in sys.modules if m.startswith("odradek")]
            assert "odradek.testing.pytest_plugin" in loaded
            assert not [m for m in loaded if m.startswith(("odradek.broker", "odradek.storage",
                        "odradek.testing.embedded", "odradek.testing.process",
                        "odradek.testing.tansu"))], loaded

        def test_marker_registered(pytestconfig):
            assert any(line.startswith("odradek_broker(") for line in pytestconfig.getini("markers"))
        """
    )
    result = pytester.runpytest_subprocess("-q", "--strict-markers")
    result.assert_outcomes(passed=2)


def test_bad_marker_setting_fails_the_test_with_the_key(pytester: pytest.Pytester):
    pytest.importorskip("odradek.broker.server")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.odradek_broker(settings={"no.such.key": 1})
        def test_bad(odradek_broker):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no.such.key*unknown configuration key*"])


def test_ini_settings_and_storage(pytester: pytest.Pytester):
    pytest.importorskip("odradek.broker.server")
    pytester.makeini(
        """
        [pytest]
        odradek_broker_settings =
            num.partitions=5
        odradek_broker_storage = file
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_session(odradek_broker_session):
            assert odradek_broker_session.settings["num.partitions"] == "5"
            assert odradek_broker_session.storage == "file"

        @pytest.mark.odradek_broker(num_partitions=7, storage="memory")
        def test_marker_wins(odradek_broker, odradek_bootstrap):
            assert odradek_broker.settings["num.partitions"] == "7"
            assert odradek_broker.storage == "memory"
            assert odradek_bootstrap == odradek_broker.bootstrap_servers
        """
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=2)
