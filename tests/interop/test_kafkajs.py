"""KafkaJS (npm, pure JavaScript) against odradek: admin, gzip produce, a group, a commit.

KafkaJS is installed with npm into a cache folder outside the repository
(``$ODRADEK_NODE_CACHE``, default ``~/.cache/odradek/node``), once per version; node_modules is
never committed. The scenario is ``kafkajs_scenario.js`` beside this file: one node process that
prints what it saw as JSON. Skipped when node or npm is missing (Debian packages ``nodejs`` and
``npm``) or the npm registry cannot be reached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from broker.wire import Wire, fetch_request
from odradek.protocol.records import Compression, iter_batches

from .conftest import Target
from .support import unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

KAFKAJS_VERSION = "2.2.4"
SCENARIO = Path(__file__).with_name("kafkajs_scenario.js")
COUNT = 30


def node_cache() -> Path:
    root = os.environ.get("ODRADEK_NODE_CACHE") or str(Path.home() / ".cache" / "odradek" / "node")
    return Path(root)


def install_kafkajs(version: str = KAFKAJS_VERSION) -> Path:
    """The node_modules folder holding kafkajs ``version``, installed with npm on first use
    (into a temporary folder, then renamed: a concurrent or interrupted install never leaves a
    half-filled one)."""
    target = node_cache() / f"kafkajs-{version}"
    modules = target / "node_modules"
    if (modules / "kafkajs" / "package.json").exists():
        return modules
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed (apt-get install nodejs npm)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".kafkajs-{version}-", dir=target.parent))
    try:
        done = subprocess.run(
            [npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(tmp),
             f"kafkajs@{version}"],
            capture_output=True, text=True, timeout=180, check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"npm install kafkajs@{version} failed: {done.stderr[-500:]}")
        try:
            tmp.rename(target)
        except OSError:  # installed meanwhile by someone else
            if not (modules / "kafkajs" / "package.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return modules


@pytest.fixture(scope="module")
def kafkajs() -> Path:
    return install_kafkajs()


def run_scenario(modules: Path, bootstrap: str, topic: str, group: str) -> dict:
    env = dict(os.environ, NODE_PATH=str(modules))
    done = subprocess.run(
        ["node", str(SCENARIO), bootstrap, topic, group, str(COUNT)],
        capture_output=True, text=True, timeout=150, env=env, check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kafkajs_admin_gzip_group_commit(kafka: Target, kafkajs: Path) -> None:
    topic = unique_topic("kafkajs")
    group = f"{topic}-group"
    out = run_scenario(kafkajs, kafka.bootstrap_servers, topic, group)

    # admin
    assert out["created"] is True
    assert topic in out["topics"]
    assert out["partitions"] == [0, 1, 2]

    # produce: every send acknowledged without error; the log ends hold exactly COUNT records
    assert len(out["sent"]) >= 1 and all(s["errorCode"] == 0 for s in out["sent"])
    offsets = out["topicOffsets"]
    assert [o["partition"] for o in offsets] == [0, 1, 2]
    assert sum(o["high"] - o["low"] for o in offsets) == COUNT
    assert sum(1 for o in offsets if o["high"] > 0) >= 2  # keys spread over partitions

    # consume: every record once, in offset order per partition, key/value/header intact
    received = out["received"]
    assert sorted(r["value"] for r in received) == sorted(f"value-{i}" for i in range(COUNT))
    for r in received:
        n = r["n"]
        assert (r["key"], r["value"]) == (f"key-{n}", f"value-{n}")
    for p in range(3):
        got = [r["offset"] for r in received if r["partition"] == p]
        assert got == list(range(len(got)))

    # the group: one member that got all three partitions, Stable while it ran
    assert out["membership"] is not None
    assert out["membership"]["leaderId"] == out["membership"]["memberId"]
    assert sorted(out["membership"]["assignment"][topic]) == [0, 1, 2]
    assert out["described"] == [
        {"groupId": group, "state": "Stable", "protocolType": "consumer", "members": 1}
    ]
    # commit: the committed offsets are the log ends; after leaving, the group is Empty
    assert out["committed"] == [{"partition": o["partition"], "offset": o["high"]} for o in offsets]
    assert group in out["groups"]
    assert out["describedAfterLeave"] == ["Empty"]

    # what the broker stored: KafkaJS's batches, gzip-compressed, as sent
    with Wire(kafka.bootstrap_servers) as wire:
        response = wire.call(fetch_request(topic, {0: 0, 1: 0, 2: 0}))
    codecs = {
        batch.compression
        for partition in response.responses[0].partitions
        for batch in iter_batches(partition.records or b"")
    }
    assert codecs == {Compression.GZIP}
