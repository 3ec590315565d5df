"""``/subjects``: subjects, their versions, registration, lookup and deletes."""

from __future__ import annotations

from typing import Any

from . import Call, Raw, Route, flag, page, schema_json


async def list_subjects(call: Call) -> Any:
    return page(
        call,
        call.registry.list_subjects(
            call.query.get("subjectPrefix", ""), flag(call, "deleted"), flag(call, "deletedOnly")
        ),
    )


async def lookup(call: Call) -> Any:
    rec = call.registry.lookup(
        call.params["subject"], call.body, flag(call, "normalize"), flag(call, "deleted")
    )
    return schema_json(rec)


async def delete_subject(call: Call) -> Any:
    return await call.registry.delete_subject(call.params["subject"], flag(call, "permanent"))


async def list_versions(call: Call) -> Any:
    return page(
        call,
        call.registry.list_versions(
            call.params["subject"], flag(call, "deleted"), flag(call, "deletedOnly")
        ),
    )


async def register(call: Call) -> Any:
    schema_id = await call.registry.register(
        call.params["subject"], call.body, flag(call, "normalize")
    )
    return {"id": schema_id}


async def get_version(call: Call) -> Any:
    rec = call.registry.get_version(
        call.params["subject"], call.params["version"], flag(call, "deleted")
    )
    return schema_json(rec)


async def get_version_schema(call: Call) -> Any:
    rec = call.registry.get_version(
        call.params["subject"], call.params["version"], flag(call, "deleted")
    )
    return Raw(rec.schema.encode())


async def referenced_by(call: Call) -> Any:
    return page(call, call.registry.referenced_by(call.params["subject"], call.params["version"]))


async def delete_version(call: Call) -> Any:
    return await call.registry.delete_version(
        call.params["subject"], call.params["version"], flag(call, "permanent")
    )


ROUTES: list[Route] = [
    ("GET", ("subjects",), list_subjects),
    ("POST", ("subjects", "{subject}"), lookup),
    ("DELETE", ("subjects", "{subject}"), delete_subject),
    ("GET", ("subjects", "{subject}", "versions"), list_versions),
    ("POST", ("subjects", "{subject}", "versions"), register),
    ("GET", ("subjects", "{subject}", "versions", "{version}"), get_version),
    ("DELETE", ("subjects", "{subject}", "versions", "{version}"), delete_version),
    ("GET", ("subjects", "{subject}", "versions", "{version}", "schema"), get_version_schema),
    ("GET", ("subjects", "{subject}", "versions", "{version}", "referencedby"), referenced_by),
]
