"""``GroupConfigManager``: per-group config overrides, the GROUP config resource (type 32).

KIP-848 lets a group override some broker-level group settings (Kafka's GroupConfig):

=================================  ==========================================  ========
group config                       broker default (and bounds: ``min``/``max``)  default
=================================  ==========================================  ========
consumer.session.timeout.ms        group.consumer.session.timeout.ms           45000
consumer.heartbeat.interval.ms     group.consumer.heartbeat.interval.ms        5000
share.session.timeout.ms           group.share.session.timeout.ms              45000
share.heartbeat.interval.ms        group.share.heartbeat.interval.ms           5000
share.record.lock.duration.ms      group.share.record.lock.duration.ms         30000
=================================  ==========================================  ========

A value must be an integer within the broker's ``group.<kind>.min.*`` / ``max.*`` bounds
(``consumer.session.timeout.ms`` within ``group.consumer.min.session.timeout.ms`` and
``group.consumer.max.session.timeout.ms``...), and a session timeout must be larger than the
heartbeat interval of the same kind, as Kafka's GroupConfig.validate. A group need not exist to
be configured. Served when ``enabled`` (``group.coordinator.rebalance.protocols`` lists
``consumer``, Kafka 4.0's default); a Kafka 3.9 broker refuses the GROUP resource, and so does
odradek by default. Overrides are persisted through the ``ConfigEntityStore`` (entity
``groups/<group id>``). odradek serves the classic group protocol, whose timeouts come from
JoinGroup: the overrides are validated, stored and described for the clients and tools that
manage them (librdkafka, Kafka's admin client).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.config_store import GROUPS, ConfigEntityStore

__all__ = ["GROUP_CONFIG", "GROUP_CONFIG_KEYS", "GroupConfigManager"]

log = logging.getLogger("odradek.broker")

GROUP_CONFIG = 8
"""DescribeConfigs source of a group override (Kafka's ConfigSource.GROUP_CONFIG)."""

GROUP_CONFIG_KEYS: dict[str, tuple[str, str, str]] = {
    # group config -> (broker default key, broker minimum key, broker maximum key)
    "consumer.session.timeout.ms": (
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    "consumer.heartbeat.interval.ms": (
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    "share.session.timeout.ms": (
        "group.share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    "share.heartbeat.interval.ms": (
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    "share.record.lock.duration.ms": (
        "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
}

_SESSION_VS_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
)


class GroupConfigManager:
    """The GROUP config resources of the cluster. See the module docstring."""

    def __init__(self, config: BrokerConfig, store: ConfigEntityStore) -> None:
        self.config = config
        self.store = store

    @property
    def enabled(self) -> bool:
        """Whether groups have configs: as in Kafka 4.0, when the broker's
        ``group.coordinator.rebalance.protocols`` lists ``consumer``; otherwise the GROUP
        config resource is refused (INVALID_REQUEST), as a Kafka 3.9 (ZooKeeper) broker does."""
        protocols = str(self.config.get("group.coordinator.rebalance.protocols") or "")
        return "consumer" in protocols.split(",")

    def overrides(self, group: str) -> dict[str, str]:
        return self.store.entity_config(GROUPS, group)

    def defaults(self) -> dict[str, str]:
        return {name: str(self.config.get(keys[0])) for name, keys in GROUP_CONFIG_KEYS.items()}

    def effective(self, group: str) -> dict[str, str]:
        """Every group config of ``group``: its override, else the broker default."""
        out = self.defaults()
        out.update(self.overrides(group))
        return out

    def describe(self, group: str) -> list[tuple[str, str, int]]:
        """[(name, value, source)] sorted by name; source GROUP_CONFIG (8) for an override,
        DEFAULT_CONFIG (5) otherwise."""
        overrides = self.overrides(group)
        return [
            (name, value, GROUP_CONFIG if name in overrides else 5)
            for name, value in sorted(self.effective(group).items())
        ]

    def validate(self, props: Mapping[str, str]) -> dict[str, str]:
        """Normalised overrides; raises ConfigError naming the first bad key."""
        out: dict[str, str] = {}
        for name, raw in props.items():
            if name not in GROUP_CONFIG_KEYS:
                raise ConfigError(name, f"Unknown group config name: {name}")
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ConfigError(name, f"invalid value {raw!r}: not an integer") from None
            out[name] = str(value)
        merged = {k: int(v) for k, v in self.defaults().items()}
        merged.update({k: int(v) for k, v in out.items()})
        for name, (_default, lo_key, hi_key) in GROUP_CONFIG_KEYS.items():
            value = merged[name]
            if value < int(self.config.get(lo_key)):
                raise ConfigError(name, f"{name} must be greater than or equal to {lo_key}")
            if value > int(self.config.get(hi_key)):
                raise ConfigError(name, f"{name} must be less than or equal to {hi_key}")
        for session, heartbeat in _SESSION_VS_HEARTBEAT:
            if merged[session] <= merged[heartbeat]:
                raise ConfigError(session, f"{session} must be greater than {heartbeat}")
        return out

    async def alter(self, group: str, props: Mapping[str, str], validate_only: bool) -> None:
        """Replace the overrides of ``group`` with ``props`` (validated first), persisted."""
        if not group:
            raise ValueError("Group name must not be empty")
        configs = self.validate(props)
        if validate_only:
            return
        await self.store.change_entity_config(GROUPS, group, configs)
        log.info("group %r configs now %s", group, configs)
