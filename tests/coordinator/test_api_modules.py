"""The group API modules for every version they serve: kio request in, kio response out (and
encodable by kio), against a real in-process broker."""

from __future__ import annotations

import datetime
import importlib
import io
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.broker.apis import offset_commit
from odradek.broker.apis._util import make
from odradek.broker.registry import (
    EncodedResponse,
    RequestContext,
    RequestHeaderInfo,
    load_registry,
)
from odradek.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(30)

INT32_MIN = -(2**31)
MS = datetime.timedelta(milliseconds=1)
GROUP_APIS = {
    10: "find_coordinator",
    11: "join_group",
    14: "sync_group",
    12: "heartbeat",
    13: "leave_group",
    8: "offset_commit",
    9: "offset_fetch",
    16: "list_groups",
    15: "describe_groups",
    42: "delete_groups",
    47: "offset_delete",
}
# The highest version each client asked for (measured, docs/internals.md) must be served
CLIENT_MAX = {10: 6, 11: 7, 14: 5, 12: 4, 13: 5, 8: 9, 9: 9, 16: 5, 15: 5, 42: 2, 47: 0}


def _mod(api: str, version: int) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.request")


def _encode(response: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(response))(buf, response)
    return buf.getvalue()


@pytest.fixture
async def broker() -> Any:
    b = EmbeddedBroker(
        {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}, thread=False
    )
    await b.astart()
    await b.broker.group_coordinator.wait_loaded()
    b.broker.create_topic("t", 2)
    try:
        yield b
    finally:
        await b.astop()


async def call(b: Any, api_key: int, version: int, **fields: Any) -> Any:
    spec = load_registry()[api_key]
    mod = _mod(GROUP_APIS[api_key], version)
    req_cls = next(
        v
        for k, v in vars(mod).items()
        if k.endswith("Request") and isinstance(v, type) and k[0].isupper()
    )
    request = make(req_cls, **fields)
    ctx = RequestContext(
        b.broker.services, RequestHeaderInfo(api_key, version, 1, "unit"), "127.0.0.1", 1
    )
    response = await spec.handler(ctx, request)
    if isinstance(response, EncodedResponse):  # a hand-written encoder: decode it with kio
        body = b"".join(bytes(p) for p in response.parts)
        assert len(body) == response.size
        decoded, used = entity_reader(load_response_schema(api_key, version))(body, 0)
        assert used == len(body)
        return decoded
    assert type(response).__version__ == version
    _encode(response)
    return response


def test_registry_advertises_the_versions_clients_use() -> None:
    registry = load_registry()
    for key, api in GROUP_APIS.items():
        spec = registry[key]
        assert spec.min_version == 0, api
        assert spec.max_version >= CLIENT_MAX[key], api
        # every served version exists in kio
        for v in range(spec.oldest_served, spec.max_version + 1):
            _mod(api, v)
    assert registry[8].oldest_served == 2 and registry[9].oldest_served == 1


async def test_find_coordinator_all_versions(broker: Any) -> None:
    for v in range(0, 7):
        if v < 4:
            r = await call(broker, 10, v, key="g", key_type=0)
            assert (r.error_code, r.node_id, r.host, r.port) == (
                0,
                broker.broker.node_id,
                "127.0.0.1",
                broker.port,
            )
        else:
            r = await call(broker, 10, v, key_type=0, coordinator_keys=("a", "b"))
            assert [(c.key, c.error_code, c.port) for c in r.coordinators] == [
                ("a", 0, broker.port),
                ("b", 0, broker.port),
            ]
    r = await call(broker, 10, 1, key="txn", key_type=1)  # the transaction coordinator
    assert (r.error_code, r.node_id, r.port) == (0, broker.broker.node_id, broker.port)
    r = await call(broker, 10, 1, key="x", key_type=7)
    assert r.error_code == 42  # INVALID_REQUEST


async def _join(
    broker: Any, v: int, group: str, member_id: str = "", instance: str | None = None
) -> Any:
    proto = _mod("join_group", v).JoinGroupRequestProtocol(name="range", metadata=b"meta")
    return await call(
        broker,
        11,
        v,
        group_id=group,
        session_timeout=10_000 * MS,
        rebalance_timeout=10_000 * MS,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=(proto,),
        reason=None,
    )


