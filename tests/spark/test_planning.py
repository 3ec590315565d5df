"""Option parsing and offset planning of the odradek Spark source: pure, no Spark, no broker."""

from __future__ import annotations

import itertools
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.options import (
    OffsetSpec,
    OptionError,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)
from odradek.spark.planning import (
    DataLoss,
    OffsetRange,
    apply_rate_limit,
    check_data_loss,
    offset_queries,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    resolve_offsets,
    split_ranges,
)

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def src(streaming: bool | None = False, **kw: str):
    return parse_source_options({**BS, **kw}, streaming=streaming)


# -- options ---------------------------------------------------------------------------------
def test_defaults_batch_and_streaming() -> None:
    b = src(subscribe="a,b")
    assert b.subscribe == ("a", "b")
    assert b.starting == OffsetSpec("earliest") and b.ending == OffsetSpec("latest")
    assert b.fail_on_data_loss and not b.include_headers
    s = src(True, subscribePattern="ev.*")
    assert s.starting == OffsetSpec("latest") and s.subscribe_pattern == "ev.*"
    assert s.matches("events") and not s.matches("xevents")


def test_kafka_prefix_is_stripped_into_client_config() -> None:
    o = src(subscribe="a", **{"kafka.client.id": "x", "KAFKA.Linger.Ms": "5"})
    assert o.config == {"bootstrap.servers": "127.0.0.1:9092", "client.id": "x", "linger.ms": "5",
                        "isolation.level": "read_committed"}
    pickle.loads(pickle.dumps(o))


def test_isolation_level_defaults_to_read_committed() -> None:
    assert src(subscribe="a").read_committed
    o = src(subscribe="a", **{"kafka.isolation.level": "READ_UNCOMMITTED"})
    assert not o.read_committed and o.config["isolation.level"] == "read_uncommitted"
    with pytest.raises(OptionError, match=r"kafka\.isolation\.level"):
        src(subscribe="a", **{"kafka.isolation.level": "snapshot"})
    assert src(True, subscribe="a", commitOffsetsToGroup=" g ").commit_offsets_to_group == "g"
    with pytest.raises(OptionError, match="commitOffsetsToGroup"):
        src(False, subscribe="a", commitOffsetsToGroup="g")


@pytest.mark.parametrize(
    ("opts", "streaming", "names"),
    [
        ({"subscribe": "a", "kafka.bootstrap.servers": ""}, False, "kafka.bootstrap.servers"),
        ({}, False, "subscribe"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, False, "assign"),
        ({"assign": "[0]"}, False, "assign"),
        ({"subscribePattern": "("}, False, "subscribePattern"),
        ({"subscribe": "a", "startingOffsets": "bogus"}, False, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": "latest"}, False, "startingOffsets"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, False, "endingOffsets"),
        ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False, "endingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a":{"x":1}}'}, False, "startingOffsets"),
        ({"subscribe": "a", "endingOffsets": "latest"}, True, "endingOffsets"),
        ({"subscribe": "a", "endingTimestamp": "5"}, True, "endingTimestamp"),
        ({"subscribe": "a", "startingTimestamp": "soon"}, False, "startingTimestamp"),
        (
            {"subscribe": "a", "startingOffsetsByTimestamp": "{}"},
            False,
            "startingOffsetsByTimestamp",
        ),
        (
            {"subscribe": "a", "startingOffsetsByTimestampStrategy": "x"},
            False,
            "startingOffsetsByTimestampStrategy",
        ),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, False, "failOnDataLoss"),
        ({"subscribe": "a", "includeHeaders": "1"}, False, "includeHeaders"),
        ({"subscribe": "a", "minPartitions": "0"}, False, "minPartitions"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "-3"}, True, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "10"}, False, "maxOffsetsPerTrigger"),
        (
            {"subscribe": "a", "maxOffsetsPerTrigger": "10", "minOffsetsPerTrigger": "20"},
            True,
            "minOffsetsPerTrigger",
        ),
        ({"subscribe": "a", "maxTriggerDelay": "5 fortnights"}, True, "maxTriggerDelay"),
        (
            {"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
            False,
            "kafka.auto.offset.reset",
        ),
        ({"subscribe": "a", "kafka.value.deserializer": "x"}, False, "kafka.value.deserializer"),
        ({"subscribe": "a", "subscirbe": "typo"}, False, "subscirbe"),
    ],
)
def test_invalid_options_name_the_option(opts: dict, streaming: bool, names: str) -> None:
    with pytest.raises(OptionError) as ei:
        parse_source_options({**BS, **opts}, streaming=streaming)
    assert names.lower() in str(ei.value).lower()


