"""Fixtures for the client tests: the compiled twin is built once (when gcc is there), Tansu
runs per module for the Tansu tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if shutil.which("gcc"):
        try:
            from odradek.client import _build

            _build.build(quiet=True)
        except Exception:  # the pure-Python twins still work
            pass


@pytest.fixture(scope="module")
def tansu() -> Iterator[object]:
    from odradek.testing.tansu import TansuProcess, find_tansu_binary

    try:
        find_tansu_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    with TansuProcess() as t:
        yield t


@pytest.fixture
def speedups() -> object:
    try:
        from odradek.client import _speedups  # type: ignore[attr-defined]
    except ImportError:
        pytest.skip("compiled twin not built (python -m odradek.client._build)")
    return _speedups
