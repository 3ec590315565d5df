"""The quota store: alter and describe (Kafka's filter rules), the file that survives a
restart, and the ZooKeeper formats."""

from __future__ import annotations

import json
from pathlib import Path

from odradek.security.quota_store import (
    CLIENT_ID,
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    USER,
    FileQuotaStore,
    QuotaFilterComponent,
    QuotaOp,
    QuotaStore,
    change_notification,
    encode_config,
    entity_path,
)
from odradek.security.quotas import DEFAULT, resolve_quota


def set_(key: str, value: float) -> QuotaOp:
    return QuotaOp(key, value, remove=False)


def filled() -> QuotaStore:
    store = QuotaStore()
    assert (
        store.alter(
            [
                (("alice", None), [set_("producer_byte_rate", 1024)]),
                (("alice", "app"), [set_("consumer_byte_rate", 2048)]),
                ((DEFAULT, None), [set_("request_percentage", 50)]),
                ((None, "app"), [set_("producer_byte_rate", 10)]),
            ],
            validate_only=False,
        )
        == [None] * 4
    )
    return store


def entities(store: QuotaStore, comps: list[QuotaFilterComponent], strict: bool) -> set:
    return {e for e, _ in store.describe(comps, strict)}


def test_describe_filters_as_kafka() -> None:
    store = filled()
    alice = QuotaFilterComponent(USER, MATCH_EXACT, "alice")
    assert entities(store, [alice], False) == {("alice", None), ("alice", "app")}
    assert entities(store, [alice], True) == {("alice", None)}
    assert entities(store, [QuotaFilterComponent(USER, MATCH_DEFAULT)], False) == {(DEFAULT, None)}
    assert entities(store, [QuotaFilterComponent(CLIENT_ID, MATCH_ANY)], True) == {(None, "app")}
    assert entities(store, [], False) == set(store.configs)
    assert entities(store, [], True) == set()


def test_alter_validates_and_removes() -> None:
    store = filled()
    errors = store.alter(
        [
            (("bob", None), [set_("no_such_key", 1)]),
            (("bob", None), [set_("producer_byte_rate", -1)]),
            ((None, None), [set_("producer_byte_rate", 1)]),
            (("carol", None), [set_("producer_byte_rate", 1)]),
        ],
        validate_only=True,
    )
    assert [e is None for e in errors] == [False, False, False, True]
    assert ("carol", None) not in store.configs  # validate only
    store.alter([(("alice", None), [QuotaOp("producer_byte_rate", 0, remove=True)])], False)
    assert ("alice", None) not in store.configs  # no value left: the entity goes
    assert resolve_quota(store.configs, "alice", "app", "consumer_byte_rate") == (
        2048.0,
        ("alice", "app"),
    )


def test_file_store_survives_reopen(tmp_path: Path) -> None:
    store = FileQuotaStore(tmp_path)
    store.alter([(("alice", DEFAULT), [set_("producer_byte_rate", 100)])], False)
    again = FileQuotaStore(tmp_path)
    assert again.configs == {("alice", DEFAULT): {"producer_byte_rate": 100.0}}
    obj = json.loads((tmp_path / "quotas.json").read_text())
    assert obj["quotas"][0]["user"] == "alice" and obj["quotas"][0]["client-id"] == DEFAULT


def test_zookeeper_formats() -> None:
    assert entity_path(("alice", None)) == "users/alice"
    assert entity_path((DEFAULT, "a b")) == "users/<default>/clients/a%20b"
    assert entity_path((None, DEFAULT)) == "clients/<default>"
    # Kafka writes a java.util.Properties: ConcurrentHashMap order, not sorted
    assert encode_config({"producer_byte_rate": 1024.0, "request_percentage": 12.5}) == (
        b'{"version":1,"config":{"request_percentage":"12.5","producer_byte_rate":"1024"}}'
    )
    assert encode_config({"consumer_byte_rate": 2048, "producer_byte_rate": 1024}) == (
        b'{"version":1,"config":{"producer_byte_rate":"1024","consumer_byte_rate":"2048"}}'
    )
    assert encode_config({"request_percentage": 50}) == (
        b'{"version":1,"config":{"request_percentage":"50.0"}}'
    )
    assert entity_path(("a~b*c", None)) == "users/a%7Eb%2Ac"
    assert change_notification(("alice", "app")) == (
        "/config/changes",
        b'{"version":2,"entity_path":"users/alice/clients/app"}',
    )
