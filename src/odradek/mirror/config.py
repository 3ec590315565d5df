"""MirrorMaker 2 configuration: the ``mm2.properties`` format, resolved into flows.

Pure: ``parse_properties`` reads Java's properties syntax (``key=value``, ``key: value`` or
``key value``; ``#``/``!`` comments; a trailing backslash continues a line; ``\\t \\n \\uXXXX``
escapes) and remembers the line of every key, ``load_config`` resolves it as MM2's
``MirrorMakerConfig`` does:

* ``clusters = A, B`` names the clusters; ``A.bootstrap.servers`` and every other ``A.<key>``
  are cluster A's client settings (``A.consumer.<key>``, ``A.producer.<key>``,
  ``A.admin.<key>`` for one client only); top-level client keys apply to every cluster.
* ``A->B.enabled = true`` turns a flow on (MM2's default is off). Every flow setting is read
  from ``A->B.<key>`` first, then from the top level, then MM2's default.
* security as the Java clients configure it, per cluster: ``A.security.protocol`` (PLAINTEXT,
  SSL, SASL_PLAINTEXT, SASL_SSL), ``A.sasl.mechanism``, ``A.sasl.jaas.config``,
  ``A.ssl.truststore.location``, ``A.ssl.keystore.*`` ... (``odradek.client._security``);
  the settings of each cluster are checked together at start (files opened, JAAS parsed).
* ``exactly.once.source.support`` (``enabled`` | ``preparing`` | ``disabled``) globally, or
  ``B.exactly.once.source.support`` for the flows that target B (KIP-618's per-worker setting).

Every problem raises ``MirrorConfigError`` naming the file, line and key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .policy import ReplicationPolicy, make_policy

__all__ = [
    "DEFAULT_CONFIG_PROPERTIES_EXCLUDE",
    "DEFAULT_GROUPS_EXCLUDE",
    "DEFAULT_TOPICS_EXCLUDE",
    "FlowConfig",
    "MirrorConfig",
    "MirrorConfigError",
    "Properties",
    "load_config",
    "parse_properties",
]

DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
DEFAULT_GROUPS_EXCLUDE = r"console-consumer-.*, connect-.*, __.*"
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, unclean\.leader\.election\.enable, "
    r"min\.insync\.replicas, message\.timestamp\.after\.max\.ms, message\.timestamp\.before\.max\.ms"
)

_CLIENT_PREFIXES = ("consumer.", "producer.", "admin.")
# ``<alias>.schema.registry.url``: the cluster's schema registry (schema-aware mirroring)
REGISTRY_PREFIX = "schema.registry."
REGISTRY_URL = "schema.registry.url"
# Keys of a cluster's client settings (as MirrorMakerConfig's CLIENT_CONFIG_DEF: anything the
# Java clients share); a cluster-prefixed key outside these and the flow keys is a client key too.
_CLIENT_KEYS = {
    "bootstrap.servers", "client.id", "request.timeout.ms", "retry.backoff.ms", "retry.backoff.max.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "metadata.max.age.ms", "security.protocol",
    "socket.connection.setup.timeout.ms", "connections.max.idle.ms", "receive.buffer.bytes", "send.buffer.bytes",
}
_CLIENT_KEY_PREFIXES = ("sasl.", "ssl.")


class MirrorConfigError(ValueError):
    """A malformed or inconsistent ``mm2.properties``; the message names file, line and key."""


@dataclass
class Properties:
    """Parsed properties: ``values`` (last one wins, as Java's ``Properties``) and ``lines``
    (the 1-based line each key was last set on)."""

    values: dict[str, str]
    lines: dict[str, int]
    source: str = "<properties>"

    def where(self, key: str) -> str:
        line = self.lines.get(key)
        return f"{self.source}:{line}: {key}" if line else f"{self.source}: {key}"


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str, source: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(s):
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1 : i + 5]
            if len(hexdigits) != 4 or not all(h in "0123456789abcdefABCDEF" for h in hexdigits):
                raise MirrorConfigError(f"{source}:{line}: malformed \\uxxxx escape")
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def _split_key(logical: str) -> tuple[str, str]:
    """(raw key, raw value) of one logical line, as ``java.util.Properties.load``."""
    i, n = 0, len(logical)
    while i < n:
        c = logical[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = logical[:i]
    rest = logical[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse_properties(text: str, source: str = "<properties>") -> Properties:
    """Parse Java properties text; keys keep the line (1-based) of their first physical line."""
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    physical = text.splitlines()
    i = 0
    while i < len(physical):
        start = i + 1
        line = physical[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        logical = line
        while _continues(logical):
            logical = logical[:-1]
            if i >= len(physical):
                break
            logical += physical[i].lstrip(" \t\f")
            i += 1
        raw_key, raw_value = _split_key(logical)
        key = _unescape(raw_key, source, start)
        if not key:
            raise MirrorConfigError(f"{source}:{start}: a value without a key: {logical.strip()!r}")
        values[key] = _unescape(raw_value, source, start)
        lines[key] = start
    return Properties(values, lines, source)


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


# -- typed settings ---------------------------------------------------------------------------
def _bool(v: str) -> bool:
    s = v.strip().lower()
    if s == "true":
        return True
    if s == "false":
        return False
    raise ValueError("must be true or false")


def _int(v: str) -> int:
    return int(v.strip())


def _regex_list(v: str) -> re.Pattern[str]:
    parts = [p.strip() for p in v.split(",") if p.strip()]
    if not parts:
        return re.compile(r"(?!)")  # an empty list matches nothing
    return re.compile("|".join(f"(?:{p})" for p in parts))


def _choice(*choices: str) -> Any:
    def conv(v: str) -> str:
        s = v.strip().lower()
        if s not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return s

    return conv


# flow setting -> (converter, MM2's default as written in a properties file)
FLOW_SETTINGS: dict[str, tuple[Any, str]] = {
    "enabled": (_bool, "false"),
    "topics": (_regex_list, ".*"),
    "topics.exclude": (_regex_list, DEFAULT_TOPICS_EXCLUDE),
    "groups": (_regex_list, ".*"),
    "groups.exclude": (_regex_list, DEFAULT_GROUPS_EXCLUDE),
    "config.properties.exclude": (_regex_list, DEFAULT_CONFIG_PROPERTIES_EXCLUDE),
    "replication.policy.class": (str, "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"),
    "replication.policy.separator": (str, "."),
    "refresh.topics.enabled": (_bool, "true"),
    "refresh.topics.interval.seconds": (_int, "600"),
    "refresh.groups.enabled": (_bool, "true"),
    "refresh.groups.interval.seconds": (_int, "600"),
    "sync.topic.configs.enabled": (_bool, "true"),
    "sync.topic.configs.interval.seconds": (_int, "600"),
    "sync.topic.acls.enabled": (_bool, "true"),
    "sync.topic.acls.interval.seconds": (_int, "600"),
    "emit.checkpoints.enabled": (_bool, "true"),
    "emit.checkpoints.interval.seconds": (_int, "60"),
    "emit.heartbeats.enabled": (_bool, "true"),
    "emit.heartbeats.interval.seconds": (_int, "1"),
    "sync.group.offsets.enabled": (_bool, "false"),
    "sync.group.offsets.interval.seconds": (_int, "60"),
    "offset.lag.max": (_int, "100"),
    "replication.factor": (_int, "2"),
    "offset-syncs.topic.location": (_choice("source", "target"), "source"),
    "offset-syncs.topic.replication.factor": (_int, "3"),
    "checkpoints.topic.replication.factor": (_int, "3"),
    "heartbeats.topic.replication.factor": (_int, "3"),
    "tasks.max": (_int, "1"),
    "exactly.once.source.support": (_choice("enabled", "preparing", "disabled"), "disabled"),
}
_GLOBAL = {"clusters", *FLOW_SETTINGS, "metrics.port", "log.progress.interval.seconds"}


@dataclass(frozen=True)
class FlowConfig:
    """One replication flow ``source->target``, every setting resolved."""

    source: str
    target: str
    settings: Mapping[str, Any]
    policy: ReplicationPolicy
    source_client: Mapping[str, Mapping[str, str]]  # "consumer" | "producer" | "admin" -> config
    target_client: Mapping[str, Mapping[str, str]]
    # ``<alias>.schema.registry.url`` of each side; with both, schema ids are rewritten
    source_registry: str | None = None
    target_registry: str | None = None

    @property
    def translates_schema_ids(self) -> bool:
        return bool(self.source_registry and self.target_registry)

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def __getitem__(self, key: str) -> Any:
        return self.settings[key]

    @property
    def exactly_once(self) -> bool:
        return bool(self.settings["exactly.once.source.support"] == "enabled")

    def topic_selected(self, topic: str) -> bool:
        """MM2's DefaultTopicFilter: ``topics`` matches (whole name) and ``topics.exclude`` does not."""
        return bool(self.settings["topics"].fullmatch(topic)) and not self.settings["topics.exclude"].fullmatch(topic)

    def group_selected(self, group: str) -> bool:
        """MM2's DefaultGroupFilter."""
        return bool(self.settings["groups"].fullmatch(group)) and not self.settings["groups.exclude"].fullmatch(group)

    def config_selected(self, name: str) -> bool:
        """MM2's DefaultConfigPropertyFilter: copy a topic config unless it is excluded."""
        return not self.settings["config.properties.exclude"].fullmatch(name)

    def should_replicate_topic(self, topic: str) -> bool:
        """MirrorSourceConnector.shouldReplicateTopic: selected (or a heartbeats topic), not an
        internal topic, and not a cycle (a topic that came from the target)."""
        p = self.policy
        return (self.topic_selected(topic) or p.is_heartbeats_topic(topic)) and not p.is_internal_topic(topic) and not p.is_cycle(topic, self.target)


@dataclass(frozen=True)
class MirrorConfig:
    clusters: tuple[str, ...]
    flows: tuple[FlowConfig, ...]
    cluster_clients: Mapping[str, Mapping[str, Mapping[str, str]]]
    ignored: tuple[str, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)


def _client_key(key: str) -> bool:
    return key in _CLIENT_KEYS or key.startswith(_CLIENT_KEY_PREFIXES) or key.startswith(_CLIENT_PREFIXES)


def _cluster_clients(props: Properties, alias: str) -> dict[str, dict[str, str]]:
    """Cluster ``alias``'s client configs, as MirrorMakerConfig.clusterProps: top-level client
    keys, then ``alias.<key>``; ``consumer.``/``producer.``/``admin.`` go to that client only,
    other keys to each client that has them (security keys to all three)."""
    from odradek.client._config import ADMIN, CONSUMER, PRODUCER

    specs = {"consumer": CONSUMER, "producer": PRODUCER, "admin": ADMIN}
    per: dict[str, dict[str, str]] = {"consumer": {}, "producer": {}, "admin": {}}
    layers = [
        {k: v for k, v in props.values.items() if _client_key(k) and not _is_prefixed(k, props)},
        {k[len(alias) + 1 :]: v for k, v in props.values.items() if k.startswith(alias + ".")},
    ]
    for layer in layers:
        for k, v in layer.items():
            if k in FLOW_SETTINGS or k.startswith(REGISTRY_PREFIX):
                continue
            kind = k.split(".", 1)[0]
            if kind in per:
                per[kind][k[len(kind) + 1 :]] = v
                continue
            for name, spec in specs.items():
                if k in spec or k.startswith(_CLIENT_KEY_PREFIXES) or k in _CLIENT_KEYS:
                    per[name][k] = v
    return per


def _cluster_names(props: Properties) -> list[str]:
    raw = props.values.get("clusters")
    if raw is None:
        raise MirrorConfigError(f"{props.source}: clusters: missing (e.g. clusters = A, B)")
    names = [c.strip() for c in raw.split(",") if c.strip()]
    if len(names) < 1 or len(set(names)) != len(names):
        raise MirrorConfigError(f"{props.where('clusters')}: needs distinct cluster aliases, got {raw!r}")
    for n in names:
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", n):
            raise MirrorConfigError(f"{props.where('clusters')}: {n!r} is not a cluster alias (letters, digits, _ and -)")
    return names


def _is_prefixed(key: str, props: Properties) -> bool:
    first = key.split(".", 1)[0]
    return "->" in first or first in props.values.get("clusters", "").replace(" ", "").split(",")


def load_config(props: Properties | str, only_targets: Iterable[str] | None = None, source: str = "<properties>") -> MirrorConfig:
    """Resolve ``props`` into the enabled flows (only those targeting ``only_targets`` if given:
    MM2's ``--clusters``). Validates every flow setting and every cluster's client settings."""
    if isinstance(props, str):
        props = parse_properties(props, source)
    clusters = _cluster_names(props)
    cluster_set = set(clusters)
    ignored: list[str] = []
    for key in props.values:
        head = key.split(".", 1)[0]
        if "->" in head:
            src, _, dst = head.partition("->")
            if src not in cluster_set or dst not in cluster_set or src == dst:
                raise MirrorConfigError(f"{props.where(key)}: flow {head!r} names a cluster not in clusters = {', '.join(clusters)}")
            continue
        if head in cluster_set or key in _GLOBAL or _client_key(key):
            continue
        ignored.append(key)  # Connect's plumbing (converters, offset.storage.*, ...) has no use here
    for key in props.values:  # a value that cannot be read fails at start, wherever it is set
        setting = key.split("->", 1)[-1].split(".", 1)[-1] if "->" in key.split(".", 1)[0] else key
        if key.split(".", 1)[0] in cluster_set and key.split(".", 1)[-1] in FLOW_SETTINGS:
            setting = key.split(".", 1)[-1]
        if setting in FLOW_SETTINGS:
            conv = FLOW_SETTINGS[setting][0]
            try:
                conv(props.values[key])
            except (ValueError, re.error) as exc:
                raise MirrorConfigError(f"{props.where(key)}: invalid value {props.values[key]!r}: {exc}") from None
    cluster_clients = {alias: _cluster_clients(props, alias) for alias in clusters}
    targets = None if only_targets is None else set(only_targets)
    if targets is not None:
        for t in targets:
            if t not in cluster_set:
                raise MirrorConfigError(f"--clusters {t}: not one of clusters = {', '.join(clusters)}")
    flows: list[FlowConfig] = []
    for src in clusters:
        for dst in clusters:
            if src == dst:
                continue
            prefix = f"{src}->{dst}."

            def raw(setting: str, prefix: str = prefix, dst: str = dst) -> tuple[str, str]:
                for key in (prefix + setting, *((f"{dst}.{setting}",) if setting == "exactly.once.source.support" else ()), setting):
                    if key in props.values:
                        return key, props.values[key]
                return setting, FLOW_SETTINGS[setting][1]

            enabled_key, enabled = raw("enabled")
            if not _bool(enabled) or (targets is not None and dst not in targets):
                continue
            settings: dict[str, Any] = {}
            for setting, (conv, _default) in FLOW_SETTINGS.items():
                key, value = raw(setting)
                settings[setting] = conv(value)
            for setting in ("offset.lag.max", "refresh.topics.interval.seconds", "emit.checkpoints.interval.seconds",
                            "emit.heartbeats.interval.seconds", "sync.group.offsets.interval.seconds",
                            "sync.topic.configs.interval.seconds", "refresh.groups.interval.seconds",
                            "sync.topic.acls.interval.seconds"):
                if settings[setting] < (0 if setting == "offset.lag.max" else 1):
                    key, _ = raw(setting)
                    raise MirrorConfigError(f"{props.where(key)}: must be positive, got {settings[setting]}")
            key, value = raw("replication.policy.class")
            try:
                policy = make_policy(value, settings["replication.policy.separator"])
            except ValueError as exc:
                raise MirrorConfigError(f"{props.where(key)}: {exc}") from None
            for alias in (src, dst):
                if not cluster_clients[alias]["admin"].get("bootstrap.servers"):
                    raise MirrorConfigError(f"{props.source}: {alias}.bootstrap.servers: missing (flow {src}->{dst} is enabled at {props.where(enabled_key)})")
            flows.append(FlowConfig(src, dst, settings, policy, cluster_clients[src], cluster_clients[dst],
                                    _registry(props, src), _registry(props, dst)))
    _validate_clients(props, cluster_clients, {f.source for f in flows} | {f.target for f in flows})
    return MirrorConfig(tuple(clusters), tuple(flows), cluster_clients, tuple(ignored))


def _registry(props: Properties, alias: str) -> str | None:
    """``<alias>.schema.registry.url`` (an http(s) URL), or None."""
    key = f"{alias}.{REGISTRY_URL}"
    url = props.values.get(key, "").strip()
    if not url:
        return None
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        raise MirrorConfigError(f"{props.where(key)}: not an http:// or https:// URL: {url!r}")
    return url.rstrip("/")


def _validate_clients(props: Properties, clients: Mapping[str, Mapping[str, Mapping[str, str]]], used: set[str]) -> None:
    """Every used cluster's client settings must be ones odradek.client accepts."""
    from odradek.client._config import ADMIN, CONSUMER, PRODUCER, parse_config
    from odradek.client._security import ClientSecurity
    from odradek.client.errors import ConfigError

    specs = {"consumer": CONSUMER, "producer": PRODUCER, "admin": ADMIN}
    for alias in sorted(used):
        for kind, spec in specs.items():
            for k, v in clients[alias][kind].items():
                if k not in spec:
                    raise MirrorConfigError(f"{_where_client(props, alias, kind, k)}: not a {kind} setting this mirror's client supports")
                try:
                    parse_config({"bootstrap.servers": "x:1", k: v}, {**spec}, kind)
                except ConfigError as exc:
                    raise MirrorConfigError(f"{_where_client(props, alias, kind, k)}: {exc}") from None
            # the settings together: TLS stores that open, SASL credentials that parse
            try:
                ClientSecurity.from_config(parse_config({"bootstrap.servers": "x:1", **clients[alias][kind]}, spec, kind))
            except ConfigError as exc:
                message = str(exc)
                key = next((k for k in sorted(clients[alias][kind], key=len, reverse=True) if message.startswith(k)), None)
                where = _where_client(props, alias, kind, key) if key else f"{props.source}: cluster {alias}'s {kind} settings"
                raise MirrorConfigError(f"{where}: {message}") from None


def _where_client(props: Properties, alias: str, kind: str, key: str) -> str:
    for candidate in (f"{alias}.{kind}.{key}", f"{alias}.{key}", f"{kind}.{key}", key):
        if candidate in props.values:
            return props.where(candidate)
    return f"{props.source}: {alias}.{key}"
