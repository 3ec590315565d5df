"""Record bytes go out either read into bytes (default) or with os.sendfile (ODRADEK_SENDFILE=1):
both must deliver exactly the stored batches."""

from __future__ import annotations

import os

import pytest

from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

from .wire import Wire, create, fetch_request, fetched_values, produce_request

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("sendfile", ["0", "1"])
def test_large_fetch_bytes_identical(sendfile: str) -> None:
    values = [os.urandom(50_000) for _ in range(40)]
    with BrokerProcess(env={"ODRADEK_SENDFILE": sendfile}) as b, Wire(b.bootstrap_servers) as w:
        create(w, "big", 2)
        for i, v in enumerate(values):
            r = w.call(produce_request("big", i % 2, build_batch([(None, v, (), None)])))
            assert int(r.responses[0].partition_responses[0].error_code) == 0
        for _ in range(3):
            r = w.call(fetch_request("big", {0: 0, 1: 0}, partition_max_bytes=10_000_000))
            got = {
                int(p.partition_index): fetched_values(p.records) for p in r.responses[0].partitions
            }
            assert got == {0: values[0::2], 1: values[1::2]}
