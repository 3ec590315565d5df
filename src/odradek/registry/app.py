"""The registry's HTTP face: routes a request to a router's handler and writes Confluent's
answers (content type ``application/vnd.schemaregistry.v1+json``, compact JSON, errors as
``{"error_code","message"}``).

Path segments are URL-decoded one by one after splitting on ``/``, so a subject may contain an
encoded ``/`` (``%2F``). A path no route knows gets 404 with error_code 404 (as Jersey answers),
a known path with another method 405, a body that is not JSON 400, an unexpected exception 500
with error_code 50001... never an HTML page.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import unquote, urlencode

from odradek.console.http import HttpServer, Request, Response

from .election import WriterElection
from .errors import RegistryError, error_body
from .forward import forward
from .routers import Call, Raw, Route, compatibility, config, dumps, mode, root, schemas, subjects
from .service import SchemaRegistry

__all__ = ["CONTENT_TYPE", "RegistryApp", "RegistryHttpServer"]

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


WRITES = frozenset(
    [
        subjects.register,
        subjects.delete_subject,
        subjects.delete_version,
        config.put_global,
        config.put_subject,
        config.delete_global,
        config.delete_subject,
        mode.put_global,
        mode.put_subject,
        mode.delete_global,
        mode.delete_subject,
    ]
)
"""The handlers that write ``_schemas``: forwarded to the writer when this node is not it."""
FORWARD_TIMEOUT_S = 30.0
WRITER_WAIT_S = 25.0
"""How long a write waits for a writer (a session timeout and a rebalance) before 50004."""


class RegistryApp:
    """``await app(request)`` -> response; ``info`` carries ``cluster_id`` for the metadata
    route. With an ``election`` (``WriterElection``), a write on a node that is not the writer is
    forwarded to the writer as is and its answer relayed; the node then catches up with
    ``_schemas`` before answering, so a read after the write on this node sees it."""

    def __init__(
        self,
        registry: SchemaRegistry,
        info: dict[str, Any] | None = None,
        election: WriterElection | None = None,
    ) -> None:
        self.registry = registry
        self.info = info if info is not None else {}
        self.election = election

    async def _forward(self, request: Request) -> Response | None:
        """The writer's answer to ``request``, or None when this node is the writer. A writer
        that refuses the connection (it died; the group has not noticed yet) is asked for again
        until ``WRITER_WAIT_S``: nothing was sent to it, so trying again is safe."""
        election = self.election
        if election is None or election.is_writer:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WRITER_WAIT_S
        target = request.path + (f"?{urlencode(request.query)}" if request.query else "")
        while True:
            url = await election.wait_writer(max(0.0, deadline - loop.time()))
            if url is None:
                return self._error(500, 50004, "Leader not known.")
            if url == election.url:
                return None
            try:
                status, ctype, body = await forward(
                    url, request.method, target, request.body, CONTENT_TYPE, FORWARD_TIMEOUT_S
                )
            except ConnectionRefusedError:
                if loop.time() > deadline:
                    return self._error(500, 50004, "Leader not known.")
                await asyncio.sleep(0.2)
                continue
            except (OSError, TimeoutError) as exc:
                return self._error(
                    500, 50003, f"Error while forwarding the request to the leader {url}: {exc}"
                )
            if 200 <= status < 300:
                await self.registry.store.catch_up()
            return Response(status, body, ctype or CONTENT_TYPE)

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
                if handler in WRITES:
                    forwarded = await self._forward(request)
                    if forwarded is not None:
                        return forwarded
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


class RegistryHttpServer(HttpServer):
    """The project's HTTP server, its own plain-text answers (a malformed request, a body over
    ``console.http.MAX_BODY``, a handler crash) written as Confluent error bodies."""

    async def _send(self, conn: Any, writer: Any, response: Response, close: bool = False) -> None:
        if response.content_type.startswith("text/plain"):
            text = response.body.decode("utf-8", "replace").strip() or "error"
            response = Response(response.status, error_body(response.status, text), CONTENT_TYPE)
        await super()._send(conn, writer, response, close)
