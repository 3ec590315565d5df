"""``/`` and ``/v1/metadata/id``."""

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


ROUTES: list[Route] = [
    ("GET", (), root),
    ("POST", (), root),
    ("GET", ("v1", "metadata", "id"), metadata_id),
]
