"""KafkaJS's ``@kafkajs/confluent-schema-registry`` (npm) against the registry: a second
language's Confluent client as an oracle. Installed with npm into the same cache folder as
KafkaJS (``$ODRADEK_NODE_CACHE``, default ``~/.cache/odradek/node``); skipped when node or npm is
missing or the npm registry cannot be reached."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from .conftest import RegistryBroker

pytestmark = pytest.mark.timeout(240)

PACKAGE = "@kafkajs/confluent-schema-registry"
VERSION = "4.1.0"
SCENARIO = Path(__file__).with_name("kafkajs_registry.js")


def _install() -> Path:
    root = Path(os.environ.get("ODRADEK_NODE_CACHE") or Path.home() / ".cache" / "odradek" / "node")
    target = root / f"confluent-schema-registry-{VERSION}"
    modules = target / "node_modules"
    if (modules / "@kafkajs" / "confluent-schema-registry" / "package.json").exists():
        return modules
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed (apt-get install nodejs npm)")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".csr-", dir=root))
    try:
        done = subprocess.run(
            [
                npm,
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(tmp),
                f"{PACKAGE}@{VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"npm install {PACKAGE}@{VERSION} failed: {done.stderr[-500:]}")
        try:
            tmp.rename(target)
        except OSError:
            pass  # another run installed it meanwhile
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return modules


def test_kafkajs_registry_client(registry: RegistryBroker) -> None:
    modules = _install()
    subject = f"kjs-{uuid.uuid4().hex[:8]}-value"
    done = subprocess.run(
        ["node", str(SCENARIO), registry.url, subject],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(modules)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["frame"] == [0, *out["first"].to_bytes(4, "big")]
    assert out["decoded"] == {"n": 5}
    assert out["second"] == out["latest"] != out["first"]
    assert out["bySchema"] == out["first"]
    assert out["refused"]["status"] == 409
    assert "incompatible with an earlier schema" in out["refused"]["message"]
