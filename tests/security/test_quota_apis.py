"""DescribeClientQuotas / AlterClientQuotas (v0 and v1) against a real broker process, with
kio frames (neither confluent-kafka 2.16 nor kafka-python 3.0 has client-quota admin calls);
the quotas survive a restart (the data directory's file)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from tests.broker.wire import Wire, req

from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess({"listeners": "PLAINTEXT://127.0.0.1:0"}) as b:
        yield b


def alter(
    w: Wire,
    version: int,
    entries: list[tuple[dict[str, str | None], dict[str, float | None]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    body = tuple(
        req(
            49,
            version,
            "EntryData",
            entity=tuple(
                req(49, version, "EntityData", entity_type=t, entity_name=n)
                for t, n in entity.items()
            ),
            ops=tuple(
                req(49, version, "OpData", key=k, value=0.0 if v is None else v, remove=v is None)
                for k, v in ops.items()
            ),
        )
        for entity, ops in entries
    )
    resp = w.call(req(49, version, entries=body, validate_only=validate_only))
    return [(int(e.error_code), e.error_message) for e in resp.entries]


def describe(
    w: Wire, version: int, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    comps = tuple(
        req(48, version, "ComponentData", entity_type=t, match_type=m, match=n)
        for t, m, n in components
    )
    return w.call(req(48, version, components=comps, strict=strict))


def as_dict(resp: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert resp.error_code == ErrorCode.none, resp.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: float(v.value) for v in entry.values
        }
        for entry in resp.entries
    }


@pytest.mark.parametrize("version", [0, 1])
def test_alter_describe_remove(broker: BrokerProcess, version: int) -> None:
    user = f"alice{version}"
    with Wire(broker.bootstrap_servers) as w:
        assert alter(
            w,
            version,
            [
                ({"user": user}, {"producer_byte_rate": 1024.0}),
                ({"user": user, "client-id": None}, {"consumer_byte_rate": 2048.0}),
            ],
        ) == [(0, None), (0, None)]
        got = as_dict(describe(w, version, [("user", 0, user)]))
        assert got == {
            (("user", user),): {"producer_byte_rate": 1024.0},
            (("user", user), ("client-id", None)): {"consumer_byte_rate": 2048.0},
        }
        strict = as_dict(describe(w, version, [("user", 0, user)], strict=True))
        assert list(strict) == [(("user", user),)]
        assert alter(w, version, [({"user": user}, {"producer_byte_rate": None})]) == [(0, None)]
        got = as_dict(describe(w, version, [("user", 0, user)]))
        assert list(got) == [(("user", user), ("client-id", None))]


def test_invalid_requests(broker: BrokerProcess) -> None:
    with Wire(broker.bootstrap_servers) as w:
        results = alter(
            w,
            1,
            [
                ({"user": "bob"}, {"no_such_quota": 1.0}),
                ({"group": "g"}, {"producer_byte_rate": 1.0}),
                ({"user": "bob"}, {"producer_byte_rate": 5.0}),
            ],
            validate_only=True,
        )
        assert [code for code, _ in results] == [
            ErrorCode.invalid_request,
            ErrorCode.invalid_request,
            ErrorCode.none,
        ]
        assert as_dict(describe(w, 1, [("user", 0, "bob")])) == {}  # validate only
        bad = describe(w, 1, [("group", 2, None)])
        assert bad.error_code == ErrorCode.invalid_request


def test_quotas_survive_restart(broker: BrokerProcess) -> None:
    with Wire(broker.bootstrap_servers) as w:
        assert alter(w, 1, [({"client-id": "kept"}, {"request_percentage": 25.0})]) == [(0, None)]
    broker.restart()
    with Wire(broker.bootstrap_servers) as w:
        got = as_dict(describe(w, 1, [("client-id", 0, "kept")]))
        assert got == {(("client-id", "kept"),): {"request_percentage": 25.0}}
