"""``odradek pipeline warehouse --schema-registry URL``: Avro values written with two compatible
schema versions land in typed Parquet columns (read back with pyarrow, not Spark), run as the
command a user types."""

from __future__ import annotations

import io
import json
import re
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.helpers import create_topic
from odradek.testing.process import BrokerProcess

from .conftest import produce

pytestmark = [pytest.mark.spark, pytest.mark.timeout(115)]

V1 = {"type": "record", "name": "View", "fields": [{"name": "page", "type": "string"}]}
V2 = {
    "type": "record",
    "name": "View",
    "fields": [
        {"name": "page", "type": "string"},
        {"name": "ms", "type": ["null", "long"], "default": None},
    ],
}
_REGISTRY_RE = re.compile(r"schema registry listening on (http://\S+)")


@pytest.fixture(scope="module")
def registry_broker() -> Iterator[tuple[BrokerProcess, str]]:
    process = BrokerProcess(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "num.partitions": 1,
            "schema.registry.listeners": "http://127.0.0.1:0",
        },
        log_level="info",
    )
    process.start()
    try:
        deadline = time.monotonic() + 30
        while not (m := _REGISTRY_RE.search(process.stderr_tail(1 << 20))):
            assert time.monotonic() < deadline, process.stderr_tail()
            time.sleep(0.05)
        yield process, m.group(1)
    finally:
        process.close()


def test_warehouse_command_writes_typed_parquet(
    registry_broker: tuple[BrokerProcess, str], tmp_path: Path
) -> None:
    import fastavro
    import pyarrow as pa
    import pyarrow.dataset as ds
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    broker, url = registry_broker
    bs = broker.bootstrap_servers
    client = SchemaRegistryClient({"url": url})
    ids = [client.register_schema("views-value", Schema(json.dumps(s), "AVRO")) for s in (V1, V2)]
    values = []
    for i in range(6):
        schema_id, schema = (ids[0], V1) if i % 2 == 0 else (ids[1], V2)
        value = {"page": f"/p{i}"} if i % 2 == 0 else {"page": f"/p{i}", "ms": i * 10}
        buf = io.BytesIO(struct.pack(">bI", 0, schema_id))
        buf.seek(5)
        fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
        values.append(buf.getvalue())
    create_topic(bs, "views", 1)
    produce(bs, "views", ((0, None, v, None, None) for v in values))
    out = tmp_path / "warehouse"
    run = subprocess.run(
        [sys.executable, "-m", "odradek", "pipeline", "warehouse", "-o", str(out),
         "--subscribe", "views", "-b", bs, "--schema-registry", url, "--master", "local[1]",
         "--no-progress"],
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "warehouse: 6 records loaded" in run.stdout
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert table.schema.field("value").type == pa.struct(
        [pa.field("page", pa.string()), pa.field("ms", pa.int64())]
    )
    rows = sorted(table.column("value").to_pylist(), key=lambda v: v["page"])
    assert rows == [{"page": f"/p{i}", "ms": None if i % 2 == 0 else i * 10} for i in range(6)]
    assert table.column("_corrupt_record").null_count == 6
