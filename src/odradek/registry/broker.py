"""The schema registry inside a broker: ``schema.registry.listeners`` and the start/stop the
broker calls.

``schema.registry.listeners`` is ``http://host:port`` or ``https://host:port`` (comma-separated;
only the first is served; empty, the default, turns the registry off; port 0 picks a free port;
``https`` serves TLS with the ``ServerTls`` handed in as ``tls``, built by the broker from its
``ssl.*`` keys). With ``auth`` (the broker has an authorizer) requests need HTTP Basic
credentials of a SCRAM user and subjects are authorized on TOPIC ACLs (app.py);
``client_ssl`` is the TLS context a write is forwarded to an ``https`` writer with. ``BrokerSchemaRegistry(
kafka_address, replication_factor, listeners).start_soon()``, called once the broker serves
Kafka requests (``kafka_address`` is its advertised listener), starts in the
background: a ``SchemaStore`` talking to the broker's own advertised listener through
odradek.client, the replay of ``_schemas``, the HTTP server on the broker's event loop, then
the ``WriterElection`` (writes on a node that is not the writer are forwarded to it). It
logs ``schema registry listening on <url>`` once serving; if it cannot start, the broker runs
without it (logged as an error).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from odradek.console.listeners import http_url, parse_http_endpoints, parse_http_listeners

if TYPE_CHECKING:
    import ssl

    from odradek.security.http_auth import HttpAuthenticator
    from odradek.security.tls import ServerTls

__all__ = ["BrokerSchemaRegistry", "parse_registry_listeners"]

log = logging.getLogger("odradek.registry")


def parse_registry_listeners(text: str) -> list[tuple[str, int]]:
    """``"http://127.0.0.1:8081"`` -> [(host, port)]; "" -> []; ValueError when malformed."""
    return parse_http_listeners(text)


class BrokerSchemaRegistry:
    """``bound`` is (host, port) once listening, else None."""

    def __init__(
        self,
        kafka_address: tuple[str, int],
        replication_factor: int,
        listeners: str,
        topic: str = "_schemas",
        *,
        tls: ServerTls | None = None,
        auth: HttpAuthenticator | None = None,
        client_ssl: ssl.SSLContext | None = None,
        client_config: dict[str, str] | None = None,
    ) -> None:
        """``replication_factor`` of ``_schemas`` when this node creates it (Confluent's
        kafkastore.topic.replication.factor is 3; the broker passes at most its default).
        ``client_config``: the Java-client security settings its Kafka clients connect to
        ``kafka_address`` with (``broker.internal_clients``)."""
        self.kafka_address = kafka_address
        self.client_config = dict(client_config or {})
        self.replication_factor = replication_factor
        self.endpoints = parse_http_endpoints(listeners)
        self.addresses = [(e.host, e.port) for e in self.endpoints]
        self.tls = tls
        self.auth = auth
        self.client_ssl = client_ssl
        self.topic = topic
        self.bound: tuple[str, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._store: Any = None
        self._server: Any = None
        self._election: Any = None

    @property
    def url(self) -> str | None:
        if self.bound is None:
            return None
        host, port = self.bound
        return http_url(self.endpoints[0].scheme, host, port)

    def start_soon(self) -> None:
        if self.addresses and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._start())

    async def started(self) -> None:
        if self._task is not None:
            await asyncio.shield(self._task)

    async def _start(self) -> None:
        try:
            await self._listen()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("schema registry failed to start (the broker runs without it)")
            await self._close()

    async def _listen(self) -> None:
        from .app import RegistryApp, RegistryHttpServer
        from .election import WriterElection
        from .service import SchemaRegistry
        from .store import SchemaStore

        kafka_host, kafka_port = self.kafka_address
        store = SchemaStore(
            f"{kafka_host}:{kafka_port}",
            topic=self.topic,
            replication_factor=self.replication_factor,
            client_config=self.client_config,
        )
        self._store = store
        await store.start()
        info = {"cluster_id": store.cluster_id}
        endpoint = self.endpoints[0]
        if endpoint.tls and self.tls is None:
            raise ValueError(f"{http_url(*endpoint)} needs the broker's ssl.keystore.* keys")
        app = RegistryApp(SchemaRegistry(store), info, auth=self.auth, client_ssl=self.client_ssl)
        server = RegistryHttpServer(app)
        host, port = endpoint.host, endpoint.port
        bound_port = await server.start(
            host, port, self.tls.context if endpoint.tls and self.tls is not None else None
        )
        self._server = server
        self.bound = (host, bound_port)
        if host in ("", "0.0.0.0", "::"):  # other nodes reach this one at the broker's host
            host = kafka_host
        url = http_url(endpoint.scheme, host, bound_port)
        election = WriterElection(
            f"{kafka_host}:{kafka_port}", url, topic=self.topic, client_config=self.client_config
        )
        self._election = election
        await election.start()
        app.election = election
        log.info("schema registry listening on %s", self.url)

    async def _close(self) -> None:
        server, self._server = self._server, None
        store, self._store = self._store, None
        election, self._election = self._election, None
        if election is not None:  # first: the group moves the writer elsewhere at once
            with contextlib.suppress(Exception):
                await election.close()
        if server is not None:
            with contextlib.suppress(Exception):
                await server.stop()
        if store is not None:
            with contextlib.suppress(Exception):
                await store.close()
        self.bound = None

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._close()
