"""Synchronous facades: the asyncio cores run on a private event loop in a daemon thread.

Every blocking method submits a coroutine to that loop and waits for its result; plain methods
that touch loop state run on the loop thread too. ``Producer.send`` is the exception: it
appends to the (thread-safe) accumulator directly from the caller's thread, so producing does
not pay a thread hop per record.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from ._bulk import BulkFuture, Segment
from .aio._txn import ConsumerGroupMetadata
from .aio.admin import (
    AclBinding,
    AclBindingFilter,
    AsyncAdmin,
    ConfigEntry,
    GroupDescription,
    NewTopic,
)
from .aio.consumer import AsyncConsumer, ConsumerRebalanceListener
from .aio.producer import AsyncProducer
from .errors import KafkaTimeoutError
from .types import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicDescription,
    TopicPartition,
)

__all__ = ["Admin", "Consumer", "Producer"]

T = TypeVar("T")


class _LoopThread:
    def __init__(self, name: str) -> None:
        try:
            # lazy: uvloop is optional
            import uvloop

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover
            self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self.thread:
            raise RuntimeError("blocking client call from inside a client callback")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise KafkaTimeoutError("operation timed out") from None
        except BaseException:  # e.g. KeyboardInterrupt in the caller: stop the coroutine too
            fut.cancel()
            raise

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        async def wrapper() -> T:
            return fn(*args)

        return self.run(wrapper())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


class Producer:
    """Synchronous producer; ``send`` returns a ``RecordFuture`` (``.result(timeout)``)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._aio = AsyncProducer(config)
        self._lt = _LoopThread("odradek-producer")
        try:
            self._lt.run(self._aio.start())
        except BaseException:
            self._lt.stop()
            raise
        self._closed = False

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        *,
        on_delivery: Callable[[RecordMetadata | None, BaseException | None], Any] | None = None,
    ) -> Any:
        aio = self._aio
        parts = aio._cluster.topics.get(topic)
        n = len(parts) if parts else self._lt.run(aio._ensure_topic(topic))
        fut = aio._append(topic, value, key, headers, partition, timestamp, n, block=True)
        assert fut is not None
        if on_delivery is not None:
            fut.add_callback(on_delivery)
        return fut

    produce = send

    def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        partitions: Any = None,
        headers: Any = None,
        timestamps: Any = None,
    ) -> BulkFuture:
        """Buffer whole columns of records (pyarrow arrays or sequences; see
        ``odradek.client._bulk``) from the caller's thread; return one ``BulkFuture``
        (``.result(timeout)`` -> list of ``RecordMetadata`` in input order).

        Same partitions, batches and bytes as calling ``send`` for each row in turn."""
        aio = self._aio
        parts = aio._cluster.topics.get(topic)
        n = len(parts) if parts else self._lt.run(aio._ensure_topic(topic))
        recs, sizes, ps, nk, tss = aio._prepare_columns(topic, values, keys, partitions, headers, timestamps, n)
        segments: list[Segment] = []
        for lo, hi in aio._slices(sizes):
            seg = aio._append_rows(topic, recs, sizes, ps, nk, lo, hi, n, block=True)
            assert seg is not None
            segments.extend(seg)
        return BulkFuture(topic, len(recs), segments, tss)

    def flush(self, timeout: float | None = None) -> None:
        self._lt.run(self._aio.flush(timeout))

    # transactions (``transactional.id``): Java's / confluent-kafka's names and semantics
    def init_transactions(self, timeout: float | None = None) -> None:
        """Fence older instances of this ``transactional.id`` and abort their open
        transaction (see ``AsyncProducer.init_transactions``)."""
        self._lt.run(self._aio.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._lt.call(self._aio.begin_transaction)

    def producer_id_and_epoch(self) -> tuple[int, int]:
        """(producer id, epoch) of this producer (-1, -1 before it has one): with the
        ``transactional.id`` it names the open transaction, for ``Admin.end_transaction``."""
        return self._aio.producer_id_and_epoch()

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any, timeout: float | None = None) -> None:
        """Consumer offsets committed with the transaction (AddOffsetsToTxn + TxnOffsetCommit)."""
        self._lt.run(self._aio.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit (EndTxn). TransactionAbortableError: abort and retry the
        transaction; ProducerFencedError: fatal; KafkaTimeoutError: call again."""
        self._lt.run(self._aio.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._lt.run(self._aio.abort_transaction(timeout))

    def partitions_for(self, topic: str) -> list[int]:
        if self._aio.partitions_for(topic) is None:
            self._lt.run(self._aio._ensure_topic(topic))
        return self._aio.partitions_for(topic) or []

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered, then close (see ``AsyncProducer.close``): returns within
        ``timeout`` or, without one, delivery.timeout.ms + request.timeout.ms, also after an
        interrupted ``flush()``."""
        if self._closed:
            return
        self._closed = True
        limit = self._aio._give_up_after() if timeout is None else timeout
        try:
            self._lt.run(self._aio.close(timeout), timeout=limit + 5.0)
        finally:
            self._lt.stop()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Consumer:
    """Synchronous consumer: ``poll(timeout)`` returns a list of ``ConsumerRecord``;
    ``for record in consumer`` blocks for more, forever (until ``close()``)."""

    def __init__(self, config: dict[str, Any], *topics: str) -> None:
        self._lt = _LoopThread("odradek-consumer")
        try:
            self._aio = self._lt.call(AsyncConsumer, config)
            self._lt.run(self._aio.start())
            if topics:
                self._lt.call(self._aio.subscribe, list(topics))
        except BaseException:
            self._lt.stop()
            raise
        self._closed = False

    # assignment
    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._lt.call(self._aio.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._lt.call(self._aio.assignment)

    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None = None) -> None:
        self._lt.call(self._aio.subscribe, list(topics), listener)

    def subscription(self) -> set[str]:
        return self._aio.subscription()

    def unsubscribe(self) -> None:
        self._lt.call(self._aio.unsubscribe)

    # consuming
    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._lt.run(self._aio.poll(timeout, max_records))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self._closed:
            yield from self.poll(1.0)

    # positions
    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._lt.call(self._aio.seek, TopicPartition(*tp), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._lt.call(self._aio.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._lt.call(self._aio.seek_to_end, *partitions)

    def position(self, tp: TopicPartition) -> int:
        return self._lt.run(self._aio.position(TopicPartition(*tp)))

    def highwater(self, tp: TopicPartition) -> int:
        return self._aio.highwater(TopicPartition(*tp))

    def pause(self, *partitions: TopicPartition) -> None:
        self._lt.call(self._aio.pause, *partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._lt.call(self._aio.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return self._aio.paused()

    def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._lt.run(self._aio.offsets_for_times(timestamps))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._lt.run(self._aio.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._lt.run(self._aio.end_offsets(list(partitions)))

    def topics(self) -> dict[str, int]:
        return self._lt.run(self._aio.topics())

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self._lt.run(self._aio.partitions_for_topic(topic))

    # commits
    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._lt.run(self._aio.committed(list(partitions)))

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None) -> None:
        self._lt.run(self._aio.commit(offsets))

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        return self._lt.call(self._aio.consumer_group_metadata)

    def commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None, callback: Any = None) -> None:
        self._lt.call(self._aio.commit_async, offsets, callback)

    def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._lt.run(self._aio.close(autocommit), timeout=30)
        finally:
            self._lt.stop()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Admin:
    """Synchronous admin client (same methods as ``AsyncAdmin``)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._lt = _LoopThread("odradek-admin")
        try:
            self._aio = self._lt.call(AsyncAdmin, config)
            self._lt.run(self._aio.start())
        except BaseException:
            self._lt.stop()
            raise

    # topics
    def create_topics(self, topics: Iterable[NewTopic | str], *, validate_only: bool = False, raise_on_exists: bool = True) -> dict[str, int]:
        return self._lt.run(self._aio.create_topics(topics, validate_only=validate_only, raise_on_exists=raise_on_exists))

    def delete_topics(self, names: Iterable[str]) -> dict[str, int]:
        return self._lt.run(self._aio.delete_topics(list(names)))

    def list_topics(self, *, include_internal: bool = False) -> dict[str, TopicDescription]:
        return self._lt.run(self._aio.list_topics(include_internal=include_internal))

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicDescription]:
        return self._lt.run(self._aio.describe_topics(list(names)))

    def create_partitions(self, new_counts: dict[str, int], *, validate_only: bool = False) -> None:
        self._lt.run(self._aio.create_partitions(new_counts, validate_only=validate_only))

    # configs
    def describe_configs(self, topics: Iterable[str], keys: list[str] | None = None) -> dict[str, dict[str, ConfigEntry]]:
        return self._lt.run(self._aio.describe_configs(list(topics), keys))

    def alter_configs(self, changes: dict[str, dict[str, str | None]]) -> None:
        self._lt.run(self._aio.alter_configs(changes))

    incremental_alter_configs = alter_configs

    # offsets
    def list_offsets(self, query: dict[TopicPartition | tuple[str, int], Any], *, read_committed: bool = False) -> dict[TopicPartition, tuple[int, int]]:
        """{(topic, partition): "earliest" | "latest" | "max_timestamp" | timestamp_ms}
        -> {TopicPartition: (offset, timestamp)}."""
        return self._lt.run(self._aio.list_offsets(query, read_committed=read_committed))

    # groups
    def list_groups(self) -> list[tuple[str, str, str]]:
        return self._lt.run(self._aio.list_groups())

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        return self._lt.run(self._aio.describe_groups(list(group_ids)))

    def remove_group_members(self, group_id: str, member_ids: Iterable[str]) -> dict[str, int]:
        return self._lt.run(self._aio.remove_group_members(group_id, list(member_ids)))

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        return self._lt.run(self._aio.delete_groups(list(group_ids)))

    def list_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._lt.run(self._aio.list_group_offsets(group_id, None if partitions is None else list(partitions)))

    list_consumer_group_offsets = list_group_offsets

    def alter_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int | OffsetAndMetadata]) -> None:
        self._lt.run(self._aio.alter_group_offsets(group_id, offsets))

    alter_consumer_group_offsets = alter_group_offsets

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                        timeout: float = 30.0) -> None:
        """EndTxn for another producer's transaction (see ``AsyncAdmin.end_transaction``)."""
        self._lt.run(self._aio.end_transaction(transactional_id, producer_id, producer_epoch, committed, timeout))

    # ACLs
    def describe_acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        return self._lt.run(self._aio.describe_acls(flt))

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[tuple[int, str | None]]:
        return self._lt.run(self._aio.create_acls(list(bindings)))

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        return self._lt.run(self._aio.delete_acls(list(filters)))

    def describe_cluster(self) -> dict[str, Any]:
        return self._lt.run(self._aio.describe_cluster())

    def close(self) -> None:
        try:
            self._lt.run(self._aio.close(), timeout=30)
        finally:
            self._lt.stop()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
