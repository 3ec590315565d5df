"""Each API over the raw protocol against a real broker process (the module-scoped `broker`)."""

from __future__ import annotations

import select
import struct
import time
import uuid

import pytest

from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

from .wire import (
    Wire,
    create,
    create_topics_request,
    fetch_request,
    fetched_batches,
    fetched_values,
    init_producer_id_request,
    list_offsets_request,
    metadata_request,
    ms,
    produce_request,
    req,
)

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"num.partitions": 2}

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_RECORD = 87

_n = 0


def topic_name(prefix: str = "t") -> str:
    global _n
    _n += 1
    return f"{prefix}-{_n}-{uuid.uuid4().hex[:6]}"


def batch(*values: bytes, ts: int = 1_700_000_000_000, **kw: object) -> bytes:
    return build_batch([(None, v, (), ts + i) for i, v in enumerate(values)], **kw)  # type: ignore[arg-type]


def produce(
    wire: Wire, topic: str, data: bytes, partition: int = 0, acks: int = 1, version: int = 9
) -> tuple[int, int]:
    r = wire.call(produce_request(topic, partition, data, acks=acks, version=version))
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def fetch_all(wire: Wire, topic: str, partition: int = 0, offset: int = 0) -> list[bytes | None]:
    r = wire.call(fetch_request(topic, {partition: offset}))
    p = r.responses[0].partitions[0]
    assert int(p.error_code) == NONE
    return fetched_values(p.records)


def latest(wire: Wire, topic: str, partition: int = 0) -> int:
    r = wire.call(list_offsets_request(topic, {partition: -1}))
    return int(r.topics[0].partitions[0].offset)


# -- ApiVersions ----------------------------------------------------------------------------------


def test_api_versions_follows_design_rules(wire: Wire) -> None:
    r = wire.call(req(18, 3, client_software_name="wire", client_software_version="1"))
    assert int(r.error_code) == NONE
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}
    assert ranges[0][0] == 0 and ranges[0][1] >= 7  # Produce from 0
    assert ranges[1] == (0, 17)  # Fetch 0-17: 13+ name topics by id (KIP-516)
    assert ranges[2][0] == 0  # ListOffsets
    assert ranges[22][0] == 0 and ranges[22][1] >= 4  # InitProducerId
    assert ranges[18][1] >= 3
    for key in (68, 69):
        assert key not in ranges
    assert ranges[71] == ranges[72] == (0, 0)  # client telemetry (KIP-714)
    for key in (3, 19, 20, 37, 32, 33, 44, 60):
        assert key in ranges


def test_api_versions_too_new_gets_v0_unsupported_version(wire: Wire) -> None:
    body = struct.pack(">hhih", 18, 99, 42, 4) + b"wire" + b"\x00\x00"
    wire.send_raw(struct.pack(">i", len(body)) + body)
    frame = wire.read_frame()
    corr, err, n = struct.unpack_from(">ihi", frame, 0)
    assert corr == 42 and err == UNSUPPORTED_VERSION and n > 5
    keys = {struct.unpack_from(">hhh", frame, 10 + 6 * i)[0] for i in range(n)}
    assert {0, 1, 3, 18} <= keys
    # the connection stays usable
    r = wire.call(req(18, 0))
    assert int(r.error_code) == NONE


def test_old_versions_all_decode(wire: Wire) -> None:
    for v in range(0, 5):
        r = wire.call(req(18, v, client_software_name="x", client_software_version="1"))
        assert int(r.error_code) == NONE


# -- Metadata -------------------------------------------------------------------------------------


def test_metadata_auto_creates_with_num_partitions(wire: Wire, broker: BrokerProcess) -> None:
    name = topic_name("auto")
    r = wire.call(metadata_request([name]))
    (t,) = r.topics
    assert int(t.error_code) == NONE and t.name == name
    assert len(t.partitions) == 2  # BROKER_SETTINGS num.partitions
    assert isinstance(t.topic_id, uuid.UUID) and t.topic_id != uuid.UUID(int=0)
    assert r.brokers[0].port == broker.port and r.controller_id == r.brokers[0].node_id
    assert {int(p.leader_id) for p in t.partitions} == {r.brokers[0].node_id}
    assert all(int(p.leader_epoch) == 0 for p in t.partitions)
    # same id next time; listed in "all topics"
    again = wire.call(metadata_request(None))
    ids = {x.name: x.topic_id for x in again.topics}
    assert ids[name] == t.topic_id


