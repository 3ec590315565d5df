"""Constants and request helpers of the admin tests (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DeleteRecords, ListOffsets) over the raw protocol, shared by
test_admin_apis.py and test_dynamic_broker_configs.py."""

from __future__ import annotations

import time
import uuid
from typing import Any

from odradek.protocol.records import build_batch

from .wire import Wire, fetch_request, list_offsets_request, ms, req

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
INT32_MIN = -(2**31)
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, GROUP_CONFIG = 1, 2, 3, 4, 5, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def describe(
    wire: Wire, rtype: int, name: str, version: int = 4, keys: tuple[str, ...] | None = None
) -> tuple[int, dict[str, Any]]:
    res = req(
        32, version, "DescribeConfigsResource", resource_type=rtype, resource_name=name,
        configuration_keys=keys,
    )  # fmt: skip
    r = wire.call(
        req(32, version, resources=(res,), include_synonyms=True, include_documentation=False)
    )
    result = r.results[0]
    return int(result.error_code), {c.name: c for c in result.configs}


def alter(
    wire: Wire, rtype: int, name: str, configs: dict[str, str | None], validate_only: bool = False
) -> tuple[int, str | None]:
    cfgs = tuple(req(33, 2, "AlterableConfig", name=k, value=v) for k, v in configs.items())
    res = req(33, 2, "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=cfgs)
    r = wire.call(req(33, 2, resources=(res,), validate_only=validate_only))
    return int(r.responses[0].error_code), r.responses[0].error_message


def incremental(
    wire: Wire, rtype: int, name: str, ops: list[tuple[str, int, str | None]], version: int = 1
) -> tuple[int, str | None]:
    cfgs = tuple(
        req(44, version, "AlterableConfig", name=k, config_operation=op, value=v)
        for k, op, v in ops
    )
    res = req(
        44, version, "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=cfgs
    )
    r = wire.call(req(44, version, resources=(res,), validate_only=False))
    return int(r.responses[0].error_code), r.responses[0].error_message


def produce_values(wire: Wire, topic: str, n: int, per_batch: int = 1) -> None:
    now = int(time.time() * 1000)
    for start in range(0, n, per_batch):
        data = build_batch(
            [(None, b"v%d" % i, (), now) for i in range(start, min(n, start + per_batch))]
        )
        tdata = req(
            0, 9, "TopicProduceData", name=topic,
            partition_data=(req(0, 9, "PartitionProduceData", index=0, records=data),),
        )  # fmt: skip
        r = wire.call(
            req(0, 9, transactional_id=None, acks=1, timeout=ms(5000), topic_data=(tdata,))
        )
        assert int(r.responses[0].partition_responses[0].error_code) == NONE


def delete_records(
    wire: Wire, topic: str, offsets: dict[int, int], version: int = 2
) -> dict[int, tuple[int, int]]:
    parts = tuple(
        req(21, version, "DeleteRecordsPartition", partition_index=p, offset=o)
        for p, o in offsets.items()
    )
    t = req(21, version, "DeleteRecordsTopic", name=topic, partitions=parts)
    r = wire.call(req(21, version, topics=(t,), timeout=ms(5000)))
    return {
        int(p.partition_index): (int(p.error_code), int(p.low_watermark))
        for p in r.topics[0].partitions
    }


def earliest_latest(wire: Wire, topic: str) -> tuple[int, int]:
    out = []
    for ts in (-2, -1):
        r = wire.call(list_offsets_request(topic, {0: ts}))
        p = r.topics[0].partitions[0]
        assert int(p.error_code) == NONE
        out.append(int(p.offset))
    return out[0], out[1]


def fetch_code(wire: Wire, topic: str, offset: int) -> int:
    r = wire.call(fetch_request(topic, {0: offset}))
    return int(r.responses[0].partitions[0].error_code)
