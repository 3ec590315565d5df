"""The Schemas and Mirroring pages and the message browser's decoding, end to end: cluster A and
cluster B (each a broker process with its own schema registry; B with its console), `odradek
mirror` A->B rewriting schema ids, and B's console showing B's registry, the decoded mirrored
records and the flow, from what B holds only. Screenshots with headless chromium when present."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from odradek.client import Admin, Producer, TopicPartition
from odradek.client.avro import AvroSerializer, SchemaRegistryClient

from .harness import ConsoleBroker

REGISTRY_RE = re.compile(r"schema registry listening on (http://\S+)")
TOPIC = "users"
V1 = {"type": "record", "name": "User", "namespace": "t", "fields": [{"name": "name", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "tag", "type": ["null", "string"], "default": None}]}
N = 20


def _registry_url(process: Any) -> str:
    deadline = time.monotonic() + 30
    while not (m := REGISTRY_RE.search(process.stderr_tail(1 << 20))):
        assert time.monotonic() < deadline, "no registry line in the broker log"
        time.sleep(0.05)
    return m.group(1)


def _start(console: bool) -> Any:
    from odradek.testing.process import BrokerProcess

    settings: dict[str, Any] = {"listeners": "PLAINTEXT://127.0.0.1:0", "schema.registry.listeners": "http://127.0.0.1:0",
                                "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1}
    if console:
        settings["http.listeners"] = "http://127.0.0.1:0"
    p = BrokerProcess(settings, log_level="info")
    p.start()
    return p


def _until(predicate: Callable[[], Any], timeout: float, what: str, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"\n{log.read_text()[-3000:]}" if log else ""))
        time.sleep(0.1)
    return value


def _end(bootstrap: str, topic: str) -> int:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        if topic not in admin.list_topics(include_internal=True):
            return 0
        return admin.list_offsets({TopicPartition(topic, 0): "latest"})[TopicPartition(topic, 0)][0]


@dataclass
class Mirrored:
    b: ConsoleBroker
    a_registry: str
    b_registry: str
    a_ids: tuple[int, int]
    values: list[dict[str, Any]]


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirrored]:
    tmp = tmp_path_factory.mktemp("mirror")
    a = _start(console=False)
    b = None
    proc = None
    try:
        b = _start(console=True)
        a_reg, b_reg = _registry_url(a), _registry_url(b)
        for i in range(5):  # B's ids are taken: A's cannot mean the same on B
            SchemaRegistryClient(b_reg).register(f"other-{i}", json.dumps({"type": "enum", "name": f"E{i}", "symbols": ["X"]}))
        s1, s2 = AvroSerializer(a_reg, V1, topic=TOPIC), AvroSerializer(a_reg, V2, topic=TOPIC)
        values: list[dict[str, Any]] = []
        with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
            for i in range(N):
                v: dict[str, Any] = {"name": f"user-{i}"} if i < N // 2 else {"name": f"user-{i}", "tag": f"t{i}"}
                p.send(TOPIC, (s1 if i < N // 2 else s2)(v), partition=0)
                values.append(v if i >= N // 2 else {**v})
            p.flush(10)
        with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
            admin.alter_group_offsets("app", {TopicPartition(TOPIC, 0): 15})
        props = tmp / "mm2.properties"
        props.write_text("\n".join([
            "clusters = A, B", f"A.bootstrap.servers = {a.bootstrap_servers}", f"B.bootstrap.servers = {b.bootstrap_servers}",
            f"A.schema.registry.url = {a_reg}", f"B.schema.registry.url = {b_reg}", "A->B.enabled = true",
            f"A->B.topics = {TOPIC}", "replication.factor = 1", "offset-syncs.topic.replication.factor = 1",
            "heartbeats.topic.replication.factor = 1", "checkpoints.topic.replication.factor = 1",
            "emit.checkpoints.interval.seconds = 1", "exactly.once.source.support = enabled"]) + "\n")
        log = tmp / "mirror.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "odradek", "mirror", str(props), "--progress-interval", "1"],
                                    stdout=subprocess.DEVNULL, stderr=out, stdin=subprocess.DEVNULL, env=dict(os.environ))
        _until(lambda: _end(b.bootstrap_servers, f"A.{TOPIC}") >= N, 60, "the records on B", log)
        _until(lambda: _end(b.bootstrap_servers, "A.checkpoints.internal") > 0, 60, "a checkpoint on B", log)
        _until(lambda: _end(b.bootstrap_servers, "heartbeats") > 0, 30, "a heartbeat on B", log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        yield Mirrored(ConsoleBroker(b, b.console_url()), a_reg, b_reg, (s1.schema_id, s2.schema_id), values)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if b is not None:
            b.close()
        a.close()


def test_schemas_page_lists_the_brokers_own_registry(mirrored: Mirrored) -> None:
    status, body = mirrored.b.get("/schemas")
    assert status == 200, body
    assert f"{TOPIC}-value" in body and "other-0" in body and "BACKWARD" in body
    status, body = mirrored.b.get(f"/schemas/{TOPIC}-value")
    assert status == 200, body
    assert body.count('class="version"') == 2
    diff = html.unescape(re.search(r'<pre id="diff">(.*?)</pre>', body, re.S).group(1))  # type: ignore[union-attr]
    assert re.search(r'^\+\s+"name": "tag",$', re.sub(r"<[^>]+>", "", diff), re.M), diff
    assert "version 1" in diff and "version 2" in diff
    status, body = mirrored.b.get(f"/schemas/{TOPIC}-value?from=2&to=2")
    assert "The two versions are the same schema." in body
    status, body = mirrored.b.get(f"/schemas/{TOPIC}-value?from=1&to=7")
    assert "versions must be two of 1, 2" in body
    assert mirrored.b.get("/schemas/no-such-subject")[0] == 404


def test_message_browser_shows_ids_and_decoded_values(mirrored: Mirrored) -> None:
    status, body = mirrored.b.get(f"/api/topics/A.{TOPIC}/messages?partition=0&offset=0&limit={N}")
    assert status == 200, body
    rows = json.loads(body)
    assert [r["value_decoded"] for r in rows] == mirrored.values
    b_ids = {r["value_schema_id"] for r in rows}
    assert len(b_ids) == 2 and not b_ids & set(mirrored.a_ids)  # B's ids, not A's
    status, page = mirrored.b.get(f"/topics/A.{TOPIC}/messages?partition=0&offset=12&limit=1")
    assert f"schema id {rows[12]['value_schema_id']}" in page and "&#34;tag&#34;: &#34;t12&#34;" in page


def test_mirroring_page_derives_the_flow_from_the_target(mirrored: Mirrored) -> None:
    status, body = mirrored.b.get("/mirroring")
    assert status == 200, body
    row = re.search(r'<tr class="flow">(.*?)</tr>', body, re.S)
    assert row is not None, body
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]
    assert cells[0] == "A-&gt;B"
    assert cells[1].endswith("ago")  # last heartbeat
    assert cells[2] == "0"  # lag: everything copied
    assert cells[4] != "-"  # last checkpoint
    assert f"A.{TOPIC}" in cells[5] and int(re.search(r"(\d+) offsets", cells[5]).group(1)) >= N  # type: ignore[union-attr]
    # the group committed on A, translated: offset 15 on A is at most offset.lag.max behind on B
    cp = re.search(r"<td><a href=\"/groups/app\">app</a></td><td>A\.users</td><td class=\"num\">0</td>\s*"
                   r"<td class=\"num\">15</td><td class=\"num\">(\d+)</td>", body)
    assert cp is not None, body
    assert int(cp.group(1)) <= 15 + N  # a downstream offset (with transaction markers)


def test_pages_without_a_registry_or_flows(console_broker: ConsoleBroker) -> None:
    status, body = console_broker.get("/schemas")
    assert status == 200 and 'id="no-registry"' in body
    status, body = console_broker.get("/mirroring")
    assert status == 200 and 'id="no-flows"' in body


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None, reason="needs Debian's chromium and chromium-driver")
def test_screenshots(mirrored: Mirrored, tmp_path: Path) -> None:
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    options = Options()
    assert CHROMIUM is not None and CHROMEDRIVER is not None
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--window-size=1280,1000", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    drv.set_page_load_timeout(30)
    try:
        url = mirrored.b.url
        for path, element, name in ((f"/schemas/{TOPIC}-value", "diff", "schemas-diff"), ("/schemas", "subjects", "schemas"),
                                    ("/mirroring", "flows", "mirroring")):
            drv.get(url + path)
            WebDriverWait(drv, 20).until(ec.visibility_of_element_located((By.ID, element)))
            drv.save_screenshot(str(tmp_path / f"{name}.png"))
            assert (tmp_path / f"{name}.png").stat().st_size > 5000
        drv.get(f"{url}/topics/A.{TOPIC}")
        offset = WebDriverWait(drv, 20).until(ec.visibility_of_element_located((By.ID, "browse-offset")))
        offset.clear()
        offset.send_keys("12")
        drv.find_element(By.ID, "browse-go").click()
        WebDriverWait(drv, 20).until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#records .decoded")))
        assert '"tag": "t12"' in drv.find_element(By.CSS_SELECTOR, "#records .decoded").text
        drv.save_screenshot(str(tmp_path / "messages-decoded.png"))
    finally:
        drv.quit()
