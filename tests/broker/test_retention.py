"""Retention runs in the broker's background task and applies topic configs to live logs."""

from __future__ import annotations

import time

import pytest

from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

from .wire import Wire, create, fetch_request, list_offsets_request, produce_request, req

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("fresh_broker", [{"log.retention.check.interval.ms": 200}], indirect=True)
def test_retention_by_size_and_time(fresh_broker: BrokerProcess) -> None:
    with Wire(fresh_broker.bootstrap_servers) as w:
        create(w, "ret", 1, {"segment.bytes": "2000", "retention.bytes": "4000"})
        for i in range(40):
            batch = build_batch([(None, b"%03d" % i + b"x" * 300, (), None)])
            r = w.call(produce_request("ret", 0, batch))
            assert int(r.responses[0].partition_responses[0].error_code) == 0

        def earliest() -> int:
            r = w.call(list_offsets_request("ret", {0: -2}))
            return int(r.topics[0].partitions[0].offset)

        deadline = time.monotonic() + 20
        while earliest() == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        start = earliest()
        assert start > 0
        r = w.call(fetch_request("ret", {0: 0}))
        assert int(r.responses[0].partitions[0].error_code) == 1  # OFFSET_OUT_OF_RANGE
        # time-based retention switched on for the live log with IncrementalAlterConfigs
        cfg = req(44, 1, "AlterableConfig", name="retention.ms", config_operation=0, value="1")
        res = req(
            44, 1, "AlterConfigsResource", resource_type=2, resource_name="ret", configs=(cfg,)
        )
        assert (
            int(w.call(req(44, 1, resources=(res,), validate_only=False)).responses[0].error_code)
            == 0
        )
        deadline = time.monotonic() + 20
        while earliest() < 39 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert earliest() >= 39
