"""The streaming source's ``commitOffsetsToGroup``: its progress shows as a consumer group's lag.

The stream reader is driven directly (what Spark's micro-batch engine calls), against a real
broker; the lag is read back with ``odradek groups describe`` (a separate process).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from odradek.testing.helpers import create_topic

from .conftest import BROKER_SETTINGS as BROKER_SETTINGS
from .conftest import produce

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]


def test_stream_reader_commits_progress_to_group(broker: Any) -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from odradek.client import Admin, TopicPartition
    from odradek.spark.options import OptionError, parse_source_options
    from odradek.spark.source import OdradekStreamReader

    bs = str(broker.bootstrap_servers)
    create_topic(bs, "lagged", 2)
    produce(bs, "lagged", ((i % 2, None, b"x", None, None) for i in range(40)))
    base = {"kafka.bootstrap.servers": bs, "subscribe": "lagged", "startingOffsets": "earliest"}
    with pytest.raises(OptionError, match="commitOffsetsToGroup"):
        parse_source_options({**base, "commitOffsetsToGroup": " "}, streaming=True)
    with pytest.raises(OptionError, match="commitOffsetsToGroup"):
        parse_source_options({**base, "commitOffsetsToGroup": "g"}, streaming=False)
    opts = parse_source_options({**base, "commitOffsetsToGroup": "spark-lag"}, streaming=True)
    r = OdradekStreamReader(opts)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadMaxRows(10))
    assert end == {"lagged": {"0": 5, "1": 5}}
    r.commit(end)
    with Admin({"bootstrap.servers": bs}) as admin:
        got = admin.list_group_offsets("spark-lag")
    assert {tp: m.offset for tp, m in got.items() if m is not None} == {
        TopicPartition("lagged", 0): 5,
        TopicPartition("lagged", 1): 5,
    }
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "groups", "describe", "spark-lag", "--bootstrap-server", bs],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith("lagged")]
    assert sorted((r[1], r[2], r[3], r[4]) for r in rows) == [("0", "5", "20", "15"), ("1", "5", "20", "15")]
    # without the option nothing is committed
    plain = OdradekStreamReader(parse_source_options(base, streaming=True))
    plain.commit(end)
