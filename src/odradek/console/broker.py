"""The console inside a broker: ``http.listeners`` parsing and the start/stop the broker calls.

``http.listeners`` is a comma-separated list of ``http://host:port`` or ``https://host:port``
(default ``http://127.0.0.1:9644``; empty turns the listener off; port 0 picks a free port). Only
the first entry is served for now. ``https`` serves TLS with the ``ServerTls`` the broker hands
over (``ConsoleHost.tls``, built from its ``ssl.*`` keys; renewed key and certificate files are
picked up by the next handshake, as on the Kafka listeners).

With ``ConsoleHost.auth`` (the broker has an authorizer) the console asks for a login
(console/auth.py) and shows each user what their ACLs allow.

``BrokerConsole(host, listeners).start_soon()`` (called once the broker serves Kafka requests)
imports the console's modules in a worker thread, then builds:

* a ``BrokerMetrics`` (request counts and latency) handed back to the broker through
  ``host.install_metrics``, after which its connections feed it;
* ``BrokerStateCollector`` (log sizes and offsets, connections, purgatory) and ``EventLoopLag``;
* a ``ClusterSource`` talking to the broker's own advertised Kafka address through
  odradek.client on the same event loop (topics, groups, lag: kafka_exporter's series), with
  log sizes read from the broker's logs;
* the ``Console`` HTTP server on the same loop.

If the HTTP port cannot be bound the broker keeps running without a console (logged as an error).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.console.listeners import http_url, parse_http_endpoints

if TYPE_CHECKING:
    from odradek.metrics.broker import BrokerMetrics, BrokerState
    from odradek.metrics.client_telemetry import ClientTelemetrySource
    from odradek.security.http_auth import HttpAuthenticator
    from odradek.security.tls import ServerTls

__all__ = ["BrokerConsole", "ConsoleHost"]

log = logging.getLogger("odradek.console")

METRICS_MAX_AGE_S = 5.0
"""Inside a broker, /metrics is rendered (and its cluster snapshot taken) at most every 5 s:
the work runs on the broker's event loop, and a scraper much faster than Prometheus' usual
15 s would otherwise cost Produce and Fetch latency (bench/console_scrape.py). The request
counters are then at most 5 s behind, which ``rate()`` over a minute does not notice."""

def _import_console() -> None:
    """The console's modules (jinja2, prometheus-client, h11, odradek.client: 0.2-0.5 s here),
    imported in a worker thread so that neither the broker's start nor its event loop waits."""
    for name in ("odradek.console.app", "odradek.metrics.broker", "prometheus_client"):
        importlib.import_module(name)


@dataclass(frozen=True)
class ConsoleHost:
    """What the broker hands its console, and all the console sees of it.

    ``node_id`` and ``kafka_address`` (the advertised (host, port), which the console's own
    client connects to) name the broker; ``state`` is read at every scrape; ``api_names`` are
    Kafka's request names by API key; ``install_metrics`` hands the broker the request metrics
    its connections are to feed from then on; ``schema_registry_url`` returns the URL of the
    broker's schema registry once it listens (None without one): the Schemas page and the
    message browser's decoding read it. ``tls`` serves an ``https://`` listener (None: only
    ``http://`` can be served); ``auth`` turns logins on (None: no authorizer, no login);
    ``session_timeout_ms`` and ``skip_paths`` are ``http.session.timeout.ms`` and
    ``http.authentication.skip.paths``.
    """

    node_id: int
    kafka_address: tuple[str, int]
    state: BrokerState
    api_names: Mapping[int, str]
    install_metrics: Callable[[BrokerMetrics], None]
    schema_registry_url: Callable[[], str | None] = lambda: None
    tls: ServerTls | None = None
    auth: HttpAuthenticator | None = None
    session_timeout_ms: int = 8 * 3600 * 1000
    skip_paths: tuple[str, ...] = ("/metrics", "/health")
    client_telemetry: ClientTelemetrySource | None = None
    """The metrics clients push (KIP-714): /metrics and the Clients page show them."""
    kafka_client_config: Mapping[str, str] = field(default_factory=dict)
    """Java-client security settings the console's client connects to ``kafka_address``
    with (``broker.internal_clients``; empty: PLAINTEXT)."""


