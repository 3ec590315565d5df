"""The pipelines end to end on small data: warehouse loader, audit, derived feed (+ CLI)."""

from __future__ import annotations

import io
import json
import struct
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from odradek.testing.helpers import create_topic, wait_until

from .conftest import BROKER_SETTINGS as BROKER_SETTINGS
from .conftest import produce

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]

MINUTE = 60_000
HOUR = 3_600_000
# A recent UTC midnight: records around it fall on two dates and two hours.
MIDNIGHT = (int(time.time() * 1000) // 86_400_000) * 86_400_000
if int(time.time() * 1000) - MIDNIGHT < 2 * HOUR:  # keep every timestamp in the past
    MIDNIGHT -= 86_400_000


@pytest.fixture(scope="module")
def bs(spark_broker: Any) -> str:
    return str(spark_broker.bootstrap_servers)


def _date(ms: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))


def test_warehouse_json_partitioned_by_date_and_hour_exactly_once(
    spark: Any, bs: str, tmp_path: Path, faults_dir: Path
) -> None:
    from odradek.pipelines.warehouse import build_warehouse_query

    create_topic(bs, "wh-json", 2)
    stamps = [MIDNIGHT - 30 * MINUTE + i * MINUTE for i in range(60)]  # 23:30 .. 00:29

    def batch(start: int, stop: int) -> list[Any]:
        return [
            (i % 2, None, json.dumps({"page": f"/p{i % 5}", "n": i}).encode(), None, stamps[i])
            for i in range(start, stop)
        ]

    produce(bs, "wh-json", batch(0, 40))
    out = tmp_path / "wh"

    def run() -> int:
        q = build_warehouse_query(
            spark,
            bootstrap_servers=bs,
            output=out,
            subscribe="wh-json",
            value_format="json",
            value_schema="page string, n long",
        )
        q.awaitTermination(120)
        return sum(p["numInputRows"] for p in q.recentProgress)

    assert run() == 40
    produce(bs, "wh-json", batch(40, 60))
    # a crash in the middle of the next micro-batch: partition 1's task fails, partition 0's
    # may already have written its file; the rerun replays the batch from the checkpoint
    (faults_dir / "read-wh-json-1-20").touch()
    with pytest.raises(Exception, match="injected fault"):
        run()
    assert run() == 20
    assert run() == 0
    assert (out / "_checkpoint" / "offsets").is_dir() and (out / "_spark_metadata").is_dir()
    before, after = _date(MIDNIGHT - 1), _date(MIDNIGHT)
    assert (out / "topic=wh-json" / f"date={before}" / "hour=23").is_dir()
    assert (out / "topic=wh-json" / f"date={after}" / "hour=0").is_dir()
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.data.n for r in rows) == list(range(60))
    for r in rows:
        ts = stamps[r.data.n]
        assert str(r.date) == _date(ts) and r.hour == (ts // HOUR) % 24
        assert r.data.page == f"/p{r.data.n % 5}"


def test_warehouse_avro_with_schema_id_prefix(spark: Any, bs: str, tmp_path: Path) -> None:
    import fastavro

    from odradek.pipelines.warehouse import build_warehouse_query

    schema = {
        "type": "record",
        "name": "View",
        "fields": [{"name": "page", "type": "string"}, {"name": "ms", "type": "long"}],
    }
    parsed = fastavro.parse_schema(schema)

    def encode(rec: dict[str, Any]) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        return b"\x00" + struct.pack(">i", 7) + buf.getvalue()

    create_topic(bs, "wh-avro", 1)
    now = int(time.time() * 1000) - HOUR
    produce(
        bs,
        "wh-avro",
        [(0, None, encode({"page": f"/a{i}", "ms": i}), None, now) for i in range(25)],
    )
    q = build_warehouse_query(
        spark,
        bootstrap_servers=bs,
        output=tmp_path / "wh",
        subscribe="wh-avro",
        value_format="avro",
        value_schema="page string, ms long",
        avro_schemas={7: schema},
    )
    q.awaitTermination(120)
    assert q.exception() is None
    rows = spark.read.parquet(str(tmp_path / "wh")).collect()
    assert sorted((r.schema_id, r.data.page, r.data.ms) for r in rows) == sorted(
        (7, f"/a{i}", i) for i in range(25)
    )


class DroppingProducer:
    """Wraps a producer and silently loses the records of one window (the failure audited)."""

    def __init__(self, inner: Any, drop_window: int, window_ms: int) -> None:
        self.inner, self.drop_window, self.window_ms = inner, drop_window, window_ms
        self.dropped = 0

    def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        headers: Any = None,
        partition: Any = None,
        timestamp: int | None = None,
    ) -> Any:
        if timestamp is not None and timestamp - timestamp % self.window_ms == self.drop_window:
            self.dropped += 1
            return None
        return self.inner.send(
            topic, value, key=key, headers=headers, partition=partition, timestamp=timestamp
        )

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        if hasattr(self.inner, "close"):
            self.inner.close()


