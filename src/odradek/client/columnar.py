"""Fetched record batches straight into Arrow: no Python object per record.

``records_to_arrow(topic, partition, data)`` decodes the v2 batches in ``data`` (the bytes of a
Fetch response partition, or of a log segment) into one ``pyarrow.RecordBatch`` with Spark's
Kafka source schema::

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us, UTC], timestampType int32
    (+ headers list<struct<key: string, value: binary>> when include_headers)

Rows: records with start_offset <= offset < end_offset; control batches are skipped; compressed
batches are decompressed. The compiled twin (``_speedups.columnar``) fills the Arrow buffers in
C; the pure-Python fallback fills the same buffers (``array``/``bytearray``) record by record.
``topic`` and ``partition`` columns are run-end/dictionary-free constants built once.
"""

from __future__ import annotations

import struct
from array import array
from typing import Any

import pyarrow as pa

from odradek.protocol.records import BATCH_HEADER_SIZE, decompress, iter_batch_headers, iter_records

try:
    from . import _speedups  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _speedups = None

__all__ = ["SCHEMA", "SCHEMA_WITH_HEADERS", "records_to_arrow", "records_to_arrow_python"]

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
SCHEMA = pa.schema(_FIELDS)
SCHEMA_WITH_HEADERS = pa.schema([*_FIELDS, pa.field("headers", HEADER_TYPE)])
_MAX = (1 << 63) - 1


class _BinCol:
    __slots__ = ("data", "n", "nulls", "offsets", "validity")

    def __init__(self) -> None:
        self.offsets = array("i", [0])
        self.data = bytearray()
        self.validity = bytearray()
        self.nulls = 0
        self.n = 0

    def push(self, b: bytes | memoryview | None) -> None:
        n = self.n
        if n & 7 == 0:
            self.validity.append(0)
        if b is None:
            self.nulls += 1
        else:
            self.data += b
            self.validity[n >> 3] |= 1 << (n & 7)
        self.offsets.append(len(self.data))
        self.n = n + 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "offsets": self.offsets.tobytes(),
            "data": bytes(self.data),
            "validity": bytes(self.validity),
            "null_count": self.nulls,
            "length": self.n,
        }


def _columnar_python(data: bytes | memoryview, start: int, end: int, include_headers: bool) -> dict[str, Any]:
    """Pure-Python twin of ``_speedups.columnar``: same dict of buffers."""
    buf = bytes(data)
    key, val, hkey, hval = _BinCol(), _BinCol(), _BinCol(), _BinCol()
    offs = array("q")
    tss = array("q")
    tst = array("i")
    hlist = array("i", [0])
    nheaders = 0
    next_offset = start
    for pos, h in iter_batch_headers(buf):
        base_offset, blen, _ep, magic, _crc, attrs, last_delta, base_ts, max_ts, _pid, _pe, _bs, count = h
        if base_offset >= end:
            break
        if base_offset + last_delta < start:
            continue
        next_offset = base_offset + last_delta + 1
        if magic != 2:
            raise ValueError("unsupported record batch magic")
        if attrs & 0x20:
            continue
        codec = attrs & 7
        tstype = (attrs >> 3) & 1
        body = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + 12 + blen]
        rec = decompress(codec, body) if codec else bytes(body)
        for offset, timestamp, k, v, headers in iter_records(rec, count, base_offset, base_ts, max_ts if tstype else None):
            if offset < start or offset >= end:
                continue
            key.push(k)
            val.push(v)
            offs.append(offset)
            tss.append(timestamp * 1000)
            tst.append(tstype)
            if include_headers:
                for hk, hv in headers:
                    hkey.push(hk.encode())
                    hval.push(hv)
                nheaders += len(headers)
                hlist.append(nheaders)
    out: dict[str, Any] = {
        "rows": len(offs),
        "next_offset": next_offset,
        "key": key.as_dict(),
        "value": val.as_dict(),
        "offset": offs.tobytes(),
        "timestamp": tss.tobytes(),
        "timestamp_type": tst.tobytes(),
    }
    if include_headers:
        out["headers"] = {"list_offsets": hlist.tobytes(), "key": hkey.as_dict(), "value": hval.as_dict()}
    return out


def _binary(col: dict[str, Any], typ: pa.DataType = pa.binary()) -> pa.Array:
    n = col["length"]
    validity = pa.py_buffer(col["validity"]) if col["null_count"] else None
    return pa.Array.from_buffers(
        typ, n, [validity, pa.py_buffer(col["offsets"]), pa.py_buffer(col["data"])], null_count=col["null_count"]
    )


def _to_batch(topic: str, partition: int, cols: dict[str, Any], include_headers: bool) -> pa.RecordBatch:
    n = cols["rows"]
    arrays = [
        _binary(cols["key"]),
        _binary(cols["value"]),
        _constant_string(topic, n),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(struct.pack("<i", partition) * n)]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols["offset"])]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(cols["timestamp"])]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(cols["timestamp_type"])]),
    ]
    schema = SCHEMA
    if include_headers:
        h = cols["headers"]
        hk = _binary(h["key"], pa.string())
        hv = _binary(h["value"])
        structs = pa.StructArray.from_arrays([hk, hv], fields=list(HEADER_TYPE.value_type))
        arrays.append(pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(h["list_offsets"])]), structs))
        schema = SCHEMA_WITH_HEADERS
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_TOPIC_CACHE: dict[tuple[str, int], pa.Array] = {}


def _constant_string(s: str, n: int) -> pa.Array:
    b = s.encode()
    if _speedups is not None:
        offsets: Any = _speedups.iota32(n, len(b))
    else:
        offsets = array("i", range(0, len(b) * (n + 1), len(b))) if b else array("i", [0] * (n + 1))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b * n)])


def decode_columns(
    data: bytes | memoryview, start_offset: int = 0, end_offset: int | None = None, include_headers: bool = False, *, python: bool = False
) -> dict[str, Any]:
    """The raw column buffers (see module docstring) plus ``rows`` and ``next_offset``."""
    end = _MAX if end_offset is None else end_offset
    if _speedups is not None and not python:
        return _speedups.columnar(data, start_offset, end, include_headers, decompress)  # type: ignore[no-any-return,unused-ignore]
    return _columnar_python(data, start_offset, end, include_headers)


def records_to_arrow(
    topic: str,
    partition: int,
    data: bytes | memoryview,
    *,
    include_headers: bool = False,
    start_offset: int = 0,
    end_offset: int | None = None,
) -> pa.RecordBatch:
    """Decode the v2 record batches in ``data`` into one Arrow RecordBatch (schema above)."""
    cols = decode_columns(data, start_offset, end_offset, include_headers)
    return _to_batch(topic, partition, cols, include_headers)


def records_to_arrow_python(
    topic: str,
    partition: int,
    data: bytes | memoryview,
    *,
    include_headers: bool = False,
    start_offset: int = 0,
    end_offset: int | None = None,
) -> pa.RecordBatch:
    """``records_to_arrow`` with the pure-Python decoder (for tests and builds without gcc)."""
    cols = decode_columns(data, start_offset, end_offset, include_headers, python=True)
    return _to_batch(topic, partition, cols, include_headers)


def next_offset_after(data: bytes | memoryview, start_offset: int) -> int:
    """Offset after the last whole batch in ``data`` (``start_offset`` when there is none)."""
    nxt = start_offset
    for _pos, h in iter_batch_headers(data):
        nxt = max(nxt, h[0] + h[6] + 1)
    return nxt
