"""``/``, ``/contexts`` (only the default context ``.``) and ``/v1/metadata/{id,version}``."""

from __future__ import annotations

from typing import Any

from . import Call, Route


async def root(call: Call) -> Any:
    return {}


async def metadata_id(call: Call) -> Any:
    return {
        "scope": {
            "path": [],
            "clusters": {
                "kafka-cluster": call.info.get("cluster_id") or "",
                "schema-registry-cluster": "schema-registry",
            },
        }
    }


async def contexts(call: Call) -> Any:
    return ["."]


async def metadata_version(call: Call) -> Any:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("odradek")
    except PackageNotFoundError:
        v = "unknown"
    return {"version": v, "commitId": ""}


ROUTES: list[Route] = [
    ("GET", ("contexts",), contexts),
    ("GET", ("v1", "metadata", "version"), metadata_version),
    ("GET", (), root),
    ("POST", (), root),
    ("GET", ("v1", "metadata", "id"), metadata_id),
]
