"""The schema registry inside a broker: registrations/s and lookups by id/s (with p50/p99), and
odradek.client.avro's serializer/deserializer against fastavro alone.

    .venv/bin/python bench/registry.py            # 500 registrations, 5000 lookups, 200k records
    .venv/bin/python bench/registry.py --quick

One ``odradek broker`` process with ``schema.registry.listeners`` on a free port; the client is
this process over one keep-alive HTTP connection (http.client), one request at a time:

* registrations: N distinct record schemas, each a new subject (``POST .../versions``): every one
  writes ``_schemas`` (acks=all) and waits for the registry's reader to apply it;
* lookups by id, uncached: ``GET /schemas/ids/{id}`` round trips to the registry;
* lookups by id, cached: ``SchemaRegistryClient.get_schema`` after the first fetch (what a
  deserializer pays per record);
* Avro: one record of 6 fields encoded/decoded R times with ``AvroSerializer``/
  ``AvroDeserializer`` (framing + cached id) against ``fastavro.schemaless_writer``/``reader``.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import re
import statistics
import time
from urllib.parse import urlsplit

import fastavro

from odradek.client.avro import AvroDeserializer, AvroSerializer, SchemaRegistryClient
from odradek.testing.process import BrokerProcess

RECORD = {
    "type": "record",
    "name": "Event",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "ok", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
VALUE = {
    "id": 123456789,
    "user": "someone@example.com",
    "amount": 12.5,
    "tags": ["a", "bb"],
    "ok": True,
    "note": None,
}


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def _timed(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None
) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    conn.request(method, path, body, {"Content-Type": "application/vnd.schemaregistry.v1+json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{method} {path}: {resp.status} {data!r}")
    return time.perf_counter() - t0, data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_reg, n_get, n_rec = (100, 1000, 20000) if args.quick else (500, 5000, 200000)

    broker = BrokerProcess({"schema.registry.listeners": "http://127.0.0.1:0"}, log_level="info")
    broker.start()
    try:
        deadline = time.monotonic() + 30
        while not (
            m := re.search(
                r"schema registry listening on (http://\S+)", broker.stderr_tail(1 << 20)
            )
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(broker.stderr_tail())
            time.sleep(0.05)
        url = m.group(1)
        u = urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        lat, ids = [], []
        t0 = time.perf_counter()
        for i in range(n_reg):
            schema = {**RECORD, "name": f"Event{i}"}
            dt, data = _timed(
                conn,
                "POST",
                f"/subjects/bench-{i}/versions",
                json.dumps({"schema": json.dumps(schema)}).encode(),
            )
            lat.append(dt)
            ids.append(json.loads(data)["id"])
        wall = time.perf_counter() - t0
        print(
            f"registrations: {n_reg / wall:8.0f}/s  p50 {_pct(lat, 0.5) * 1e3:.2f} ms  p99 {_pct(lat, 0.99) * 1e3:.2f} ms"
        )

        lat = []
        t0 = time.perf_counter()
        for i in range(n_get):
            dt, _data = _timed(conn, "GET", f"/schemas/ids/{ids[i % len(ids)]}")
            lat.append(dt)
        wall = time.perf_counter() - t0
        print(
            f"lookups by id, uncached: {n_get / wall:8.0f}/s  p50 {_pct(lat, 0.5) * 1e3:.2f} ms  p99 {_pct(lat, 0.99) * 1e3:.2f} ms"
        )

        client = SchemaRegistryClient(url)
        client.get_schema(ids[0])
        t0 = time.perf_counter()
        for _ in range(n_get * 100):
            client.get_schema(ids[0])
        wall = time.perf_counter() - t0
        print(f"lookups by id, cached: {n_get * 100 / wall:8.0f}/s")

        ser = AvroSerializer(client, RECORD, topic="bench")
        de = AvroDeserializer(client)
        parsed = fastavro.parse_schema(RECORD)
        data = ser(VALUE)
        rounds = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n_rec):
                ser(VALUE)
            t_ser = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(n_rec):
                buf = io.BytesIO()
                fastavro.schemaless_writer(buf, parsed, VALUE)
                buf.getvalue()
            t_fw = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(n_rec):
                de(data)
            t_de = time.perf_counter() - t0
            payload = data[5:]
            t0 = time.perf_counter()
            for _ in range(n_rec):
                fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)
            t_fr = time.perf_counter() - t0
            rounds.append((t_ser, t_fw, t_de, t_fr))
        med = [statistics.median(r[k] for r in rounds) for k in range(4)]
        print(
            f"serialize: {n_rec / med[0]:8.0f} rec/s (fastavro alone {n_rec / med[1]:8.0f})   "
            f"deserialize: {n_rec / med[2]:8.0f} rec/s (fastavro alone {n_rec / med[3]:8.0f})"
        )
    finally:
        broker.close()


if __name__ == "__main__":
    main()
