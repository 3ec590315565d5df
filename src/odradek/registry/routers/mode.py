"""``/mode``: the global and per-subject mode (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT)."""

from __future__ import annotations

from typing import Any

from . import Call, Route, flag


async def get_global(call: Call) -> Any:
    return {"mode": call.registry.get_mode(None, True)}


async def put_global(call: Call) -> Any:
    return {"mode": await call.registry.set_mode(None, call.body, flag(call, "force"))}


async def delete_global(call: Call) -> Any:
    return {"mode": await call.registry.delete_mode(None)}


async def get_subject(call: Call) -> Any:
    return {"mode": call.registry.get_mode(call.params["subject"], flag(call, "defaultToGlobal"))}


async def put_subject(call: Call) -> Any:
    return {
        "mode": await call.registry.set_mode(call.params["subject"], call.body, flag(call, "force"))
    }


async def delete_subject(call: Call) -> Any:
    return {"mode": await call.registry.delete_mode(call.params["subject"])}


ROUTES: list[Route] = [
    ("GET", ("mode",), get_global),
    ("PUT", ("mode",), put_global),
    ("DELETE", ("mode",), delete_global),
    ("GET", ("mode", "{subject}"), get_subject),
    ("PUT", ("mode", "{subject}"), put_subject),
    ("DELETE", ("mode", "{subject}"), delete_subject),
]
