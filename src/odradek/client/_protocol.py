"""The client's request side of the protocol: which versions it speaks, and building requests.

Requests are kio dataclasses built for the version negotiated with each broker; ``build``
constructs one from keyword arguments, dropping fields the chosen version does not have and
converting ints to ``timedelta`` for Kafka's duration fields, so one call site serves every
version.

Framing and codecs are odradek.protocol's, shared with the broker: request frames from
``odradek.protocol.messages.encode_request`` (headers: ``odradek.protocol.headers``), responses
through ``messages.decode_response``, and Produce requests, the hot path, from
``odradek.protocol.produce_request_encoder.encode_produce_request`` (record bytes not copied);
this module re-exports those names.
"""

from __future__ import annotations

import dataclasses
import datetime
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.produce_request_encoder import encode_produce_request

__all__ = [
    "API_KEYS",
    "CLIENT_VERSIONS",
    "build",
    "decode_api_versions_fallback",
    "decode_response",
    "encode_produce_request",
    "encode_request",
    "nested",
    "request_module",
]

API_KEYS = {
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "Metadata": 3,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "Heartbeat": 12,
    "LeaveGroup": 13,
    "SyncGroup": 14,
    "DescribeGroups": 15,
    "ListGroups": 16,
    "ApiVersions": 18,
    "CreateTopics": 19,
    "DeleteTopics": 20,
    "InitProducerId": 22,
    "DescribeAcls": 29,
    "CreateAcls": 30,
    "DeleteAcls": 31,
    "AddPartitionsToTxn": 24,
    "AddOffsetsToTxn": 25,
    "EndTxn": 26,
    "TxnOffsetCommit": 28,
    "DescribeConfigs": 32,
    "AlterConfigs": 33,
    "CreatePartitions": 37,
    "DeleteGroups": 42,
    "IncrementalAlterConfigs": 44,
    "OffsetDelete": 47,
    "ListClientMetricsResources": 74,
}

# (min, max) version this client can speak for each API key. The negotiated version is the
# highest one both the broker (ApiVersions) and this table allow.
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 9),  # Produce (v3+: record batch v2; hand-written encoder)
    1: (4, 12),  # Fetch (v13+ addresses topics by id)
    2: (1, 7),  # ListOffsets
    3: (1, 12),  # Metadata
    8: (2, 8),  # OffsetCommit
    9: (1, 7),  # OffsetFetch (v8+ batches groups)
    10: (0, 3),  # FindCoordinator (v4+ batches keys)
    11: (0, 7),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 4),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 4),  # ListGroups
    18: (0, 3),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 5),  # DeleteTopics (v6 uses topic ids)
    22: (0, 4),  # InitProducerId
    24: (0, 3),  # AddPartitionsToTxn (v4+ batches transactional ids: brokers only)
    25: (0, 3),  # AddOffsetsToTxn
    26: (0, 3),  # EndTxn (v5: KIP-890 epoch bump per transaction, not used)
    28: (0, 3),  # TxnOffsetCommit
    29: (1, 3),  # DescribeAcls (v1+: pattern types, KIP-290)
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    47: (0, 0),  # OffsetDelete
    74: (0, 0),  # ListClientMetricsResources (KIP-714; kio's ListConfigResources v0)
}

@cache
def request_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.request)


@cache
def _fields(cls: type) -> dict[str, tuple[str, bool]]:
    """field name -> (kafka_type, required)."""
    out = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out[f.name] = (f.metadata.get("kafka_type", ""), required)
    return out


def build(cls: type, /, **kwargs: Any) -> Any:
    """Construct kio entity ``cls`` from ``kwargs``, dropping keys the class does not have.

    ints given for ``timedelta_*`` fields are milliseconds. A nested field may be given as a
    list of dicts: each is built with the nested class of the same version (resolved via the
    field's type annotation name in the module of ``cls``).
    """
    fields = _fields(cls)
    args = {}
    for name, value in kwargs.items():
        if name not in fields:
            continue
        ktype = fields[name][0]
        if ktype.startswith("timedelta") and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        elif ktype == "datetime_i64" and isinstance(value, int):
            value = datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
        elif isinstance(value, list):
            value = tuple(value)
        args[name] = value
    return cls(**args)


def nested(mod: ModuleType, cls_name: str, /, **kwargs: Any) -> Any:
    return build(getattr(mod, cls_name), **kwargs)


def decode_api_versions_fallback(frame: bytes | memoryview) -> Any:
    """An ApiVersions answer to an unsupported version is in v0 format (``frame``: after the
    size prefix, header included)."""
    return decode_response(18, 0, frame, header=True)