def _own_registry_context() -> ssl.SSLContext:
    """TLS to the broker's own registry listener (same process, its bound address): encrypted,
    not verified (that listener's certificate need not name the address it is reached at)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class BrokerConsole:
    """The HTTP listener of one broker, started in the background by ``start_soon()`` once the
    broker serves Kafka requests (so that ``odradek broker`` is ready as fast as without it).
    ``bound`` is (host, port) once listening, else None; ``started`` completes then (or when
    the listener could not start)."""

    def __init__(
        self, host: ConsoleHost, listeners: str, ready: Callable[[], bool] | None = None
    ) -> None:
        self.host = host
        self.endpoints = parse_http_endpoints(listeners)
        self.addresses = [(e.host, e.port) for e in self.endpoints]
        self.ready = ready
        self.bound: tuple[str, int] | None = None
        self.console: Any = None
        self.loop_lag: Any = None
        self._task: asyncio.Task[None] | None = None

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
            await asyncio.get_running_loop().run_in_executor(None, _import_console)
            await self._listen()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("console failed to start (the broker runs without it)")

    async def _listen(self) -> None:
        # lazy: the console's modules load in a worker thread after the broker is ready (_import_console)
        from prometheus_client import ProcessCollector

        from odradek.console.app import Console
        from odradek.console.auth import ConsoleAuth
        from odradek.console.schemas import SchemaSource
        from odradek.console.source import ClusterSource
        from odradek.metrics.broker import (
            BrokerMetrics,
            BrokerStateCollector,
            EventLoopLag,
        )

        broker = self.host
        endpoint = self.endpoints[0]
        host, port = endpoint.host, endpoint.port
        if endpoint.tls and broker.tls is None:
            log.error(
                "console: %s needs the broker's ssl.keystore.* keys (running without it)",
                http_url(*endpoint),
            )
            return
        auth = None
        if broker.auth is not None:
            auth = ConsoleAuth(
                broker.auth,
                now_ms=lambda: int(time.time() * 1000),
                secure=endpoint.tls,
                session_timeout_ms=broker.session_timeout_ms,
                skip_paths=broker.skip_paths,
            )
        schema_headers = (
            {"Authorization": f"Bearer {broker.auth.internal_token}"} if broker.auth else None
        )
        metrics = BrokerMetrics(broker.api_names)
        broker.install_metrics(metrics)
        state = broker.state
        kafka_host, kafka_port = broker.kafka_address

        def log_sizes() -> dict[tuple[str, int], int]:
            return {(plog.topic, plog.partition): plog.size_in_bytes for plog in state.logs()}

        from odradek.metrics.client_telemetry import ClientTelemetryCollector

        loop_lag = EventLoopLag()
        source = ClusterSource(
            f"{kafka_host}:{kafka_port}",
            log_sizes=log_sizes,
            client_config=dict(broker.kafka_client_config),
        )
        telemetry = broker.client_telemetry
        console = Console(
            source,
            collectors=[
                metrics,
                BrokerStateCollector(state, metrics),
                loop_lag,
                ProcessCollector(registry=None),  # process_* (CPU, RSS, open fds)
                *([] if telemetry is None else [ClientTelemetryCollector(telemetry)]),
            ],
            clients=None if telemetry is None else telemetry.instances,
            ready=self.ready,
            title=f"odradek broker {broker.node_id}",
            render_max_age_s=METRICS_MAX_AGE_S,
            schemas=SchemaSource(
                broker.schema_registry_url, schema_headers, _own_registry_context()
            ),
            auth=auth,
        )
        try:
            bound_port = await console.start(
                host, port, broker.tls.context if endpoint.tls and broker.tls else None
            )
        except OSError as exc:
            log.error("console: cannot listen on %s: %s (running without it)", http_url(*endpoint), exc)
            await source.close()
            return
        loop_lag.start()
        self.console, self.loop_lag = console, loop_lag
        self.bound = (host, bound_port)
        log.info("console listening on %s", self.url)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.loop_lag is not None:
            await self.loop_lag.stop()
        if self.console is not None:
            await self.console.stop()
        self.bound = None
