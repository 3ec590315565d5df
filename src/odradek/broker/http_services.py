"""The broker's HTTP side: the console (with ``/metrics`` and ``/health``, ``http.listeners``)
and the schema registry (``schema.registry.listeners``).

Both are optional and both are started after the Kafka listeners:

1. ``configure_security`` (before the Kafka listeners bind, so that a bad key stops the start
   early): TLS and logins of the HTTP listeners (``http_security``);
2. ``configure_clients`` (once the Kafka listeners are bound): the address and the Java-client
   security settings that the console's and the registry's own Kafka clients use, those of the
   inter-broker listener (``internal_clients``);
3. ``start`` once the broker is ready: the console listens before ``start`` returns (its
   imports run in a worker thread); the registry starts in the background;
4. ``stop`` before the Kafka listeners close (their clients talk to this broker).

Nothing here is imported by a broker with neither listener configured.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig
    from odradek.broker.connection import RequestMetrics
    from odradek.broker.endpoints import Endpoints
    from odradek.broker.http_security import HttpSecurity
    from odradek.broker.observed_state import ObservedState
    from odradek.console.broker import BrokerConsole
    from odradek.registry.broker import BrokerSchemaRegistry
    from odradek.security.acl_store import AclStore

__all__ = ["HttpServices"]


class HttpServices:
    """The console and the schema registry of one broker (either may be off)."""

    def __init__(self, config: BrokerConfig, kafka_address: tuple[str, int]) -> None:
        self.config = config
        self.kafka_address = kafka_address
        """Where the console's and the registry's Kafka clients connect (``configure_clients``)."""
        self.kafka_client_config: dict[str, str] = {}
        self.security: HttpSecurity | None = None
        self.console: BrokerConsole | None = None
        self.schema_registry: BrokerSchemaRegistry | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.config.http_listeners or self.config.schema_registry_listeners)

    def configure_security(self, endpoints: Endpoints, acls: AclStore | None) -> None:
        if self.enabled:
            from odradek.broker.http_security import http_security

            self.security = http_security(self.config, endpoints, acls)

    def configure_clients(self, endpoints: Endpoints, advertised: tuple[str, int]) -> None:
        if self.enabled:
            from odradek.broker.internal_clients import internal_client_config

            self.kafka_address, self.kafka_client_config = internal_client_config(
                self.config, endpoints, advertised
            )

    @property
    def bound(self) -> tuple[str, int] | None:
        """(host, port) of the console's listener; None when off or not listening."""
        return self.console.bound if self.console is not None else None

    async def start(
        self,
        *,
        node_id: int,
        state: ObservedState,
        api_names: Mapping[int, str],
        install_metrics: Callable[[RequestMetrics], None],
        ready: Callable[[], bool],
        client_telemetry: Any,
    ) -> None:
        cfg, security = self.config, self.security
        if cfg.http_listeners and security is not None:
            from odradek.console.broker import BrokerConsole, ConsoleHost

            host = ConsoleHost(
                node_id=node_id,
                kafka_address=self.kafka_address,
                kafka_client_config=self.kafka_client_config,
                state=state,
                api_names=api_names,
                install_metrics=install_metrics,
                schema_registry_url=lambda: (
                    None if self.schema_registry is None else self.schema_registry.url
                ),
                tls=security.tls,
                auth=security.auth,
                session_timeout_ms=security.session_timeout_ms,
                skip_paths=security.skip_paths,
                client_telemetry=client_telemetry,
            )
            self.console = BrokerConsole(host, cfg.http_listeners, ready=ready)
            self.console.start_soon()
            await self.console.started()
        if cfg.schema_registry_listeners and security is not None:
            from odradek.registry.broker import BrokerSchemaRegistry

            self.schema_registry = BrokerSchemaRegistry(
                self.kafka_address,
                min(3, cfg.default_replication_factor),
                cfg.schema_registry_listeners,
                tls=security.tls,
                auth=security.auth,
                client_ssl=security.client_ssl,
                client_config=self.kafka_client_config,
            )
            self.schema_registry.start_soon()

    async def stop(self) -> None:
        """The registry first, then the console; a failure of either is not the broker's."""
        if self.schema_registry is not None:
            registry, self.schema_registry = self.schema_registry, None
            with contextlib.suppress(Exception):
                await registry.stop()
        if self.console is not None:
            console, self.console = self.console, None
            with contextlib.suppress(Exception):
                await console.stop()
