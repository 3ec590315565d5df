"""Broker configuration: Kafka's key names, Kafka's defaults.

``BrokerConfig.from_properties({"log.dirs": "/tmp/x", ...})`` validates every key against the
table ``BROKER_KEYS``; an unknown key or a value that does not parse raises ``ConfigError``
naming the key. Each key is also an attribute with dots replaced by underscores
(``config.log_segment_bytes``), and ``config.get("log.segment.bytes")`` reads it by name.

Topic-level configs (``retention.ms``, ``segment.bytes``, ...) are described by ``TOPIC_KEYS``:
their type, the broker key that supplies the default, and validation. ``validate_topic_configs``
checks a dict of overrides (CreateTopics, AlterConfigs) and ``effective_topic_configs`` merges
overrides over the broker defaults (DescribeConfigs, building a storage ``LogConfig``).

``load_properties(text)`` parses Java ``.properties`` syntax.

Modules: ``values`` (ConfigError, listeners, value parsers) · ``broker_keys`` (the broker key
table) · ``broker_config`` (``BrokerConfig``) · ``topic_keys`` (the topic-config table) ·
``properties`` (the ``.properties`` parser).
"""

from odradek.broker.config.broker_config import BrokerConfig
from odradek.broker.config.broker_keys import BROKER_KEYS, ConfigKey
from odradek.broker.config.properties import load_properties, load_properties_file
from odradek.broker.config.topic_keys import (
    TOPIC_KEYS,
    TopicKey,
    effective_topic_configs,
    ignored_topic_configs,
    validate_topic_configs,
)
from odradek.broker.config.values import ConfigError, Listener, parse_listeners

__all__ = [
    "BROKER_KEYS",
    "TOPIC_KEYS",
    "BrokerConfig",
    "ConfigError",
    "ConfigKey",
    "Listener",
    "TopicKey",
    "effective_topic_configs",
    "ignored_topic_configs",
    "load_properties",
    "load_properties_file",
    "parse_listeners",
    "validate_topic_configs",
]