def test_metadata_no_auto_create_and_bad_names(wire: Wire) -> None:
    name = topic_name("noauto")
    r = wire.call(metadata_request([name], allow_auto=False))
    assert int(r.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
    r = wire.call(metadata_request(["bad name!"]))
    assert int(r.topics[0].error_code) == INVALID_TOPIC_EXCEPTION
    for v in (0, 1, 4, 9):
        r = wire.call(metadata_request([name], version=v, allow_auto=False))
        assert r.topics


# -- Produce --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 10])
def test_produce_and_fetch_roundtrip(wire: Wire, version: int) -> None:
    t = topic_name("rt")
    create(wire, t)
    assert produce(wire, t, batch(b"a", b"b"), version=version) == (NONE, 0)
    assert produce(wire, t, batch(b"c"), version=version) == (NONE, 2)
    assert fetch_all(wire, t) == [b"a", b"b", b"c"]


def test_acks_0_1_all(wire: Wire) -> None:
    t = topic_name("acks")
    create(wire, t)
    assert produce(wire, t, batch(b"one"), acks=1) == (NONE, 0)
    assert produce(wire, t, batch(b"all"), acks=-1) == (NONE, 1)
    # acks=0: no response at all; the next request's response comes first
    wire.send(produce_request(t, 0, batch(b"zero"), acks=0))
    assert latest(wire, t) == 3
    assert fetch_all(wire, t) == [b"one", b"all", b"zero"]


def test_invalid_required_acks(wire: Wire) -> None:
    t = topic_name("badacks")
    create(wire, t)
    assert produce(wire, t, batch(b"x"), acks=2)[0] == INVALID_REQUIRED_ACKS
    assert latest(wire, t) == 0


def test_unknown_partition_and_unknown_topic_on_produce(wire: Wire) -> None:
    """Produce never creates a topic (auto.create.topics.enable, on here, is Metadata's), as in
    Kafka: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, and stays unknown."""
    t = topic_name("p")
    create(wire, t, 1)
    assert produce(wire, t, batch(b"x"), partition=5)[0] == UNKNOWN_TOPIC_OR_PARTITION
    unknown = topic_name("noauto")
    assert produce(wire, unknown, batch(b"x"))[0] == UNKNOWN_TOPIC_OR_PARTITION
    assert produce(wire, unknown, batch(b"x"), acks=-1)[0] == UNKNOWN_TOPIC_OR_PARTITION
    all_topics = wire.call(metadata_request(None))
    assert unknown not in {x.name for x in all_topics.topics}


def test_corrupt_crc_is_rejected_and_nothing_written(wire: Wire) -> None:
    t = topic_name("crc")
    create(wire, t)
    good = batch(b"ok")
    bad = bytearray(batch(b"value-to-flip"))
    bad[-3] ^= 0xFF
    assert produce(wire, t, good + bytes(bad))[0] == CORRUPT_MESSAGE
    assert latest(wire, t) == 0
    assert produce(wire, t, good) == (NONE, 0)


def test_truncated_batch_and_wrong_magic(wire: Wire) -> None:
    t = topic_name("magic")
    create(wire, t)
    b = batch(b"x")
    assert produce(wire, t, b[:-5])[0] == CORRUPT_MESSAGE
    wrong = bytearray(b)
    wrong[16] = 1
    assert produce(wire, t, bytes(wrong))[0] == INVALID_RECORD
    assert latest(wire, t) == 0


def test_message_too_large_per_topic_config(wire: Wire) -> None:
    t = topic_name("large")
    create(wire, t, 1, {"max.message.bytes": "1000"})
    assert produce(wire, t, batch(b"x" * 2000))[0] == MESSAGE_TOO_LARGE
    assert produce(wire, t, batch(b"x" * 100)) == (NONE, 0)
    assert latest(wire, t) == 1


def test_message_too_large_broker_default(wire: Wire) -> None:
    t = topic_name("large2")
    create(wire, t)
    assert produce(wire, t, batch(b"x" * 1_100_000))[0] == MESSAGE_TOO_LARGE
    assert latest(wire, t) == 0


def test_log_append_time_topic(wire: Wire) -> None:
    t = topic_name("lat")
    create(wire, t, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    r = wire.call(produce_request(t, 0, batch(b"x", ts=1000)))
    p = r.responses[0].partition_responses[0]
    assert int(p.error_code) == NONE
    assert p.log_append_time is not None
    (b,) = fetched_batches(wire.call(fetch_request(t, {0: 0})).responses[0].partitions[0].records)
    assert b.timestamp_type == 1 and b.max_timestamp >= before - 1000


def test_pipelined_requests_answered_in_order(wire: Wire) -> None:
    t = topic_name("pipe")
    create(wire, t)
    entities = [produce_request(t, 0, batch(b"%d" % i)) for i in range(200)]
    from odradek.protocol.messages import encode_request

    data = b"".join(
        encode_request(e, correlation_id=1000 + i, client_id="p") for i, e in enumerate(entities)
    )
    wire.send_raw(data)
    for i, e in enumerate(entities):
        r = wire.receive(e, 1000 + i)
        assert int(r.responses[0].partition_responses[0].base_offset) == i


# -- idempotence ----------------------------------------------------------------------------------


def test_init_producer_id_v0_to_v4(wire: Wire) -> None:
    ids = set()
    for v in range(0, 5):
        r = wire.call(init_producer_id_request(version=v))
        assert int(r.error_code) == NONE and int(r.producer_epoch) == 0
        ids.add(int(r.producer_id))
    assert len(ids) == 5
    r = wire.call(init_producer_id_request(version=4, producer_id=min(ids), producer_epoch=0))
    assert (int(r.producer_id), int(r.producer_epoch)) == (min(ids), 1)


def test_idempotent_dedupe_and_sequence_errors(wire: Wire) -> None:
    t = topic_name("idem")
    create(wire, t)
    r = wire.call(init_producer_id_request())
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    b0 = batch(b"a", b"b", producer_id=pid, producer_epoch=epoch, base_sequence=0)
    b1 = batch(b"c", producer_id=pid, producer_epoch=epoch, base_sequence=2)
    assert produce(wire, t, b0) == (NONE, 0)
    assert produce(wire, t, b1) == (NONE, 2)
    # a retry of either batch: success with the original offset, nothing appended
    assert produce(wire, t, b0) == (NONE, 0)
    assert produce(wire, t, b1) == (NONE, 2)
    assert latest(wire, t) == 3
    # a gap in the sequence
    gap = batch(b"d", producer_id=pid, producer_epoch=epoch, base_sequence=10)
    assert produce(wire, t, gap)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    # a new epoch restarts at 0; the old epoch is fenced
    assert produce(
        wire, t, batch(b"e", producer_id=pid, producer_epoch=epoch + 1, base_sequence=0)
    ) == (NONE, 3)
    old = batch(b"f", producer_id=pid, producer_epoch=epoch, base_sequence=3)
    assert produce(wire, t, old)[0] == INVALID_PRODUCER_EPOCH
    assert fetch_all(wire, t) == [b"a", b"b", b"c", b"e"]


def test_producer_id_minus_one_ignores_sequences(wire: Wire) -> None:
    t = topic_name("noidem")
    create(wire, t)
    b = batch(b"x", producer_id=-1, base_sequence=0)
    assert produce(wire, t, b) == (NONE, 0)
    assert produce(wire, t, b) == (NONE, 1)


# -- Fetch ----------------------------------------------------------------------------------------


def test_fetch_offset_out_of_range_and_unknown(wire: Wire) -> None:
    t = topic_name("oor")
    create(wire, t)
    produce(wire, t, batch(b"x"))
    r = wire.call(fetch_request(t, {0: 5}))
    assert int(r.responses[0].partitions[0].error_code) == OFFSET_OUT_OF_RANGE
    r = wire.call(fetch_request(t, {0: 1}))  # at the log end: fine, empty
    p = r.responses[0].partitions[0]
    assert int(p.error_code) == NONE and not p.records and int(p.high_watermark) == 1
    r = wire.call(fetch_request(t, {7: 0}))
    assert int(r.responses[0].partitions[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
    r = wire.call(fetch_request(topic_name("nope"), {0: 0}))
    assert int(r.responses[0].partitions[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_versions(wire: Wire, version: int) -> None:
    t = topic_name("fv")
    create(wire, t, 2)
    produce(wire, t, batch(b"p0"), partition=0)
    produce(wire, t, batch(b"p1"), partition=1)
    r = wire.call(fetch_request(t, {0: 0, 1: 0}, version=version))
    got = {int(p.partition_index): fetched_values(p.records) for p in r.responses[0].partitions}
    assert got == {0: [b"p0"], 1: [b"p1"]}


def test_fetch_max_bytes_returns_at_least_one_batch(wire: Wire) -> None:
    t = topic_name("maxb")
    create(wire, t, 2)
    for i in range(5):
        produce(wire, t, batch(b"x" * 1000, b"%d" % i), partition=0)
    produce(wire, t, batch(b"y" * 1000), partition=1)
    # limits far below one batch: the first partition still gets exactly one batch, the other none
    r = wire.call(fetch_request(t, {0: 0, 1: 0}, max_bytes=10, partition_max_bytes=10))
    parts = {int(p.partition_index): fetched_batches(p.records) for p in r.responses[0].partitions}
    assert len(parts[0]) == 1 and parts[1] == []
    # partition_max_bytes limits what one partition returns
    r = wire.call(fetch_request(t, {0: 0}, partition_max_bytes=2500))
    assert 1 <= len(fetched_batches(r.responses[0].partitions[0].records)) <= 2


def test_long_poll_answers_as_soon_as_data_arrives(broker: BrokerProcess) -> None:
    t = topic_name("lp")
    with Wire(broker.bootstrap_servers) as consumer, Wire(broker.bootstrap_servers) as producer:
        create(producer, t)
        req_ = fetch_request(t, {0: 0}, max_wait_ms=10_000, min_bytes=1)
        corr = consumer.send(req_)
        # The broker has no signal for "this fetch is parked" on the wire; what can be checked
        # is that it is not answered at once: nothing readable for 0.2 s (a bounded wait on
        # that condition) means the fetch waits in purgatory when the produce arrives.
        readable, _, _ = select.select([consumer.sock], [], [], 0.2)
        assert not readable, "an empty long-poll fetch was answered before max_wait_ms"
        t0 = time.monotonic()
        produce(producer, t, batch(b"wake"))
        r = consumer.receive(req_, corr)
        elapsed = time.monotonic() - t0
        assert fetched_values(r.responses[0].partitions[0].records) == [b"wake"]
        # woken by the produce, not by max_wait_ms (10 s); 5 s holds on a loaded 2-core machine
        assert elapsed < 5.0, elapsed


def test_long_poll_times_out_empty(wire: Wire) -> None:
    t = topic_name("lpt")
    create(wire, t)
    t0 = time.monotonic()
    r = wire.call(fetch_request(t, {0: 0}, max_wait_ms=300, min_bytes=1))
    elapsed = time.monotonic() - t0
    assert not r.responses[0].partitions[0].records
    # answered at max_wait_ms (0.3 s), not at once; the upper bound only says "not stuck"
    # and leaves room for a loaded shared machine
    assert 0.25 <= elapsed < 5.0, elapsed


def test_long_poll_pipelined_keeps_order(broker: BrokerProcess) -> None:
    t = topic_name("lpo")
    with Wire(broker.bootstrap_servers) as w:
        create(w, t)
        slow = fetch_request(t, {0: 0}, max_wait_ms=400, min_bytes=1)
        fast = req(18, 3, client_software_name="x", client_software_version="1")
        c1 = w.send(slow)
        c2 = w.send(fast)
        r1 = w.receive(slow, c1)  # asserts the correlation id: the slow one first
        assert not r1.responses[0].partitions[0].records
        assert int(w.receive(fast, c2).error_code) == NONE


# -- ListOffsets ----------------------------------------------------------------------------------


def test_list_offsets_earliest_latest_max_and_by_timestamp(wire: Wire) -> None:
    t = topic_name("lo")
    create(wire, t)
    produce(wire, t, batch(b"a", b"b", ts=1000))  # offsets 0,1 at 1000,1001
    produce(wire, t, batch(b"c", ts=5000))  # offset 2 at 5000
    produce(wire, t, batch(b"d", ts=3000))  # offset 3 at 3000
    r = wire.call(list_offsets_request(t, {0: -2}))
    assert int(r.topics[0].partitions[0].offset) == 0
    assert latest(wire, t) == 4
    r = wire.call(list_offsets_request(t, {0: -3}))
    p = r.topics[0].partitions[0]
    assert (int(p.offset), int(p.timestamp)) == (2, 5000)
    r = wire.call(list_offsets_request(t, {0: 1001}))
    assert int(r.topics[0].partitions[0].offset) in (0, 1)  # batch granularity
    r = wire.call(list_offsets_request(t, {0: 4000}))
    assert int(r.topics[0].partitions[0].offset) == 2
    r = wire.call(list_offsets_request(t, {0: 9000}))
    assert int(r.topics[0].partitions[0].offset) == -1
    for v in (1, 2, 4, 9):
        r = wire.call(list_offsets_request(t, {0: -1}, version=v))
        assert int(r.topics[0].partitions[0].error_code) == NONE
    r = wire.call(list_offsets_request(topic_name("none"), {0: -1}))
    assert int(r.topics[0].partitions[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION


# -- topic admin ----------------------------------------------------------------------------------


def test_create_topics_errors(wire: Wire) -> None:
    good = topic_name("c")
    r = wire.call(
        create_topics_request(
            [
                (good, 3, 1, {"retention.ms": "1000"}),
                ("bad/name", 1, 1, {}),
                (".", 1, 1, {}),
                ("x" * 250, 1, 1, {}),
                (topic_name("zero"), 0, 1, {}),
                (topic_name("rf"), 1, 3, {}),
                (topic_name("cfg"), 1, 1, {"retention.ms": "soon"}),
                (topic_name("cfg"), 1, 1, {"no.such.config": "1"}),
            ]
        )
    )
    codes = [int(x.error_code) for x in r.topics]
    assert codes == [
        NONE,
        INVALID_TOPIC_EXCEPTION,
        INVALID_TOPIC_EXCEPTION,
        INVALID_TOPIC_EXCEPTION,
        INVALID_PARTITIONS,
        INVALID_REPLICATION_FACTOR,
        INVALID_CONFIG,
        INVALID_CONFIG,
    ]
    assert int(r.topics[0].num_partitions) == 3
    r = wire.call(create_topics_request([(good, 1, 1, {})]))
    assert int(r.topics[0].error_code) == TOPIC_ALREADY_EXISTS
    # -1 means the broker defaults
    d = topic_name("defaults")
    r = wire.call(create_topics_request([(d, -1, -1, {})]))
    assert int(r.topics[0].error_code) == NONE and int(r.topics[0].num_partitions) == 2


def test_create_topics_validate_only(wire: Wire) -> None:
    t = topic_name("vo")
    r = wire.call(create_topics_request([(t, 2, 1, {})], validate_only=True))
    assert int(r.topics[0].error_code) == NONE
    r = wire.call(metadata_request([t], allow_auto=False))
    assert int(r.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topics(wire: Wire) -> None:
    t = topic_name("del")
    create(wire, t)
    produce(wire, t, batch(b"x"))
    r = wire.call(req(20, 4, topic_names=(t, topic_name("missing")), timeout=ms(5000)))
    assert [int(x.error_code) for x in r.responses] == [NONE, UNKNOWN_TOPIC_OR_PARTITION]
    r = wire.call(metadata_request([t], allow_auto=False))
    assert int(r.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
    create(wire, t)  # re-creatable, empty
    assert latest(wire, t) == 0


def test_create_partitions(wire: Wire) -> None:
    t = topic_name("cp")
    create(wire, t, 1)

    def call(count: int, validate_only: bool = False) -> int:
        topic = req(37, 3, "CreatePartitionsTopic", name=t, count=count, assignments=None)
        r = wire.call(req(37, 3, topics=(topic,), timeout=ms(5000), validate_only=validate_only))
        return int(r.results[0].error_code)

    assert call(1) == INVALID_PARTITIONS
    assert call(3, validate_only=True) == NONE
    assert len(wire.call(metadata_request([t])).topics[0].partitions) == 1
    assert call(3) == NONE
    assert len(wire.call(metadata_request([t])).topics[0].partitions) == 3
    assert produce(wire, t, batch(b"x"), partition=2) == (NONE, 0)


def _describe(wire: Wire, t: str, version: int = 4) -> dict[str, tuple[str | None, int]]:
    res = req(
        32,
        version,
        "DescribeConfigsResource",
        resource_type=2,
        resource_name=t,
        configuration_keys=None,
    )
    r = wire.call(
        req(32, version, resources=(res,), include_synonyms=True, include_documentation=False)
    )
    assert int(r.results[0].error_code) == NONE
    return {c.name: (c.value, int(c.config_source)) for c in r.results[0].configs}


def test_describe_configs_topic_and_broker(wire: Wire) -> None:
    t = topic_name("dc")
    create(wire, t, 1, {"retention.ms": "12345"})
    configs = _describe(wire, t)
    assert configs["retention.ms"] == ("12345", 1)  # DYNAMIC_TOPIC_CONFIG
    assert configs["max.message.bytes"][0] == "1048588"
    assert configs["cleanup.policy"][0] == "delete"
    res = req(
        32,
        4,
        "DescribeConfigsResource",
        resource_type=4,
        resource_name="0",
        configuration_keys=None,
    )
    r = wire.call(req(32, 4, resources=(res,), include_synonyms=False, include_documentation=False))
    broker_cfg = {c.name: c.value for c in r.results[0].configs}
    assert broker_cfg["num.partitions"] == "2"
    res = req(
        32,
        1,
        "DescribeConfigsResource",
        resource_type=2,
        resource_name=topic_name("none"),
        configuration_keys=None,
    )
    r = wire.call(req(32, 1, resources=(res,), include_synonyms=False))
    assert int(r.results[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION


def test_incremental_alter_configs_applies_to_live_log(wire: Wire) -> None:
    t = topic_name("iac")
    create(wire, t)

    def alter(ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> int:
        cfgs = tuple(
            req(44, 1, "AlterableConfig", name=n, config_operation=o, value=v) for n, o, v in ops
        )
        res = req(44, 1, "AlterConfigsResource", resource_type=2, resource_name=t, configs=cfgs)
        r = wire.call(req(44, 1, resources=(res,), validate_only=validate_only))
        return int(r.responses[0].error_code)

    assert produce(wire, t, batch(b"x" * 3000)) == (NONE, 0)
    assert alter([("max.message.bytes", 0, "2000")]) == NONE
    assert produce(wire, t, batch(b"x" * 3000))[0] == MESSAGE_TOO_LARGE
    assert _describe(wire, t)["max.message.bytes"] == ("2000", 1)
    assert alter([("max.message.bytes", 1, None)]) == NONE  # DELETE: back to the default
    assert produce(wire, t, batch(b"x" * 3000)) == (NONE, 1)
    assert alter([("cleanup.policy", 2, "compact")]) == NONE  # APPEND
    assert _describe(wire, t)["cleanup.policy"][0] == "delete,compact"
    assert alter([("retention.ms", 0, "nope")]) == INVALID_CONFIG
    assert alter([("message.timestamp.type", 0, "LogAppendTime")], validate_only=True) == NONE
    assert _describe(wire, t)["message.timestamp.type"][0] == "CreateTime"


def test_alter_configs_replaces_overrides(wire: Wire) -> None:
    t = topic_name("ac")
    create(wire, t, 1, {"retention.ms": "1000"})
    cfg = req(33, 2, "AlterableConfig", name="segment.bytes", value="1048576")
    res = req(33, 2, "AlterConfigsResource", resource_type=2, resource_name=t, configs=(cfg,))
    r = wire.call(req(33, 2, resources=(res,), validate_only=False))
    assert int(r.responses[0].error_code) == NONE
    configs = _describe(wire, t)
    assert configs["segment.bytes"] == ("1048576", 1)
    assert configs["retention.ms"][1] != 1  # no longer an override


def test_describe_cluster(wire: Wire, broker: BrokerProcess) -> None:
    r = wire.call(req(60, 1, include_cluster_authorized_operations=False, endpoint_type=1))
    assert int(r.error_code) == NONE
    assert r.cluster_id
    (b,) = r.brokers
    assert (b.host, int(b.port)) == ("127.0.0.1", broker.port)
    assert int(r.controller_id) == int(b.broker_id)


def test_current_leader_epoch_is_checked(wire: Wire) -> None:
    FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75
    t = topic_name("epoch")
    create(wire, t)
    produce(wire, t, batch(b"x"))

    def fetch_code(epoch: int, version: int = 12) -> int:
        e = fetch_request(t, {0: 0}, version=version, max_bytes=1 << 20, current_leader_epoch=epoch)
        return int(wire.call(e).responses[0].partitions[0].error_code)

    assert fetch_code(0) == NONE  # the leader epoch starts at 0
    assert fetch_code(-1) == NONE  # not given
    assert fetch_code(5) == UNKNOWN_LEADER_EPOCH
    assert fetch_code(5, version=8) == NONE  # not checked before v9

    def list_code(epoch: int) -> int:
        p = req(
            2,
            7,
            "ListOffsetsPartition",
            partition_index=0,
            current_leader_epoch=epoch,
            timestamp=-1,
        )
        lt = req(2, 7, "ListOffsetsTopic", name=t, partitions=(p,))
        return int(
            wire.call(req(2, 7, replica_id=-1, isolation_level=0, topics=(lt,)))
            .topics[0]
            .partitions[0]
            .error_code
        )

    assert list_code(0) == NONE
    assert list_code(3) == UNKNOWN_LEADER_EPOCH
    assert FENCED_LEADER_EPOCH != UNKNOWN_LEADER_EPOCH


# -- frames split across reads; large (zero-copy) Produce requests ---------------------------------


def _send_in_pieces(wire: Wire, entity: object, pieces: int = 3) -> int:
    """Send one request in ``pieces`` writes with pauses, so the broker reads it in chunks (its
    frame is then gathered into a writable buffer)."""
    from odradek.protocol.messages import encode_request

    wire.correlation_id += 1
    data = encode_request(entity, correlation_id=wire.correlation_id, client_id="wire")
    step = max(1, len(data) // pieces)
    for i in range(0, len(data), step):
        wire.send_raw(data[i : i + step])
        time.sleep(0.02)  # let the broker read this piece on its own (not an await-able event)
    return wire.correlation_id


def test_request_split_across_reads_decodes(wire: Wire) -> None:
    t = topic_name("split")
    create(wire, t)
    request = metadata_request([t], allow_auto=False)
    r = wire.receive(request, _send_in_pieces(wire, request, pieces=4))
    assert [x.name for x in r.topics] == [t]
    small = produce_request(t, 0, batch(b"s"))
    r = wire.receive(small, _send_in_pieces(wire, small))
    assert int(r.responses[0].partition_responses[0].error_code) == NONE


@pytest.mark.parametrize("version", [3, 8, 9, 10])
def test_large_produce_zero_copy_roundtrip(wire: Wire, version: int) -> None:
    t = topic_name("big")
    create(wire, t)
    values = [bytes([i % 251]) * 1000 for i in range(300)]  # ~300 KB: many reads, zero-copy path
    first = batch(*values[:150])
    second = batch(*values[150:])
    request = produce_request(t, 0, first + second, version=version)
    r = wire.receive(request, _send_in_pieces(wire, request))
    assert (int(r.responses[0].partition_responses[0].error_code), latest(wire, t)) == (NONE, 300)
    got: list[bytes | None] = []
    while len(got) < 300:
        got += fetch_all(wire, t, offset=len(got))
    assert got == values
    # a corrupt batch in a large request: nothing written
    bad = bytearray(batch(*values[:100]))
    bad[-3] ^= 0xFF
    assert produce(wire, t, first + bytes(bad), version=version)[0] == CORRUPT_MESSAGE
    assert latest(wire, t) == 300


def test_large_produce_log_append_time(wire: Wire) -> None:
    t = topic_name("biglat")
    create(wire, t, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    data = batch(*[b"v" * 1000 for _ in range(40)], ts=1000)
    assert produce(wire, t, data)[0] == NONE
    (b,) = fetched_batches(wire.call(fetch_request(t, {0: 0})).responses[0].partitions[0].records)
    assert b.timestamp_type == 1 and b.max_timestamp >= before - 1000 and b.is_valid()
