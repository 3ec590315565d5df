"""The registry's HTTP face: routes a request to a router's handler and writes Confluent's
answers (content type ``application/vnd.schemaregistry.v1+json``, compact JSON, errors as
``{"error_code","message"}``).

Path segments are URL-decoded one by one after splitting on ``/``, so a subject may contain an
encoded ``/`` (``%2F``). A path no route knows gets 404 with error_code 404 (as Jersey answers),
a known path with another method 405, a body that is not JSON 400, an unexpected exception 500
with error_code 50001... never an HTML page.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import unquote

from odradek.console.http import Request, Response

from .errors import RegistryError, error_body
from .routers import Call, Raw, Route, compatibility, config, dumps, mode, root, schemas, subjects
from .service import SchemaRegistry

__all__ = ["CONTENT_TYPE", "RegistryApp"]

log = logging.getLogger("odradek.registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ROUTES: list[Route] = [
    *root.ROUTES,
    *schemas.ROUTES,
    *subjects.ROUTES,
    *compatibility.ROUTES,
    *config.ROUTES,
    *mode.ROUTES,
]


def _match(pattern: tuple[str, ...], parts: list[str]) -> dict[str, str] | None:
    if len(pattern) != len(parts):
        return None
    params: dict[str, str] = {}
    for want, got in zip(pattern, parts, strict=True):
        if want.startswith("{"):
            params[want[1:-1]] = got
        elif want != got:
            return None
    return params


class RegistryApp:
    """``await app(request)`` -> response; ``info`` carries ``cluster_id`` for the metadata
    route."""

    def __init__(self, registry: SchemaRegistry, info: dict[str, Any] | None = None) -> None:
        self.registry = registry
        self.info = info if info is not None else {}

    @staticmethod
    def _error(status: int, code: int, message: str) -> Response:
        return Response(status, error_body(code, message), CONTENT_TYPE)

    async def __call__(self, request: Request) -> Response:
        parts = [unquote(p) for p in request.path.strip("/").split("/") if p]
        method = request.method.upper()
        known_path = False
        for route_method, pattern, handler in ROUTES:
            params = _match(pattern, parts)
            if params is None:
                continue
            known_path = True
            if route_method != method:
                continue
            body: Any = None
            if request.body:
                try:
                    body = json.loads(request.body)
                except ValueError as exc:
                    return self._error(400, 400, f"Unrecognized JSON: {exc}")
            call = Call(self.registry, params, request.query, body, self.info)
            try:
                result = await handler(call)
            except RegistryError as exc:
                return Response(exc.status, exc.body(), CONTENT_TYPE)
            except TimeoutError:
                return self._error(500, 50002, "Operation timed out")
            except Exception as exc:
                log.exception("schema registry: %s %s failed", method, request.path)
                return self._error(500, 50001, f"Error in the backend data store: {exc}")
            if isinstance(result, Raw):
                return Response(200, result.body, CONTENT_TYPE)
            return Response(200, dumps(result), CONTENT_TYPE)
        if known_path:
            return self._error(405, 405, "HTTP 405 Method Not Allowed")
        return self._error(404, 404, "HTTP 404 Not Found")
