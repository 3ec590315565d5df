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

from typing import TYPE_CHECKING, Any

from ._sync import Admin, Consumer, Producer
from .aio._txn import ConsumerGroupMetadata
from .aio.admin import ConfigEntry, GroupDescription, MemberDescription, NewTopic
from .aio.consumer import ConsumerRebalanceListener
from .errors import (
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
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

if TYPE_CHECKING:
    from ._range import read_range_arrow


def __getattr__(name: str) -> Any:
    # read_range_arrow imports pyarrow (~26 MB RSS): only when asked for, so that a broker
    # running the console (which uses this client) does not pay for it
    if name == "read_range_arrow":
        # lazy: pyarrow (see above)
        from ._range import read_range_arrow

        return read_range_arrow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Admin",
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
    "TopicDescription",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionStateError",
    "read_range_arrow",
]
