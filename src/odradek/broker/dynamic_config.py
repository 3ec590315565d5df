"""``DynamicBrokerConfig``: broker configs changed at runtime (Kafka's DynamicBrokerConfig).

Dynamic broker configs are set with AlterConfigs / IncrementalAlterConfigs on the BROKER
resource, at two levels, persisted through a ``ConfigEntityStore`` (config_store.py):

* per broker: resource name = the broker id, entity ``brokers/<id>``;
* cluster-wide default: resource name ``""``, entity ``brokers/<default>``.

Precedence (highest first), as in Kafka: DYNAMIC_BROKER_CONFIG (per broker),
DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG (server.properties / --set),
DEFAULT_CONFIG. When a dynamic key has synonyms (``log.retention.ms`` / ``.minutes`` /
``.hours``, ``log.roll.ms`` / ``.hours``, ``log.flush.interval.ms`` /
``log.flush.scheduler.interval.ms``), setting it at a level removes its synonyms from the
levels below, so the dynamic value wins.

Only the keys Kafka can change at runtime are accepted (``DYNAMIC_KEYS``; Kafka's
``DynamicBrokerConfig.AllDynamicConfigs`` restricted to the keys odradek knows): the broker
defaults of topic configs (``log.retention.ms``, ``log.segment.bytes``, ``log.cleanup.policy``,
``message.max.bytes``...), the log cleaner's ``log.cleaner.*``, thread counts (within half to
double of the current value), connection limits, producer-state keys and, per broker only,
SASL listener settings. Any other known key is read-only: "Cannot update these configs
dynamically". The merged result must still be a valid broker config.

In cluster mode the store is ZooKeeper (``/config/brokers/<id>``, ``/config/brokers/<default>``,
zk_config_store.py): a level changed through another broker reaches this one as a change
notification, and is applied as if it had been altered here.

The ``BrokerConfig`` the broker runs with is updated in place (``BrokerConfig.update_current``)
so every holder sees the current values; ``add_reconfigurable(keys, callback)`` registers what
must happen when one of ``keys`` changes (the broker re-applies log defaults to live logs
without a topic override and restarts the log cleaner).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from odradek.broker.config import BROKER_KEYS, TOPIC_KEYS, BrokerConfig, ConfigError
from odradek.broker.config_store import BROKERS, DEFAULT_ENTITY, ConfigEntityStore

__all__ = [
    "DEFAULT_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "DYNAMIC_KEYS",
    "LOG_CLEANER_KEYS",
    "LOG_KEYS",
    "PER_BROKER_KEYS",
    "STATIC_BROKER_CONFIG",
    "DynamicBrokerConfig",
    "Reconfigure",
    "broker_config_synonyms",
]

log = logging.getLogger("odradek.broker")

# DescribeConfigs config sources (Kafka's ConfigSource ids)
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# DynamicLogConfig: the broker key of every topic config (its first synonym), except
# message.format.version, which Kafka does not reconfigure.
LOG_KEYS = frozenset(
    spec.broker_key
    for name, spec in TOPIC_KEYS.items()
    if spec.broker_key is not None and name != "message.format.version"
)
# LogCleaner.ReconfigurableConfigs
LOG_CLEANER_KEYS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
# DynamicThreadPool.ReconfigurableConfigs (a new count is within half to double the current)
THREAD_POOL_KEYS = frozenset(
    {
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
    }
)
# SocketServer's and the cluster-level listener keys
SOCKET_SERVER_KEYS = frozenset(
    {
        "max.connections",
        "max.connections.per.ip",
        "max.connection.creation.rate",
        "num.network.threads",
    }
)
# DynamicProducerStateManagerConfig
PRODUCER_STATE_KEYS = frozenset(
    {"producer.id.expiration.ms", "transaction.partition.verification.enable"}
)
# DynamicListenerConfig's SASL keys: per broker only, never at the cluster-wide default
PER_BROKER_KEYS = frozenset(k for k in BROKER_KEYS if k.startswith("sasl."))

DYNAMIC_KEYS = frozenset(
    (LOG_KEYS | LOG_CLEANER_KEYS | THREAD_POOL_KEYS | SOCKET_SERVER_KEYS | PRODUCER_STATE_KEYS)
    | PER_BROKER_KEYS
) & frozenset(BROKER_KEYS)

_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)

Reconfigure = Callable[[BrokerConfig, BrokerConfig], Awaitable[None]]
"""``callback(old, new)``: called after the current config changed one of its keys."""


def broker_config_synonyms(name: str) -> list[str]:
    """``name`` and the broker keys that set the same value, highest precedence first
    (``log.retention.hours`` -> ms, minutes, hours), as Kafka's brokerConfigSynonyms."""
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    for group in _SYNONYM_GROUPS:
        if name in group and name != "log.flush.scheduler.interval.ms":
            return list(group)
    return [name]


