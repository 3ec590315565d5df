"""Shared fixtures: real `odradek broker` processes (odradek.testing.process.BrokerProcess).

* ``broker`` (module scope): one broker process per test module, listening on 127.0.0.1 on an
  ephemeral port, data in a fresh temporary directory. It has ``.bootstrap_servers``,
  ``.data_dir``, ``.settings``, ``.stop()``, ``.kill()``, ``.restart()`` (same data dir and
  port; ``restart(kill=True)`` simulates a crash).
* ``fresh_broker`` (function scope): the same, but a new process for each test.
* ``authorized_broker`` (module scope): a broker process with an authorizer, the module's
  ``AUTHORIZER`` (Kafka's AclAuthorizer when it has none), and
  ``allow.everyone.if.no.acl.found=true``: a resource without ACLs is open, so the ACLs a test
  creates decide.

Settings: a test module overrides broker settings with a module-level dict::

    BROKER_SETTINGS = {"num.partitions": 3, "message.max.bytes": 10000}

or per test/parametrization with indirect parametrization of either fixture::

    @pytest.mark.parametrize("fresh_broker", [{"storage.engine": "memory"}], indirect=True)

Both are merged over ``DEFAULT_SETTINGS`` below (everything else is Kafka's default; note
that time-based retention applies to record timestamps, so a test that writes old timestamps
and shortens ``log.retention.check.interval.ms`` sees them deleted, as with Kafka). A test that stops or kills the
module-scoped broker must restart it before it returns.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.testing.process import BrokerProcess

DEFAULT_SETTINGS: dict[str, Any] = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "group.initial.rebalance.delay.ms": 0,
}
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def _settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    settings = dict(DEFAULT_SETTINGS)
    module_settings = getattr(request.module, "BROKER_SETTINGS", None)
    if module_settings:
        settings.update(module_settings)
    param = getattr(request, "param", None)
    if param:
        settings.update(param)
    return settings


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    process = BrokerProcess(_settings(request))
    process.start()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture(scope="module")
def authorized_broker(request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    settings = {
        **DEFAULT_SETTINGS,
        "authorizer.class.name": getattr(request.module, "AUTHORIZER", ACL_AUTHORIZER),
        "allow.everyone.if.no.acl.found": "true",
    }
    with BrokerProcess(settings) as process:
        yield process


@pytest.fixture
def fresh_broker(request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    process = BrokerProcess(_settings(request))
    process.start()
    try:
        yield process
    finally:
        process.close()


@contextlib.contextmanager
def _mounted_tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def tmpfs() -> Callable[[Path, str], contextlib.AbstractContextManager[Path]]:
    """``with tmpfs(path, "256k") as small:`` a small tmpfs mounted at ``path`` (writes past
    its size fail with ENOSPC, also as root), unmounted after the block; the test is skipped
    where mounting is not allowed."""
    return _mounted_tmpfs