def test_offset_specs() -> None:
    o = src(
        subscribe="a", startingOffsets='{"a":{"0":5,"1":-2}}', endingOffsets='{"a":{"0":-1,"1":9}}'
    )
    assert o.starting.as_dict() == {("a", 0): 5, ("a", 1): -2}
    assert o.ending.as_dict() == {("a", 0): -1, ("a", 1): 9}
    # precedence: startingTimestamp > startingOffsetsByTimestamp > startingOffsets
    o = src(
        subscribe="a",
        startingTimestamp="100",
        startingOffsetsByTimestamp='{"a":{"0":1}}',
        startingOffsets="earliest",
    )
    assert o.starting == OffsetSpec("timestamp", timestamp=100)
    o = src(
        subscribe="a",
        startingOffsetsByTimestamp='{"a":{"0":1}}',
        startingOffsets="earliest",
        startingOffsetsByTimestampStrategy="latest",
    )
    assert o.starting.kind == "timestamps" and o.starting.strategy == "latest"
    o = src(subscribe="a", endingTimestamp="7")
    assert o.ending == OffsetSpec("timestamp", timestamp=7)
    # schema() at load(): mode-neutral checks only
    assert src(None, subscribe="a", startingOffsets="latest").starting == OffsetSpec("latest")
    assert src(None, subscribe="a", endingOffsets="latest").ending == OffsetSpec("latest")


def test_assign_and_durations() -> None:
    o = src(assign='{"b":[2,0],"a":[1]}')
    assert o.assign == (("a", 1), ("b", 0), ("b", 2))
    assert parse_duration_ms("d", "15m") == 900_000
    assert parse_duration_ms("d", "30 seconds") == 30_000
    assert parse_duration_ms("d", "250") == 250


def test_sink_options() -> None:
    s = parse_sink_options({**BS, "topic": "out"})
    assert s.topic == "out" and s.exactly_once and s.commit_topic == "__odradek_sink_commits"
    with pytest.raises(OptionError, match=r"kafka\.key\.serializer"):
        parse_sink_options({**BS, "kafka.key.serializer": "x"})
    with pytest.raises(OptionError, match="exactlyOnce"):
        parse_sink_options({**BS, "exactlyOnce": "yes"})
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers"):
        parse_sink_options({"topic": "x"})


# -- planning --------------------------------------------------------------------------------
def test_offsets_json_roundtrip() -> None:
    offs = {("a", 0): 5, ("a", 10): 7, ("b", 1): 0}
    j = offsets_to_json(offs)
    assert j == {"a": {"0": 5, "10": 7}, "b": {"1": 0}}
    assert offsets_from_json(j) == offs


def test_offset_queries_and_resolution() -> None:
    parts = [("a", 0), ("a", 1)]
    spec = OffsetSpec("offsets", per_partition=(("a", 0, 5), ("a", 1, -2)))
    known, queries = offset_queries(spec, parts, option="startingOffsets", strict=True)
    assert known == {("a", 0): 5} and queries == {("a", 1): "earliest"}
    with pytest.raises(ValueError, match="no value for a-1"):
        offset_queries(
            OffsetSpec("offsets", per_partition=(("a", 0, 5),)),
            parts,
            option="startingOffsets",
            strict=True,
        )
    known, queries = offset_queries(
        OffsetSpec("offsets", per_partition=(("a", 0, 5),)),
        parts,
        option="startingOffsets",
        strict=False,
    )
    assert queries == {("a", 1): "earliest"}
    with pytest.raises(ValueError, match="x-0 is not a partition"):
        offset_queries(
            OffsetSpec("offsets", per_partition=(("x", 0, 1),)),
            parts,
            option="startingOffsets",
            strict=True,
        )
    _, q = offset_queries(OffsetSpec("timestamp", timestamp=99), parts, option="s", strict=True)
    assert q == {("a", 0): 99, ("a", 1): 99}
    latest = {("a", 0): 10, ("a", 1): 20}
    assert resolve_offsets(
        {}, q, {("a", 0): 3, ("a", 1): -1}, latest, option="s", strategy="latest"
    ) == {("a", 0): 3, ("a", 1): 20}
    with pytest.raises(ValueError, match="startingTimestamp"):
        resolve_offsets({}, q, {("a", 0): 3, ("a", 1): -1}, latest, option="startingTimestamp")