def _override(props: dict[str, str], overrides: Mapping[str, str]) -> None:
    for key, value in overrides.items():
        for synonym in broker_config_synonyms(key):
            props.pop(synonym, None)
        props[key] = value


def _as_string(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class DynamicBrokerConfig:
    """The dynamic levels of this broker's config. See the module docstring."""

    def __init__(self, config: BrokerConfig, store: ConfigEntityStore) -> None:
        self.config = config
        self.store = store
        self._static: dict[str, str] = config.explicit()
        self._default: dict[str, str] = {}
        self._broker: dict[str, str] = {}
        self._reconfigurables: list[tuple[frozenset[str], Reconfigure]] = []
        store.add_change_listener(self._on_entity_change)

    @property
    def node_id(self) -> int:
        return self.config.node_id_effective

    # -- start-up ---------------------------------------------------------------------------

    def initialize(self) -> None:
        """Load both levels from the store and apply them (no callbacks: nothing runs yet).
        Invalid stored keys are dropped with an error logged, as Kafka does."""
        entities = self.store.entities(BROKERS)
        self._default = self._usable(entities.get(DEFAULT_ENTITY, {}), per_broker=False)
        self._broker = self._usable(entities.get(str(self.node_id), {}), per_broker=True)
        if not self._default and not self._broker:
            return  # the static config is the current one (parsing it again: 0.3 ms a start)
        try:
            self.config.update_current(self._merged(self._default, self._broker))
        except ConfigError as exc:
            log.error("dynamic broker configs ignored: %s", exc)
            self._default, self._broker = {}, {}

    async def _on_entity_change(self, entity_type: str, name: str) -> None:
        """Another broker changed an entity (cluster mode): re-read ours and apply them."""
        if entity_type != BROKERS or name not in (DEFAULT_ENTITY, str(self.node_id)):
            return
        default = self._usable(self.store.entity_config(BROKERS, DEFAULT_ENTITY), False)
        broker = self._usable(self.store.entity_config(BROKERS, str(self.node_id)), True)
        try:
            self._merged(default, broker)
        except ConfigError as exc:
            log.error("dynamic broker configs of %s/%s ignored: %s", entity_type, name, exc)
            return
        if (default, broker) == (self._default, self._broker):
            return
        self._default, self._broker = default, broker
        log.info(
            "dynamic broker configs (%s) now %s",
            "cluster default" if name == DEFAULT_ENTITY else f"broker {name}",
            default if name == DEFAULT_ENTITY else broker,
        )
        await self._update_current()

    def _usable(self, props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in props.items():
            try:
                self._check_keys({key: value}, per_broker)
                BrokerConfig.from_properties({key: value})
            except ConfigError as exc:
                log.error("stored dynamic broker config ignored: %s", exc)
                continue
            out[key] = value
        return out

    # -- reading ----------------------------------------------------------------------------

    def dynamic_broker_configs(self) -> dict[str, str]:
        return dict(self._broker)

    def dynamic_default_configs(self) -> dict[str, str]:
        return dict(self._default)

    def static_configs(self) -> dict[str, str]:
        return dict(self._static)

    def entity_props(self, per_broker: bool) -> dict[str, str]:
        """The stored props of one level (the base of IncrementalAlterConfigs)."""
        return dict(self._broker if per_broker else self._default)

    def config_synonyms(
        self, name: str, synonyms: Iterable[str]
    ) -> list[tuple[str, str | None, int]]:
        """(name, value, source) of every level that sets one of ``synonyms``, highest
        precedence first, starting at ``name`` (Kafka's ConfigHelper.configSynonyms)."""
        names = list(synonyms)
        out: list[tuple[str, str | None, int]] = []
        for level, source in (
            (self._broker, DYNAMIC_BROKER_CONFIG),
            (self._default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self._static, STATIC_BROKER_CONFIG),
        ):
            out += [(n, level[n], source) for n in names if n in level]
        for n in names:
            spec = BROKER_KEYS.get(n)
            default = None if spec is None else _as_string(spec.default)
            if default is not None:
                out.append((n, default, DEFAULT_CONFIG))
        while out and out[0][0] != name:
            out.pop(0)
        return out

    @staticmethod
    def is_read_only(name: str) -> bool:
        return name not in DYNAMIC_KEYS

    # -- changing ---------------------------------------------------------------------------

    def add_reconfigurable(self, keys: Iterable[str], callback: Reconfigure) -> None:
        self._reconfigurables.append((frozenset(keys), callback))

    def _check_keys(self, props: Mapping[str, str], per_broker: bool) -> None:
        unknown = sorted(k for k in props if k not in BROKER_KEYS)
        if unknown:
            raise ConfigError(unknown[0], f"unknown broker configuration keys: {unknown}")
        static = sorted(k for k in props if k not in DYNAMIC_KEYS)
        if static:
            raise ConfigError(static[0], f"Cannot update these configs dynamically: {static}")
        if not per_broker:
            only_broker = sorted(k for k in props if k in PER_BROKER_KEYS)
            if only_broker:
                raise ConfigError(
                    only_broker[0],
                    "Cannot update these configs at default cluster level, broker id must be "
                    f"specified: {only_broker}",
                )

    def _merged(self, default: Mapping[str, str], broker: Mapping[str, str]) -> BrokerConfig:
        props = dict(self._static)
        _override(props, default)
        _override(props, broker)
        return BrokerConfig.from_properties(props)

    def validate(self, props: Mapping[str, str], per_broker: bool) -> BrokerConfig:
        """The config that ``props`` (the whole new level) would give; raises ConfigError
        naming the key when a key is read-only or unknown, or a value is invalid."""
        self._check_keys(props, per_broker)
        if per_broker:
            new = self._merged(self._default, props)
        else:
            new = self._merged(props, self._broker)
        for key in THREAD_POOL_KEYS & set(props):
            old_value, new_value = int(self.config.get(key)), int(new.get(key))
            if new_value == old_value:
                continue
            if new_value < old_value / 2:
                raise ConfigError(
                    key, f"value should be at least half the current value {old_value}"
                )
            if new_value > old_value * 2:
                raise ConfigError(
                    key, f"value should not be greater than double the current value {old_value}"
                )
        return new

    async def alter(
        self, props: Mapping[str, str], per_broker: bool, validate_only: bool = False
    ) -> None:
        """Replace one level with ``props`` (validated first), persist it, apply it."""
        props = {k: v.strip() for k, v in props.items()}
        self.validate(props, per_broker)
        if validate_only:
            return
        entity = str(self.node_id) if per_broker else DEFAULT_ENTITY
        await self.store.change_entity_config(BROKERS, entity, props)
        if per_broker:
            self._broker = props
        else:
            self._default = props
        log.info(
            "dynamic broker configs (%s) now %s",
            f"broker {self.node_id}" if per_broker else "cluster default",
            props,
        )
        await self._update_current()

    async def _update_current(self) -> None:
        new = self._merged(self._default, self._broker)
        old = self.config.copy()
        changed = {k for k, _ in new.items() if new.get(k) != old.get(k)}
        if not changed:
            return
        self.config.update_current(new)
        for keys, callback in self._reconfigurables:
            if keys & changed:
                try:
                    await callback(old, self.config)
                except Exception:
                    log.exception("reconfiguring %s failed", sorted(keys & changed))
