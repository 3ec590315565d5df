"""The registry's HTTP face: routes a request to a router's handler and writes Confluent's
answers (content type ``application/vnd.schemaregistry.v1+json``, compact JSON, errors as
``{"error_code","message"}``).

Path segments are URL-decoded one by one after splitting on ``/``, so a subject may contain an
encoded ``/`` (``%2F``). A path no route knows gets 404 with error_code 404 (as Jersey answers),
a known path with another method 405, a body that is not JSON 400, an unexpected exception 500
with error_code 50001... never an HTML page.

Authentication and authorization (with ``auth``, an ``HttpAuthenticator``: the broker has an
authorizer), in Confluent's terms ``authentication.method=BASIC`` with the broker's SCRAM users,
and subjects authorized on Kafka's TOPIC ACLs as Confluent's topic-ACL authorizer does
(the subject's topic by ``TopicNameStrategy``: ``orders-value`` and ``orders-key`` -> topic
``orders``; any other subject -> the topic of its own name):

* no or wrong credentials: 401 ``{"error_code":401,"message":"Unauthorized"}`` with
  ``WWW-Authenticate: Basic realm="SchemaRegistry"``;
* a route naming a subject: READ on its topic to read it (GET, the lookup ``POST
  /subjects/{s}``, the compatibility checks), WRITE to register or to change its config or
  mode (POST, PUT), DELETE to delete it or a version; refused: 403 with error_code 40301;
* ``PUT``/``DELETE /config`` and ``/mode`` (global): ALTER_CONFIGS on the cluster;
* other reads (``/schemas/ids/{id}``, ``/config``, ``/mode``, ``/schemas/types``, ``/``): any
  authenticated user (a consumer decodes by id); lists (``/subjects``, ``/schemas``,
  ``/schemas/ids/{id}/subjects|versions``) keep only the subjects the user may READ.

A write forwarded to the writer carries the client's ``Authorization`` header, and the writer
checks it again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import unquote, urlencode

from odradek.console.http import HttpServer, Request, Response
from odradek.security.acls import AclOperation, ResourceType
from odradek.security.http_auth import (
    CLUSTER_NAME,
    HttpAuthenticator,
    HttpPrincipal,
    subject_topic,
)

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
LISTS = frozenset(
    [subjects.list_subjects, schemas.list_schemas, schemas.get_subjects, schemas.get_versions]
)
"""The handlers whose answer lists subjects: filtered to what the user may READ."""
UNAUTHORIZED = 401
FORBIDDEN = 40301
_OPERATION_NAMES = {
    AclOperation.READ: "Read",
    AclOperation.WRITE: "Write",
    AclOperation.DELETE: "Delete",
    AclOperation.ALTER_CONFIGS: "AlterConfigs",
}


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
        auth: HttpAuthenticator | None = None,
        client_ssl: Any = None,
    ) -> None:
        self.registry = registry
        self.info = info if info is not None else {}
        self.election = election
        self.auth = auth
        self.client_ssl = client_ssl
        """The TLS context writes are forwarded with to an ``https`` writer."""

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
                authorization = request.headers.get("authorization")
                status, ctype, body = await forward(
                    url,
                    request.method,
                    target,
                    request.body,
                    CONTENT_TYPE,
                    FORWARD_TIMEOUT_S,
                    extra_headers=[("authorization", authorization)] if authorization else [],
                    ssl_context=self.client_ssl,
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

    async def _authenticate(self, request: Request) -> HttpPrincipal | None:
        assert self.auth is not None
        header = request.headers.get("authorization", "")
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() == "basic":
            return await self.auth.basic(header)
        if scheme.lower() == "bearer":
            return self.auth.token(value.strip())
        return None

    def _refusal(
        self, who: HttpPrincipal, host: str, method: str, handler: Any, params: dict[str, str]
    ) -> Response | None:
        """403 when ``who`` may not call ``handler`` (see the module docstring), else None."""
        assert self.auth is not None
        subject = params.get("subject")
        if subject is not None:
            if handler in WRITES:
                operation = AclOperation.DELETE if method == "DELETE" else AclOperation.WRITE
            else:
                operation = AclOperation.READ
            if self.auth.authorize(
                who, host, operation, ResourceType.TOPIC, subject_topic(subject)
            ):
                return None
            what = f"Subject: {subject}"
        elif handler in WRITES:
            operation = AclOperation.ALTER_CONFIGS
            if self.auth.authorize(who, host, operation, ResourceType.CLUSTER, CLUSTER_NAME):
                return None
            what = f"Cluster: {CLUSTER_NAME}"
        else:
            return None
        return self._error(
            403, FORBIDDEN, f"User is denied operation {_OPERATION_NAMES[operation]} on {what}"
        )

    def _visible(self, who: HttpPrincipal, host: str, handler: Any, result: Any) -> Any:
        """A list answer of ``LISTS`` without the subjects ``who`` may not READ (the items are
        subject names, or objects with a ``subject``)."""
        auth = self.auth
        if auth is None or handler not in LISTS or not isinstance(result, list):
            return result

        def readable(item: object) -> bool:
            subject = item.get("subject") if isinstance(item, dict) else item
            if not isinstance(subject, str):
                return True
            return auth.authorize(
                who, host, AclOperation.READ, ResourceType.TOPIC, subject_topic(subject)
            )

        return [item for item in result if readable(item)]

    async def __call__(self, request: Request) -> Response:
        parts = [unquote(p) for p in request.path.strip("/").split("/") if p]
        method = request.method.upper()
        who: HttpPrincipal | None = None
        if self.auth is not None:
            who = await self._authenticate(request)
            if who is None:
                return Response(
                    401,
                    error_body(UNAUTHORIZED, "Unauthorized"),
                    CONTENT_TYPE,
                    [("www-authenticate", 'Basic realm="SchemaRegistry", charset="UTF-8"')],
                )
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
            if who is not None:
                refused = self._refusal(who, request.client, method, handler, params)
                if refused is not None:
                    return refused
            try:
                if handler in WRITES:
                    forwarded = await self._forward(request)
                    if forwarded is not None:
                        return forwarded
                result = await handler(call)
            except RegistryError as exc:
                return Response(exc.status, exc.body(), CONTENT_TYPE)
            except TimeoutError:
                log.warning("schema registry: %s %s timed out", method, request.path, exc_info=True)
                return self._error(500, 50002, "Operation timed out")
            except Exception as exc:
                log.exception("schema registry: %s %s failed", method, request.path)
                return self._error(500, 50001, f"Error in the backend data store: {exc}")
            if isinstance(result, Raw):
                return Response(200, result.body, CONTENT_TYPE)
            if who is not None:
                result = self._visible(who, request.client, handler, result)
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
