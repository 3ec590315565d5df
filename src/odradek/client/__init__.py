"""odradek.client: a Kafka-protocol client for odradek and any Kafka-compatible broker.

Synchronous ``Producer``, ``Consumer`` and ``Admin`` (this module) run the asyncio cores of
``odradek.client.aio`` (``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin``) on a private event
loop thread. Configuration is a dict with the Java clients' keys; unknown keys raise
``ConfigError``. ``read_range_arrow`` and ``columnar.records_to_arrow`` decode record batches
straight into Arrow for analytics (the Spark data source).

    from odradek.client import Producer, Consumer
    with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as p:
        p.send("events", b"hello", key=b"k").result(10)
    with Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g",
                   "auto.offset.reset": "earliest"}, "events") as c:
        for record in c:
            print(record.offset, record.key, record.value)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._range import read_range_arrow
    from ._sync import Admin, Consumer, Producer
    from .aio._txn import ConsumerGroupMetadata
    from .aio.admin import ConfigEntry, GroupDescription, MemberDescription, NewTopic
    from .aio.consumer import ConsumerRebalanceListener
    from .errors import (
        AuthenticationError,
        ConfigError,
        KafkaConnectionError,
        KafkaError,
        KafkaTimeoutError,
        ProducerFencedError,
        SaslAuthenticationError,
        SslAuthenticationError,
        TransactionAbortableError,
        TransactionStateError,
    )
    from .types import (
        ConsumerRecord,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        PartitionInfo,
        RecordMetadata,
        TopicDescription,
        TopicPartition,
    )

# The public names, each imported from its module on first use (PEP 562): importing this
# package, or one of its modules (odradek.client.aio.admin, ...), loads only what is used. The
# broker's console reads the cluster through this client: its start must not compile the
# producer, the sync facades and the bulk readers. read_range_arrow also imports pyarrow.
_LAZY: dict[str, str] = {
    "Admin": "._sync",
    "Consumer": "._sync",
    "Producer": "._sync",
    "ConsumerGroupMetadata": ".aio._txn",
    "ConfigEntry": ".aio.admin",
    "GroupDescription": ".aio.admin",
    "MemberDescription": ".aio.admin",
    "NewTopic": ".aio.admin",
    "ConsumerRebalanceListener": ".aio.consumer",
    "AuthenticationError": ".errors",
    "ConfigError": ".errors",
    "KafkaConnectionError": ".errors",
    "KafkaError": ".errors",
    "KafkaTimeoutError": ".errors",
    "ProducerFencedError": ".errors",
    "SaslAuthenticationError": ".errors",
    "SslAuthenticationError": ".errors",
    "TransactionAbortableError": ".errors",
    "TransactionStateError": ".errors",
    "ConsumerRecord": ".types",
    "OffsetAndMetadata": ".types",
    "OffsetAndTimestamp": ".types",
    "PartitionInfo": ".types",
    "RecordMetadata": ".types",
    "TopicDescription": ".types",
    "TopicPartition": ".types",
    "read_range_arrow": "._range",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Admin",
    "AuthenticationError",
    "ConfigEntry",
    "ConfigError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "GroupDescription",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "MemberDescription",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "Producer",
    "ProducerFencedError",
    "RecordMetadata",
    "SaslAuthenticationError",
    "SslAuthenticationError",
    "TopicDescription",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionStateError",
    "read_range_arrow",
]
