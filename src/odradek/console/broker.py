"""The console inside a broker: ``http.listeners`` parsing and the start/stop the broker calls.

``http.listeners`` is a comma-separated list of ``http://host:port`` (default
``http://127.0.0.1:9644``; empty turns the listener off; port 0 picks a free port). Only the first
entry is served for now.

``BrokerConsole.start(broker)`` (called once the broker serves Kafka requests) builds:

* ``broker.metrics``'s ``BrokerMetrics`` (request counts and latency, fed by the connection);
* ``BrokerStateCollector`` (log sizes and offsets, connections, purgatory) and ``EventLoopLag``;
* a ``ClusterSource`` talking to the broker's own advertised Kafka address through
  odradek.client on the same event loop (topics, groups, lag: kafka_exporter's series), with
  log sizes read from the broker's logs;
* the ``Console`` HTTP server on the same loop.

If the HTTP port cannot be bound the broker keeps running without a console (logged as an error).
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["BrokerConsole", "parse_http_listeners"]

log = logging.getLogger("odradek.console")

_HTTP_RE = re.compile(r"^http://(\[[^\]]*\]|[^:/]*):(\d+)/?$")


def parse_http_listeners(text: str) -> list[tuple[str, int]]:
    """``"http://127.0.0.1:9644,http://[::1]:9645"`` -> [(host, port)]; "" -> []."""
    out: list[tuple[str, int]] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        m = _HTTP_RE.match(item)
        if m is None:
            raise ValueError(f"expected http://host:port, got {item!r}")
        port = int(m.group(2))
        if port > 65535:
            raise ValueError(f"port out of range in {item!r}")
        out.append((m.group(1).strip("[]"), port))
    return out


class BrokerConsole:
    """The HTTP listener of one broker. ``bound`` is (host, port) once started."""

    def __init__(self, console: Any, loop_lag: Any, bound: tuple[str, int]) -> None:
        self.console = console
        self.loop_lag = loop_lag
        self.bound = bound

    @property
    def url(self) -> str:
        return f"http://{self.bound[0]}:{self.bound[1]}"

    @staticmethod
    async def start(
        broker: Any, listeners: str, ready: Any = None
    ) -> BrokerConsole | None:
        """Start the console for ``broker`` on the first of ``listeners``; None when empty or
        when the port cannot be bound. ``ready()`` answers /health (default: always ready)."""
        addresses = parse_http_listeners(listeners)
        if not addresses:
            return None
        from prometheus_client import ProcessCollector

        from odradek.console.app import Console
        from odradek.console.source import ClusterSource
        from odradek.metrics.broker import (
            BrokerMetrics,
            BrokerStateCollector,
            EventLoopLag,
            broker_state,
        )

        host, port = addresses[0]
        metrics = broker.metrics
        if metrics is None:
            metrics = broker.metrics = BrokerMetrics()
        state = broker_state(broker)
        kafka_host, kafka_port = broker.advertised_address

        def log_sizes() -> dict[tuple[str, int], int]:
            return {(plog.topic, plog.partition): plog.size_in_bytes for plog in state.logs()}

        loop_lag = EventLoopLag()
        source = ClusterSource(f"{kafka_host}:{kafka_port}", log_sizes=log_sizes)
        console = Console(
            source,
            collectors=[
                metrics,
                BrokerStateCollector(state, metrics),
                loop_lag,
                ProcessCollector(registry=None),  # process_* (CPU, RSS, open fds)
            ],
            ready=ready,
            title=f"odradek broker {broker.node_id}",
        )
        try:
            bound_port = await console.start(host, port)
        except OSError as exc:
            log.error("console: cannot listen on http://%s:%s: %s (running without it)", host, port, exc)
            await source.close()
            return None
        loop_lag.start()
        shown = host if ":" not in host else f"[{host}]"
        log.info("console listening on http://%s:%s", shown, bound_port)
        return BrokerConsole(console, loop_lag, (host, bound_port))

    async def stop(self) -> None:
        await self.loop_lag.stop()
        await self.console.stop()
