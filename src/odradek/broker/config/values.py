"""Configuration values: ``ConfigError``, listeners and the parsers that turn the strings of a
``.properties`` file (or a CreateTopics/AlterConfigs request) into typed values.

Each parser takes the raw string and returns the typed value or raises ``ValueError`` with a
message that ends up in the ``ConfigError`` naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from odradek.console.listeners import parse_http_listeners


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid. ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True, slots=True)
class Listener:
    """One entry of ``listeners``: ``NAME://host:port``. An empty host binds all interfaces."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


_LISTENER_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:]*):(\d+)$")


def parse_listeners(value: str, key: str = "listeners") -> list[Listener]:
    listeners: list[Listener] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        m = _LISTENER_RE.match(item)
        if m is None:
            raise ConfigError(key, f"invalid listener {item!r}; expected NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if port > 65535:
            raise ConfigError(key, f"invalid port in {item!r}")
        if any(existing.name == name for existing in listeners):
            raise ConfigError(key, f"listener name {name} given twice")
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ConfigError(key, "no listener given")
    return listeners


# -- value parsers -------------------------------------------------------------------------------


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if lo is not None and value < lo:
            raise ValueError(f"must be at least {lo}")
        if hi is not None and value > hi:
            raise ValueError(f"must be at most {hi}")
        return value

    return parse


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t == "true":
        return True
    if t == "false":
        return False
    raise ValueError("must be true or false")


def _float(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text.strip())
        if not lo <= value <= hi:
            raise ValueError(f"must be in [{lo}, {hi}]")
        return value

    return parse


def _str(text: str) -> str:
    return text.strip()


def _enum(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        t = text.strip()
        if t not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return t

    return parse


def _cleanup_policy(text: str) -> str:
    parts = [p.strip() for p in text.strip().strip("[]").split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("must be delete, compact or delete,compact")
    return ",".join(parts)


def _compression(text: str) -> str:
    return _enum("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")(text)


def _message_format_version(text: str) -> str:
    """A Kafka version string as ``message.format.version`` takes (``0.10.0``, ``0.11.0-IV2``,
    ``2.8``, ``3.0-IV1``...): validated as Kafka's MetadataVersion does, then ignored."""
    t = text.strip()
    if _VERSION_RE.match(t) is None:
        raise ValueError(f"Version {t} is not a valid version")
    return t


# 0.8.0 .. 0.11.0 (three parts), 1.0 .. 4.0 (two parts), each optionally -IVn; Kafka
# also accepts extra trailing parts (0.10.0.1, 2.8.1).
_VERSION_RE = re.compile(
    r"^(0\.(8\.[0-2]|9\.0|10\.[0-2]|11\.0)|1\.[01]|2\.[0-8]|3\.[0-9]|4\.0)"
    r"(\.\d+)*(-IV\d+)?$"
)


def _gzip_level(text: str) -> int:
    value = int(text.strip())
    if value != -1 and not 1 <= value <= 9:
        raise ValueError("must be -1 (the default level) or in [1, 9]")
    return value


def _throttled_replicas(text: str) -> str:
    """``*`` or ``partition:broker,...`` (leader/follower.replication.throttled.replicas)."""
    t = text.strip()
    if t in ("", "*"):
        return t
    for item in t.split(","):
        if re.fullmatch(r"\s*\d+\s*:\s*\d+\s*", item) is None:
            raise ValueError("must be * or a list of partition:broker")
    return t


def _false_only(text: str) -> bool:
    """remote.storage.enable: tiered storage is not offered (Kafka refuses true when the
    broker's remote log storage system is disabled)."""
    if _bool(text):
        raise ValueError(
            "Tiered Storage functionality is disabled in the broker "
            "(remote.log.storage.system.enable is false)"
        )
    return False


def _rebalance_protocols(text: str) -> str:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if "classic" not in parts or any(p not in ("classic", "consumer") for p in parts):
        raise ValueError("must list classic, and optionally consumer")
    return ",".join(parts)


def _dirs(text: str) -> str:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("needs at least one directory")
    return ",".join(parts)


def _listeners_value(text: str) -> str:
    parse_listeners(text)
    return text.strip()


def _http_listeners_value(text: str) -> str:
    parse_http_listeners(text)
    return text.strip()


def _advertised_value(text: str) -> str:
    if text.strip():
        parse_listeners(text, "advertised.listeners")
    return text.strip()