@pytest.mark.parametrize("v", range(0, 8))
async def test_group_lifecycle_every_join_version(broker: Any, v: int) -> None:
    group = f"g{v}"
    r = await _join(broker, v, group)
    if v >= 4:
        assert r.error_code == 79 and r.member_id  # MEMBER_ID_REQUIRED
        r = await _join(broker, v, group, r.member_id)
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert [m.member_id for m in r.members] == [r.member_id] and r.members[0].metadata == b"meta"
    if v >= 7:
        assert r.protocol_type == "consumer"
    member, gen = r.member_id, r.generation_id
    sv = min(v, 5)
    asg = _mod("sync_group", sv).SyncGroupRequestAssignment(member_id=member, assignment=b"asg")
    s = await call(
        broker,
        14,
        sv,
        group_id=group,
        generation_id=gen,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(asg,),
    )
    assert s.error_code == 0 and s.assignment == b"asg"
    hv = min(v, 4)
    h = await call(
        broker, 12, hv, group_id=group, generation_id=gen, member_id=member, group_instance_id=None
    )
    assert h.error_code == 0
    h = await call(
        broker,
        12,
        hv,
        group_id=group,
        generation_id=gen + 1,
        member_id=member,
        group_instance_id=None,
    )
    assert h.error_code == 22  # ILLEGAL_GENERATION
    lv = min(v, 5)
    if lv >= 3:
        ident = _mod("leave_group", lv).MemberIdentity
        r = await call(
            broker,
            13,
            lv,
            group_id=group,
            members=(
                make(ident, member_id=member, group_instance_id=None, reason=None),
                make(ident, member_id="ghost", group_instance_id=None, reason=None),
            ),
        )
        assert r.error_code == 0 and [m.error_code for m in r.members] == [0, 25]
    else:
        r = await call(broker, 13, lv, group_id=group, member_id=member)
        assert r.error_code == 0
        r = await call(broker, 13, lv, group_id=group, member_id=member)
        assert r.error_code == 25
    h = await call(
        broker, 12, hv, group_id=group, generation_id=gen, member_id=member, group_instance_id=None
    )
    assert h.error_code == 25  # UNKNOWN_MEMBER_ID


def _commit_topics(v: int, offsets: dict[int, int], metadata: str = "") -> Any:
    mod = _mod("offset_commit", v)
    parts = tuple(
        make(
            mod.OffsetCommitRequestPartition,
            partition_index=p,
            committed_offset=o,
            committed_leader_epoch=-1,
            committed_metadata=metadata,
        )
        for p, o in offsets.items()
    )
    return (mod.OffsetCommitRequestTopic(name="t", partitions=parts),)


@pytest.mark.parametrize("v", range(2, 10))
async def test_offset_commit_every_version(broker: Any, v: int) -> None:
    group = f"oc{v}"
    r = await call(
        broker,
        8,
        v,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=-1 * MS,
        topics=_commit_topics(v, {0: 5, 1: 6}),
    )
    assert [p.error_code for p in r.topics[0].partitions] == [0, 0]
    r = await call(
        broker,
        8,
        v,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=-1 * MS,
        topics=_commit_topics(v, {0: 1}, "x" * 5000),
    )
    assert r.topics[0].partitions[0].error_code == 12  # OFFSET_METADATA_TOO_LARGE
    mod = _mod("offset_commit", v)
    bad = (
        mod.OffsetCommitRequestTopic(
            name="nope", partitions=_commit_topics(v, {0: 1})[0].partitions
        ),
    )
    r = await call(
        broker,
        8,
        v,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=-1 * MS,
        topics=bad,
    )
    assert r.topics[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("v", range(1, 10))
async def test_offset_fetch_every_version(broker: Any, v: int) -> None:
    group = f"of{v}"
    await call(
        broker,
        8,
        7,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=_commit_topics(7, {1: 9}, "meta"),
    )
    mod = _mod("offset_fetch", v)
    if v >= 8:
        gcls, tcls = mod.OffsetFetchRequestGroup, mod.OffsetFetchRequestTopics
        r = await call(
            broker,
            9,
            v,
            require_stable=False,
            groups=(
                make(
                    gcls,
                    group_id=group,
                    member_id=None,
                    member_epoch=-1,
                    topics=(tcls(name="t", partition_indexes=(0, 1)),),
                ),
                make(gcls, group_id=group, member_id=None, member_epoch=-1, topics=None),
                make(gcls, group_id="unknown", member_id=None, member_epoch=-1, topics=None),
            ),
        )
        one, every, unknown = r.groups
        assert [
            (p.partition_index, p.committed_offset, p.metadata) for p in one.topics[0].partitions
        ] == [(0, -1, ""), (1, 9, "meta")]
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in every.topics] == [
            ("t", [9])
        ]
        assert unknown.error_code == 0 and unknown.topics == ()
        return
    tcls = mod.OffsetFetchRequestTopic
    r = await call(
        broker,
        9,
        v,
        group_id=group,
        require_stable=False,
        topics=(tcls(name="t", partition_indexes=(0, 1)),),
    )
    assert [(p.partition_index, p.committed_offset) for p in r.topics[0].partitions] == [
        (0, -1),
        (1, 9),
    ]
    if v >= 2:
        r = await call(broker, 9, v, group_id=group, require_stable=False, topics=None)
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [
            ("t", [1])
        ]