def test_data_loss_detection() -> None:
    adjusted, problems = check_data_loss(
        {("a", 0): 5, ("a", 1): 50, ("a", 2): 3, ("gone", 0): 1},
        {("a", 0): 10, ("a", 1): 0, ("a", 2): 0},
        {("a", 0): 20, ("a", 1): 30, ("a", 2): 9},
    )
    assert adjusted == {("a", 0): 10, ("a", 1): 0, ("a", 2): 3}
    assert len(problems) == 3
    assert any("a-0 from offset 5" in p and "skipping 5" in p for p in problems)
    assert "failOnDataLoss" in str(DataLoss("x"))


def test_plan_and_split_like_kafka() -> None:
    ranges = plan_ranges({("a", 0): 0, ("a", 1): 10}, {("a", 0): 100, ("a", 1): 10, ("a", 2): 5})
    assert ranges == [OffsetRange("a", 0, 0, 100), OffsetRange("a", 2, 0, 5)]
    split = split_ranges(ranges, min_partitions=10)
    assert [r for r in split if r.partition == 2] == [OffsetRange("a", 2, 0, 5)]
    assert len([r for r in split if r.partition == 0]) == 10
    assert split_ranges(ranges, min_partitions=2) == ranges
    capped = split_ranges([OffsetRange("a", 0, 0, 10)], max_records_per_partition=4)
    assert [(r.start, r.end) for r in capped] == [(0, 3), (3, 6), (6, 10)]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=8),
    st.integers(1, 50),
)
def test_split_covers_every_offset_once(spans: list[tuple[int, int]], min_partitions: int) -> None:
    ranges = [OffsetRange("t", i, s, s + n) for i, (s, n) in enumerate(spans)]
    out = split_ranges(ranges, min_partitions)
    for r in ranges:
        pieces = [x for x in out if x.partition == r.partition]
        assert sum(x.size for x in pieces) == r.size
        if pieces:
            assert pieces[0].start == r.start and pieces[-1].end == r.end
            assert all(a.end == b.start for a, b in itertools.pairwise(pieces))


@given(
    st.dictionaries(
        st.integers(0, 20), st.tuples(st.integers(0, 100), st.integers(0, 10_000)), min_size=1
    ),
    st.integers(1, 5000),
)
def test_rate_limit_never_exceeds_and_never_starves(
    parts: dict[int, tuple[int, int]], limit: int
) -> None:
    start = {("t", p): s for p, (s, _) in parts.items()}
    latest = {("t", p): s + n for p, (s, n) in parts.items()}
    end = apply_rate_limit(start, latest, limit)
    taken = {tp: end[tp] - start[tp] for tp in start}
    backlog = sum(latest[tp] - start[tp] for tp in start)
    assert sum(taken.values()) == min(limit, backlog)
    assert all(0 <= taken[tp] <= latest[tp] - start[tp] for tp in start)
    if limit >= len(start):
        assert all(taken[tp] > 0 for tp in start if latest[tp] > start[tp])


def test_spark_discovers_the_data_source_automatically() -> None:
    """pyspark's lookup (pyspark/sql/worker/lookup_data_sources.py): installed top-level
    modules named pyspark_* with a DefaultSource subclass of DataSource."""
    import importlib
    import pkgutil

    from pyspark.sql.datasource import DataSource

    found = {}
    for info in pkgutil.iter_modules():
        if info.name == "pyspark_odradek":
            mod = importlib.import_module(info.name)
            found[mod.DefaultSource.name()] = mod.DefaultSource
    assert "odradek" in found and issubclass(found["odradek"], DataSource)
