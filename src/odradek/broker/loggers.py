"""``BrokerLoggers``: the BROKER_LOGGER config resource (type 8), Kafka's Log4jController.

DescribeConfigs on BROKER_LOGGER (name = this broker's id) lists every logger of the broker
process with its effective level, ``root`` first among them, source
DYNAMIC_BROKER_LOGGER_CONFIG (6). IncrementalAlterConfigs SET changes a logger's level at
runtime, DELETE returns it to inheriting its parent's level, as Kafka does:

* levels use log4j's names: TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF (Python's levels
  below DEBUG read as TRACE, WARNING as WARN, CRITICAL as FATAL);
* an unknown logger or level → INVALID_CONFIG; DELETE of ``root``, or APPEND/SUBTRACT →
  INVALID_REQUEST; AlterConfigs (the legacy API) cannot change loggers (INVALID_REQUEST).

Changes are not persisted (Kafka keeps them in memory too).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

__all__ = ["DYNAMIC_BROKER_LOGGER_CONFIG", "LEVELS", "ROOT", "BrokerLoggers", "LoggerError"]

DYNAMIC_BROKER_LOGGER_CONFIG = 6
ROOT = "root"
TRACE = 5
LEVELS = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}

SET, DELETE = 0, 1


class LoggerError(ValueError):
    """A refused logger change; ``invalid_request`` tells INVALID_REQUEST from INVALID_CONFIG."""

    def __init__(self, message: str, *, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def level_name(level: int) -> str:
    if level >= LEVELS["OFF"]:
        return "OFF"
    for name in ("FATAL", "ERROR", "WARN", "INFO", "DEBUG"):
        if level >= LEVELS[name]:
            return name
    return "TRACE"


class BrokerLoggers:
    """The loggers of this process. See the module docstring."""

    def __init__(self, manager: logging.Manager | None = None) -> None:
        self._manager = manager if manager is not None else logging.Logger.manager

    def _logger(self, name: str) -> logging.Logger | None:
        if name == ROOT:
            return self._manager.root
        found = self._manager.loggerDict.get(name)
        return found if isinstance(found, logging.Logger) else None

    def levels(self) -> dict[str, str]:
        """{logger name: effective level}, ``root`` included."""
        out = {ROOT: level_name(self._manager.root.level)}
        for name, logger in sorted(self._manager.loggerDict.items()):
            if isinstance(logger, logging.Logger):
                out[name] = level_name(logger.getEffectiveLevel())
        return out

    def alter(self, ops: Iterable[tuple[str, int, str | None]], validate_only: bool) -> None:
        """Apply (logger, SET/DELETE, level) operations: all validated before any applies."""
        changes: list[tuple[logging.Logger, int]] = []
        for name, op, value in ops:
            if op not in (SET, DELETE):
                raise LoggerError(
                    "APPEND and SUBTRACT are not allowed for the BROKER_LOGGER resource",
                    invalid_request=True,
                )
            logger = self._logger(name)
            if logger is None:
                raise LoggerError(f"Logger {name} does not exist!")
            if op == DELETE:
                if name == ROOT:
                    raise LoggerError(
                        "Removing the log level of the root logger is not allowed",
                        invalid_request=True,
                    )
                changes.append((logger, logging.NOTSET))
                continue
            level = LEVELS.get((value or "").strip().upper())
            if level is None:
                raise LoggerError(
                    f"Cannot set the log level of {name} to {value} as it is not a supported "
                    f"log level. Valid levels are {', '.join(LEVELS)}"
                )
            changes.append((logger, level))
        if validate_only:
            return
        for logger, level in changes:
            logger.setLevel(level)
