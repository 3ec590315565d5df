"""``/config``: the global and per-subject compatibility level (and ``normalize``)."""

from __future__ import annotations

from typing import Any

from . import Call, Route, flag


async def get_global(call: Call) -> Any:
    return call.registry.get_config(None, True)


async def put_global(call: Call) -> Any:
    return await call.registry.set_config(None, call.body)


async def delete_global(call: Call) -> Any:
    return await call.registry.delete_config(None)


async def get_subject(call: Call) -> Any:
    return call.registry.get_config(call.params["subject"], flag(call, "defaultToGlobal"))


async def put_subject(call: Call) -> Any:
    return await call.registry.set_config(call.params["subject"], call.body)


async def delete_subject(call: Call) -> Any:
    return await call.registry.delete_config(call.params["subject"])


ROUTES: list[Route] = [
    ("GET", ("config",), get_global),
    ("PUT", ("config",), put_global),
    ("DELETE", ("config",), delete_global),
    ("GET", ("config", "{subject}"), get_subject),
    ("PUT", ("config", "{subject}"), put_subject),
    ("DELETE", ("config", "{subject}"), delete_subject),
]