def test_audit_detects_a_dropped_window_and_extra_records(spark: Any, bs: str) -> None:
    from typer.testing import CliRunner

    from odradek.cli.pipeline import app
    from odradek.pipelines.audit import AuditingProducer, audit_rows, run_audit
    from odradek.spark import _client

    create_topic(bs, "orders", 2)
    create_topic(bs, "odradek-audit", 1)
    w0 = (int(time.time() * 1000) - HOUR) // MINUTE * MINUTE
    config = {"bootstrap.servers": bs}
    inner = _client.client_module().Producer(config)
    dropping = DroppingProducer(inner, w0 + MINUTE, MINUTE)
    producer = AuditingProducer(
        dropping,
        audit_producer=_client.client_module().Producer(config),
        window_ms=MINUTE,
        producer_host="web-1",
        now_ms=lambda: w0 + 10 * MINUTE,
    )
    for i in range(90):  # 30 records in each of the windows w0, w0+1m, w0+2m
        producer.send(
            "orders", f"o{i}".encode(), partition=i % 2, timestamp=w0 + (i // 30) * MINUTE + i
        )
    published = producer.publish()
    assert {(r.window_start_ms, r.count) for r in published} == {
        (w0, 30),
        (w0 + MINUTE, 30),
        (w0 + 2 * MINUTE, 30),
    }
    producer.close()
    assert dropping.dropped == 30
    # 4 records nobody audited, in window w0+2m: "extra"
    produce(bs, "orders", [(0, None, b"stray", None, w0 + 2 * MINUTE + 500) for _ in range(4)])
    rows = audit_rows(run_audit(spark, bootstrap_servers=bs, topics=["orders"], window_ms=MINUTE))
    got = {r["window_start_ms"]: (r["expected"], r["actual"], r["status"]) for r in rows}
    assert got == {
        w0: (30, 30, "complete"),
        w0 + MINUTE: (30, 0, "missing"),
        w0 + 2 * MINUTE: (30, 34, "extra"),
    }
    assert all(r["hosts"] == ["web-1"] for r in rows)
    result = CliRunner().invoke(
        app, ["audit", "-b", bs, "--topics", "orders", "--window", "1m", "--json"]
    )
    assert result.exit_code == 1, result.output
    lines = [json.loads(x) for x in result.stdout.splitlines() if x.startswith("{")]
    assert [x["status"] for x in lines] == ["complete", "missing", "extra"]


def test_derived_page_views_per_minute(spark: Any, bs: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from odradek.cli.pipeline import app

    create_topic(bs, "activity", 2)
    create_topic(bs, "page-views", 1)
    m0 = (int(time.time() * 1000) - HOUR) // MINUTE * MINUTE
    events = []
    expected: Counter[tuple[str, int]] = Counter()
    for i in range(120):
        minute = i % 3
        page = f"/p{i % 4}"
        ts = m0 + minute * MINUTE + (i * 397) % MINUTE
        events.append(
            (
                i % 2,
                None,
                json.dumps({"page": page, "user": f"u{i}", "ts": ts}).encode(),
                None,
                None,
            )
        )
        expected[(page, m0 + minute * MINUTE)] += 1
    # an event 5 minutes later moves the watermark past the first three windows
    events.append(
        (0, None, json.dumps({"page": "/late", "ts": m0 + 5 * MINUTE}).encode(), None, None)
    )
    produce(bs, "activity", events)

    def run() -> None:
        result = CliRunner().invoke(
            app,
            [
                "page-views",
                "-b",
                bs,
                "--source",
                "activity",
                "--sink",
                "page-views",
                "--checkpoint",
                str(tmp_path / "ckpt"),
            ],
        )
        assert result.exit_code == 0, result.output

    def derived() -> list[dict[str, Any]]:
        df = (
            spark.read.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "page-views")
            .load()
        )
        return [json.loads(r.value) | {"_key": r.key.decode()} for r in df.collect()]

    run()
    out = derived()
    if not out:  # the watermark moved at the end of the run: the next run emits
        run()
        out = derived()
    got = Counter()
    for d in out:
        assert d["_key"] == d["page"]
        got[(d["page"], d["window_start_ms"])] += d["views"]
    assert got == expected
    assert len(out) == len(expected)  # each window once
    run()  # a rerun emits nothing new
    assert len(derived()) == len(expected)


def test_warehouse_continuous_picks_up_new_records(spark: Any, bs: str, tmp_path: Path) -> None:
    from odradek.pipelines.warehouse import build_warehouse_query

    create_topic(bs, "wh-cont", 1)
    out = tmp_path / "wh"
    q = build_warehouse_query(
        spark,
        bootstrap_servers=bs,
        output=out,
        subscribe="wh-cont",
        trigger="continuous",
        interval="1 second",
    )

    def loaded() -> int:
        if not (out / "_spark_metadata").is_dir():
            return 0
        try:
            return int(spark.read.parquet(str(out)).count())
        except Exception:  # no committed file yet
            return 0

    try:
        produce(bs, "wh-cont", [(0, None, f"c{i}".encode(), None, None) for i in range(10)])
        wait_until(lambda: loaded() == 10, 60, "the first 10 records in Parquet")
        produce(bs, "wh-cont", [(0, None, f"d{i}".encode(), None, None) for i in range(15)])
        wait_until(lambda: loaded() == 25, 60, "all 25 records in Parquet")
        assert q.isActive
    finally:
        q.stop()
    assert loaded() == 25