async def test_list_describe_delete_offset_delete(broker: Any) -> None:
    await call(
        broker,
        8,
        7,
        group_id="simple",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=_commit_topics(7, {0: 1, 1: 2}),
    )
    r = await _join(broker, 7, "busy")
    r = await _join(broker, 7, "busy", r.member_id)
    for v in range(0, 6):
        lg = await call(broker, 16, v, states_filter=(), types_filter=())
        assert {g.group_id for g in lg.groups} == {"simple", "busy"}
    lg = await call(broker, 16, 4, states_filter=("Empty",))
    assert [(g.group_id, g.group_state) for g in lg.groups] == [("simple", "Empty")]
    for v in range(0, 6):
        d = await call(broker, 15, v, groups=("busy", "ghost"), include_authorized_operations=False)
        busy, ghost = d.groups
        assert busy.group_state == "CompletingRebalance" and len(busy.members) == 1
        assert busy.members[0].client_id == "unit" and busy.members[0].client_host == "127.0.0.1"
        assert ghost.group_state == "Dead" and ghost.error_code == 0
        if v >= 3:
            assert busy.authorized_operations == INT32_MIN
    d = await call(broker, 15, 5, groups=("busy",), include_authorized_operations=True)
    assert d.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    od = _mod("offset_delete", 0)
    r = await call(
        broker,
        47,
        0,
        group_id="simple",
        topics=(
            od.OffsetDeleteRequestTopic(
                name="t", partitions=(od.OffsetDeleteRequestPartition(partition_index=0),)
            ),
        ),
    )
    assert r.error_code == 0 and r.topics[0].partitions[0].error_code == 0
    r = await call(broker, 47, 0, group_id="ghost", topics=())
    assert r.error_code == 69
    for v in range(0, 3):
        dg = await call(broker, 42, v, groups_names=("busy", "ghost"))
        assert [(x.group_id, x.error_code) for x in dg.results] == [("busy", 68), ("ghost", 69)]
    dg = await call(broker, 42, 2, groups_names=("simple",))
    assert dg.results[0].error_code == 0
    lg = await call(broker, 16, 3)
    assert [g.group_id for g in lg.groups] == ["busy"]


@pytest.mark.parametrize("v", range(2, 10))
def test_offset_commit_encoder_matches_kio(v: int) -> None:
    mod = _mod("offset_commit", v)
    topics = tuple(
        mod.OffsetCommitRequestTopic(
            name=name,
            partitions=tuple(
                make(
                    mod.OffsetCommitRequestPartition,
                    partition_index=p,
                    committed_offset=1,
                    committed_leader_epoch=-1,
                    committed_metadata="",
                )
                for p in parts
            ),
        )
        for name, parts in (("t", (0, 1, 2)), ("other-topic-\u00e9", (7,)), ("empty", ()))
    )
    request = make(
        mod.OffsetCommitRequest,
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=-1 * MS,
        topics=topics,
    )
    errors = [0, 12, 25, 3]
    expected = _encode(offset_commit.kio_response(request, errors))
    got = offset_commit.encode_response(
        v,
        [
            (t.name, list(zip([p.partition_index for p in t.partitions], errors[i:], strict=False)))
            for i, t in ((0, topics[0]), (3, topics[1]), (4, topics[2]))
        ],
    )
    assert got == expected
