"""Avro compatibility levels: the cases of Confluent's AvroCompatibilityTest, restated.

Schemas (all records named ``myrecord``):
  one    f1: string
  two    f1: string, f2: string default "foo"
  three  f1: string, f2: string (no default)
  four   f1_new: string with alias f1
  six    f1: [null, string]
  seven  f1: [null, string, int]
  eight  f1, f2 default "foo", f3 default "bar"
``history`` is given oldest first, as in the original; the check takes newest first.
"""

from __future__ import annotations

import json

import pytest

from odradek.registry.avro_format import parse_avro
from odradek.registry.compatibility import check


def _record(*fields: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": "myrecord", "fields": list(fields)})


S = {
    "one": _record({"type": "string", "name": "f1"}),
    "two": _record(
        {"type": "string", "name": "f1"}, {"type": "string", "name": "f2", "default": "foo"}
    ),
    "three": _record({"type": "string", "name": "f1"}, {"type": "string", "name": "f2"}),
    "four": _record({"type": "string", "name": "f1_new", "aliases": ["f1"]}),
    "six": _record({"type": ["null", "string"], "name": "f1", "doc": "doc of f1"}),
    "seven": _record({"type": ["null", "string", "int"], "name": "f1", "doc": "doc of f1"}),
    "eight": _record(
        {"type": "string", "name": "f1"},
        {"type": "string", "name": "f2", "default": "foo"},
        {"type": "string", "name": "f3", "default": "bar"},
    ),
}


def compatible(level: str, new: str, history: list[str]) -> bool:
    previous = [(i + 1, parse_avro(S[name])) for i, name in enumerate(history)]
    return check(level, parse_avro(S[new]), list(reversed(previous))) == []


CASES = [
    # BACKWARD: the new schema reads data written with the latest one
    ("BACKWARD", "two", ["one"], True),  # a field added with a default
    ("BACKWARD", "three", ["one"], False),  # a field added without a default
    ("BACKWARD", "four", ["one"], True),  # a field renamed with an alias
    ("BACKWARD", "six", ["one"], True),  # a type widened to a union
    ("BACKWARD", "one", ["six"], False),  # a union narrowed to one branch
    ("BACKWARD", "seven", ["six"], True),  # a branch added to a union
    ("BACKWARD", "six", ["seven"], False),  # a branch removed from a union
    ("BACKWARD", "three", ["one", "two"], True),  # only the latest counts
    # BACKWARD_TRANSITIVE: every earlier version counts
    ("BACKWARD_TRANSITIVE", "eight", ["one", "two"], True),
    ("BACKWARD_TRANSITIVE", "two", ["one"], True),
    ("BACKWARD_TRANSITIVE", "three", ["two"], True),
    ("BACKWARD_TRANSITIVE", "three", ["one", "two"], False),
    # FORWARD: the latest schema reads data written with the new one
    ("FORWARD", "two", ["one"], True),
    ("FORWARD", "three", ["one"], True),
    ("FORWARD", "three", ["two"], True),
    ("FORWARD", "two", ["three"], True),
    ("FORWARD", "one", ["three", "two"], True),  # only the latest (two) counts
    # FORWARD_TRANSITIVE
    ("FORWARD_TRANSITIVE", "one", ["eight", "two"], True),
    ("FORWARD_TRANSITIVE", "two", ["three"], True),
    ("FORWARD_TRANSITIVE", "one", ["two"], True),
    ("FORWARD_TRANSITIVE", "one", ["three", "two"], False),
    # FULL: both directions against the latest
    ("FULL", "two", ["one"], True),
    ("FULL", "three", ["one", "two"], True),
    ("FULL", "one", ["three", "two"], True),
    # FULL_TRANSITIVE: both directions against every version
    ("FULL_TRANSITIVE", "eight", ["one", "two"], True),
    ("FULL_TRANSITIVE", "one", ["eight", "two"], True),
    ("FULL_TRANSITIVE", "two", ["three"], True),
    ("FULL_TRANSITIVE", "one", ["two"], True),
    ("FULL_TRANSITIVE", "two", ["one"], True),
    ("FULL_TRANSITIVE", "three", ["two"], True),
    ("FULL_TRANSITIVE", "three", ["one", "two"], False),
    ("FULL_TRANSITIVE", "one", ["three", "two"], False),
    # NONE: anything goes
    ("NONE", "three", ["one"], True),
    ("NONE", "one", ["six"], True),
]


@pytest.mark.parametrize(("level", "new", "history", "expected"), CASES)
def test_confluent_cases(level: str, new: str, history: list[str], expected: bool) -> None:
    assert compatible(level, new, history) is expected


def test_bad_null_default_still_parses() -> None:
    # a union [null, string] with the string "null" as its default: Avro accepts it
    parse_avro(
        _record(
            {"type": ["null", "string"], "name": "f1", "default": "null"},
            {"type": "string", "name": "f2", "default": "foo"},
        )
    )


def test_messages_in_confluent_form() -> None:
    messages = check("BACKWARD", parse_avro(S["three"]), [(1, parse_avro(S["one"]))])
    assert messages[0] == (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path "
        "'/fields/1' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'f2'}"
    )
    assert messages[1:] == [
        "{oldSchemaVersion: 1}",
        '{oldSchema: \'{"type":"record","name":"myrecord","fields":[{"name":"f1","type":"string"}]}\'}',
        "{compatibility: 'BACKWARD'}",
    ]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ('{"type": "string"}', '"string"'),  # a primitive without properties is its name
        ('"int"', '"int"'),
        (
            '{"type":"long","logicalType":"timestamp-millis"}',
            '{"type":"long","logicalType":"timestamp-millis"}',
        ),
        (
            '{"fields":[{"type":"int","name":"a","default":1,"doc":"d"}],"name":"x.y.R","type":"record"}',
            '{"type":"record","name":"R","namespace":"x.y","fields":[{"name":"a","type":"int","doc":"d","default":1}]}',
        ),
        (
            '{"type":"record","name":"R","namespace":"n","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},{"name":"f","type":"E"}]}',
            '{"type":"record","name":"R","namespace":"n","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},{"name":"f","type":"E"}]}',
        ),
        (
            '{"type":"array","items":{"type":"map","values":"bytes"}}',
            '{"type":"array","items":{"type":"map","values":"bytes"}}',
        ),
    ],
)
def test_stored_form(given: str, stored: str) -> None:
    assert parse_avro(given).canonical == stored


