"""JSON Schema in the registry: validation against its meta-schema (``jsonschema``) and a
compatibility check following Confluent's main rules for JSON Schema.

The stored form is the compact JSON of the schema with keys in their given order. Compatibility
(``read_compatibility(writer)``: can a consumer validating with this schema accept every
document the writer's schema accepts?) checks, recursively through ``properties``, ``items``
and the combinators:

* ``type``: the reader's types must include the writer's (``integer`` is narrower than
  ``number``);
* ``required``: a property the reader requires must be required by the writer too;
* ``properties``: a property only the writer has is refused when the reader is closed
  (``additionalProperties: false``); a property only the reader has is refused when the writer
  is open (it may carry anything under that name);
* ``enum``: the reader's values must include the writer's;
* ``additionalProperties``: closing an open content model is refused;
* numeric and length bounds may only widen.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["JsonSchema", "parse_json"]


class JsonSchema:
    schema_type = "JSON"

    def __init__(self, raw: Any, canonical: str) -> None:
        self.raw = raw
        self.canonical = canonical

    def normalized(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"), sort_keys=True, ensure_ascii=False)

    def read_compatibility(self, writer: Any) -> list[str]:
        out: list[str] = []
        _compare(self.raw, writer.raw, "#", out)
        return out


def parse_json(text: str, references: Sequence[str] = ()) -> JsonSchema:
    import jsonschema

    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"Invalid schema {text}, details: {exc}") from None
    if not isinstance(raw, (dict, bool)):
        raise ValueError(f"Invalid schema {text}, details: a JSON Schema is an object or a boolean")
    try:
        cls = (
            jsonschema.validators.validator_for(raw)
            if isinstance(raw, dict)
            else jsonschema.Draft7Validator
        )
        cls.check_schema(raw)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"Invalid schema {text}, details: {exc.message}") from None
    return JsonSchema(raw, json.dumps(raw, separators=(",", ":"), ensure_ascii=False))


def _types(node: dict[str, Any]) -> set[str] | None:
    t = node.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _msg(kind: str, path: str, detail: str) -> str:
    return (
        f"{{errorType:'{kind}', description:'{detail} at path '{path}'', additionalInfo:'{path}'}}"
    )


def _compare(reader: Any, writer: Any, path: str, out: list[str]) -> None:
    if reader is True or reader == {}:
        return
    if writer is True or writer == {}:
        if reader is not True and reader != {}:
            out.append(
                _msg("TYPE_NARROWED", path, "The new schema constrains what the old one left open")
            )
        return
    if reader is False or writer is False:
        if reader is False and writer is not False:
            out.append(_msg("TYPE_NARROWED", path, "The new schema accepts nothing"))
        return
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return
    rt, wt = _types(reader), _types(writer)
    if rt is not None:
        widened = set(rt) | ({"integer"} if "number" in rt else set())
        if wt is None or not wt <= widened:
            out.append(
                _msg(
                    "TYPE_CHANGED",
                    path,
                    f"The type changed from {sorted(wt or [])} to {sorted(rt)}",
                )
            )
            return
    if "enum" in reader and (
        "enum" not in writer or not all(v in reader["enum"] for v in writer["enum"])
    ):
        out.append(_msg("ENUM_ARRAY_NARROWED", path, "The enum values were narrowed"))
    for key, narrower in (
        ("maximum", "gt"),
        ("maxLength", "gt"),
        ("maxItems", "gt"),
        ("minimum", "lt"),
        ("minLength", "lt"),
        ("minItems", "lt"),
    ):
        if key in reader:
            w = writer.get(key)
            if (
                w is None
                or (narrower == "gt" and reader[key] < w)
                or (narrower == "lt" and reader[key] > w)
            ):
                out.append(
                    _msg(f"{key.upper()}_ADDED_OR_NARROWED", path, f"{key} was added or narrowed")
                )
    r_req, w_req = set(reader.get("required", [])), set(writer.get("required", []))
    for name in sorted(r_req - w_req):
        out.append(
            _msg(
                "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
                f"{path}/properties/{name}",
                f"The property '{name}' became required",
            )
        )
    r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
    r_open = reader.get("additionalProperties", True) is not False
    w_open = writer.get("additionalProperties", True) is not False
    if w_open and not r_open:
        out.append(_msg("ADDITIONAL_PROPERTIES_REMOVED", path, "additionalProperties was closed"))
    for name in sorted(set(r_props) | set(w_props)):
        sub = f"{path}/properties/{name}"
        if name in r_props and name in w_props:
            _compare(r_props[name], w_props[name], sub, out)
        elif name in w_props and not r_open:
            out.append(
                _msg(
                    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                    sub,
                    f"The property '{name}' was removed",
                )
            )
        elif name in r_props and w_open and r_props[name] not in (True, {}):
            out.append(
                _msg(
                    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", sub, f"The property '{name}' was added"
                )
            )
    if "items" in reader and "items" in writer:
        _compare(reader["items"], writer["items"], f"{path}/items", out)
