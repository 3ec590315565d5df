"""``/compatibility``: test a schema against a subject's versions (``?verbose=true`` adds the
messages)."""

from __future__ import annotations

from typing import Any

from . import Call, Route, flag


def _answer(call: Call, messages: list[str]) -> Any:
    out: dict[str, Any] = {"is_compatible": not messages}
    if flag(call, "verbose"):
        out["messages"] = messages
    return out


async def against_all(call: Call) -> Any:
    messages = call.registry.test_compatibility(
        call.params["subject"], None, call.body, flag(call, "normalize")
    )
    return _answer(call, messages)


async def against_version(call: Call) -> Any:
    messages = call.registry.test_compatibility(
        call.params["subject"], call.params["version"], call.body, flag(call, "normalize")
    )
    return _answer(call, messages)


ROUTES: list[Route] = [
    ("POST", ("compatibility", "subjects", "{subject}", "versions"), against_all),
    ("POST", ("compatibility", "subjects", "{subject}", "versions", "{version}"), against_version),
]
