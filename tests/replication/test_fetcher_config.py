"""FetcherConfig takes its values from ReplicationConfig, which alone holds Kafka's defaults."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.broker.replica_fetcher import FetcherConfig
from odradek.broker.replica_manager import ReplicationConfig


def test_fetcher_config_reads_the_replication_settings() -> None:
    r = ReplicationConfig(
        replica_fetch_wait_max_ms=11,
        replica_fetch_min_bytes=12,
        replica_fetch_max_bytes=13,
        replica_fetch_response_max_bytes=14,
        replica_fetch_backoff_ms=15,
        replica_socket_timeout_ms=16,
    )
    assert FetcherConfig.from_replication(r) == FetcherConfig(11, 12, 13, 14, 15, 16)
    defaults = FetcherConfig.from_replication(ReplicationConfig())
    assert (defaults.max_wait_ms, defaults.backoff_ms, defaults.socket_timeout_ms) == (
        500,
        1000,
        30_000,
    )


def test_fetcher_config_repeats_no_default() -> None:
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(FetcherConfig))
    with pytest.raises(TypeError):
        FetcherConfig()  # type: ignore[call-arg]
