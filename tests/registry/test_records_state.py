"""``_schemas`` records in Confluent's bytes, and the state their replay builds."""

from __future__ import annotations

from odradek.registry.records import (
    ConfigRecord,
    DeleteSubjectRecord,
    ModeRecord,
    NoopRecord,
    Reference,
    SchemaRecord,
    decode,
)
from odradek.registry.state import RegistryState


def test_keys_in_confluents_order() -> None:
    assert (
        SchemaRecord("s", 2, 7, '"int"').key()
        == b'{"keytype":"SCHEMA","subject":"s","version":2,"magic":1}'
    )
    assert ConfigRecord(None, "FULL").key() == b'{"keytype":"CONFIG","magic":0}'
    assert ConfigRecord("s", "FULL").key() == b'{"keytype":"CONFIG","subject":"s","magic":0}'
    assert ModeRecord(None, "READONLY").key() == b'{"keytype":"MODE","magic":0}'
    assert (
        DeleteSubjectRecord("s", 3).key() == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    )
    assert NoopRecord().key() == b'{"keytype":"NOOP","magic":0}'


def test_values() -> None:
    assert SchemaRecord("s", 1, 5, '"int"').value() == (
        b'{"subject":"s","version":1,"id":5,"schema":"\\"int\\"","deleted":false}'
    )
    rec = SchemaRecord("s", 1, 5, "{}", "JSON", (Reference("r", "other", 2),), True)
    assert rec.value() == (
        b'{"subject":"s","version":1,"id":5,"schemaType":"JSON",'
        b'"references":[{"name":"r","subject":"other","version":2}],"schema":"{}","deleted":true}'
    )
    assert SchemaRecord("s", 1, tombstone=True).value() is None
    assert ConfigRecord("s", "FULL").value() == b'{"subject":"s","compatibilityLevel":"FULL"}'
    assert ConfigRecord(None, "NONE").value() == b'{"compatibilityLevel":"NONE"}'
    assert ConfigRecord("s", None).value() is None
    assert ModeRecord("s", "IMPORT").value() == b'{"subject":"s","mode":"IMPORT"}'
    assert DeleteSubjectRecord("s", 3).value() == b'{"subject":"s","version":3}'


def test_round_trip() -> None:
    for rec in [
        SchemaRecord("s", 1, 5, '"int"'),
        SchemaRecord("s", 1, 5, "{}", "JSON", (Reference("r", "o", 2),), True),
        SchemaRecord("s", 4, tombstone=True),
        ConfigRecord("s", "FULL"),
        ConfigRecord(None, "NONE"),
        ModeRecord(None, "READONLY"),
        ModeRecord("s", None),
        DeleteSubjectRecord("s", 3),
        NoopRecord(),
    ]:
        assert decode(rec.key(), rec.value()) == rec


def test_decodes_what_confluent_writes() -> None:
    # Confluent adds fields (md5, metadata ...) that odradek ignores, as Confluent does
    rec = decode(
        b'{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}',
        b'{"subject":"t-value","version":1,"id":1,"md5":"abc","schema":"\\"string\\"","deleted":false}',
    )
    assert rec == SchemaRecord("t-value", 1, 1, '"string"')


def _replay(*records: object) -> RegistryState:
    state = RegistryState()
    for r in records:
        state.apply(r)  # type: ignore[arg-type]
    return state


def test_replay_soft_and_hard_delete_keep_max_id() -> None:
    state = _replay(
        SchemaRecord("a", 1, 1, '"int"'),
        SchemaRecord("a", 2, 2, '"long"'),
        SchemaRecord("b", 1, 2, '"long"'),
        DeleteSubjectRecord("a", 2),
    )
    assert [r.version for r in state.live_versions("a")] == []
    assert [r.deleted for r in state.all_versions("a")] == [True, True]
    assert state.schemas[1].schema == '"int"'  # soft-deleted ids are still served
    state.apply(SchemaRecord("a", 1, tombstone=True))
    state.apply(SchemaRecord("a", 2, tombstone=True))
    assert "a" not in state.subjects
    assert 1 not in state.schemas  # no version holds id 1 any more
    assert state.schemas[2].schema == '"long"'  # b still holds id 2
    assert state.max_id == 2
    assert state.find_id('"long"', "AVRO", ()) == 2
    assert state.find_id('"int"', "AVRO", ()) is None


def test_replay_config_and_mode() -> None:
    state = _replay(
        ConfigRecord(None, "FULL"), ConfigRecord("s", "NONE"), ModeRecord("s", "READONLY")
    )
    assert state.configs == {None: "FULL", "s": "NONE"}
    state.apply(ConfigRecord("s", None))
    state.apply(ModeRecord("s", None))
    assert state.configs == {None: "FULL"}
    assert state.modes == {}