def test_normalized_qualifies_names_and_drops_docs() -> None:
    a = parse_avro(
        '{"type":"record","name":"R","namespace":"n","doc":"x","fields":[{"name":"f","type":"int"}]}'
    )
    b = parse_avro('{"type":"record","name":"n.R","fields":[{"name":"f","type":"int","doc":"y"}]}')
    assert a.canonical != b.canonical
    assert (
        a.normalized()
        == b.normalized()
        == '{"type":"record","name":"n.R","fields":[{"name":"f","type":"int"}]}'
    )


@pytest.mark.parametrize(
    "bad",
    [
        '{"type":"record","name":"X"}',  # no fields
        '{"type":"recordz","name":"X","fields":[]}',
        '{"type":"enum","name":"E","symbols":["A","A"]}',
        "not json",
        '{"type":"record","name":"R","fields":[{"name":"f","type":"Missing"}]}',
    ],
)
def test_invalid_schemas(bad: str) -> None:
    with pytest.raises(ValueError, match="Invalid schema"):
        parse_avro(bad)


def test_references_define_names() -> None:
    address = '{"type":"record","name":"Address","namespace":"n","fields":[{"name":"city","type":"string"}]}'
    user = '{"type":"record","name":"User","namespace":"n","fields":[{"name":"home","type":"Address"}]}'
    with pytest.raises(ValueError):
        parse_avro(user)
    assert parse_avro(user, [address]).canonical == user.replace(" ", "")
