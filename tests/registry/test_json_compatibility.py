"""JSON Schema: meta-schema validation and the compatibility rules (BACKWARD: the new schema
must accept every document the old one accepts)."""

from __future__ import annotations

import json

import pytest

from odradek.registry.compatibility import check
from odradek.registry.json_format import parse_json


def _obj(props: dict[str, object], **kw: object) -> str:
    return json.dumps({"type": "object", "properties": props, **kw})


def backward(new: str, old: str) -> bool:
    return check("BACKWARD", parse_json(new), [(1, parse_json(old))]) == []


@pytest.mark.parametrize(
    ("new", "old", "ok"),
    [
        (_obj({"a": {"type": "string"}}), _obj({"a": {"type": "string"}}), True),
        (_obj({"a": {"type": "number"}}), _obj({"a": {"type": "integer"}}), True),  # widened
        (_obj({"a": {"type": "integer"}}), _obj({"a": {"type": "number"}}), False),  # narrowed
        (_obj({"a": {"type": ["string", "null"]}}), _obj({"a": {"type": "string"}}), True),
        (_obj({"a": {"type": "string"}}, required=["a"]), _obj({"a": {"type": "string"}}), False),
        (_obj({"a": {"type": "string"}}), _obj({"a": {"type": "string"}}, required=["a"]), True),
        # closed content models: a removed property is refused, an added one accepted
        (
            _obj({"a": {"type": "string"}}, additionalProperties=False),
            _obj({"a": {"type": "string"}, "b": {"type": "string"}}, additionalProperties=False),
            False,
        ),
        (
            _obj({"a": {"type": "string"}, "b": {"type": "string"}}, additionalProperties=False),
            _obj({"a": {"type": "string"}}, additionalProperties=False),
            True,
        ),
        # open content model: an added constrained property may clash with what old data holds
        (
            _obj({"a": {"type": "string"}, "b": {"type": "string"}}),
            _obj({"a": {"type": "string"}}),
            False,
        ),
        (
            _obj({"a": {"type": "string"}}, additionalProperties=False),
            _obj({"a": {"type": "string"}}),
            False,
        ),
        (_obj({"e": {"enum": ["x", "y", "z"]}}), _obj({"e": {"enum": ["x", "y"]}}), True),
        (_obj({"e": {"enum": ["x"]}}), _obj({"e": {"enum": ["x", "y"]}}), False),
        (
            _obj({"n": {"type": "integer", "maximum": 10}}),
            _obj({"n": {"type": "integer", "maximum": 20}}),
            False,
        ),
        (
            _obj({"n": {"type": "integer", "maximum": 30}}),
            _obj({"n": {"type": "integer", "maximum": 20}}),
            True,
        ),
        (
            json.dumps({"type": "array", "items": {"type": "integer"}}),
            json.dumps({"type": "array", "items": {"type": "string"}}),
            False,
        ),
    ],
)
def test_backward(new: str, old: str, ok: bool) -> None:
    assert backward(new, old) is ok


def test_forward_is_the_other_direction() -> None:
    old, new = _obj({"a": {"type": "integer"}}), _obj({"a": {"type": "number"}})
    assert check("FORWARD", parse_json(new), [(1, parse_json(old))]) != []
    assert check("FULL", parse_json(new), [(1, parse_json(old))]) != []
    assert check("BACKWARD", parse_json(new), [(1, parse_json(old))]) == []


@pytest.mark.parametrize(
    "bad", ['{"type": 5}', '{"properties": {"a": {"type": "strung"}}}', "[1]", "{"]
)
def test_invalid(bad: str) -> None:
    with pytest.raises(ValueError, match="Invalid schema"):
        parse_json(bad)
