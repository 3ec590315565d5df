"""``/schemas``: schemas by id, the list of schemas, the schema types."""

from __future__ import annotations

from typing import Any

from .. import errors
from ..schemas import SCHEMA_TYPES
from . import Call, Raw, Route, flag, page, schema_json


def _id(call: Call) -> int:
    try:
        return int(call.params["id"])
    except ValueError:
        raise errors.schema_not_found() from None


async def get_schema(call: Call) -> Any:
    stored = call.registry.schema_by_id(_id(call))
    out: dict[str, Any] = {}
    if stored.schema_type != "AVRO":
        out["schemaType"] = stored.schema_type
    if stored.references:
        out["references"] = [r.to_json() for r in stored.references]
    out["schema"] = stored.schema
    return out


async def get_schema_text(call: Call) -> Any:
    return Raw(call.registry.schema_by_id(_id(call)).schema.encode())


async def get_subjects(call: Call) -> Any:
    pairs = call.registry.subject_versions_by_id(_id(call), flag(call, "deleted"))
    return page(call, sorted({s for s, _v in pairs}))


async def get_versions(call: Call) -> Any:
    pairs = call.registry.subject_versions_by_id(_id(call), flag(call, "deleted"))
    return page(call, [{"subject": s, "version": v} for s, v in pairs])


async def list_schemas(call: Call) -> Any:
    recs = call.registry.list_schemas(
        call.query.get("subjectPrefix", ""), flag(call, "deleted"), flag(call, "latestOnly")
    )
    return page(call, [schema_json(r) for r in recs])


async def types(call: Call) -> Any:
    return list(SCHEMA_TYPES)


ROUTES: list[Route] = [
    ("GET", ("schemas",), list_schemas),
    ("GET", ("schemas", "types"), types),
    ("GET", ("schemas", "ids", "{id}"), get_schema),
    ("GET", ("schemas", "ids", "{id}", "schema"), get_schema_text),
    ("GET", ("schemas", "ids", "{id}", "subjects"), get_subjects),
    ("GET", ("schemas", "ids", "{id}", "versions"), get_versions),
]
