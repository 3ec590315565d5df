"""The idempotent producer's state: producer id, epoch and per-partition sequences (KIP-98, KIP-360).

As Kafka's Java producer (``TransactionManager`` for an idempotent producer): InitProducerId
once; a batch gets its partition's next sequence when first drained (``assign_sequence``), so
sequences follow send order; the last acknowledged sequence of each partition tells a real gap
from a retry. Errors that break the sequences ask for a reset (``request_reset``): level 1
bumps the epoch, level 2 gets a new producer id. The sender performs it once nothing is in
flight (``reset``): every partition restarts at sequence 0 under the new epoch.

A transactional producer cannot bump its epoch in the middle of a transaction: a reset request
makes the transaction abortable instead (``abort_transaction()`` gets the new epoch).
"""

from __future__ import annotations

import asyncio
import logging
import time

from .. import _protocol as proto
from .._cluster import Cluster
from ..errors import KafkaError, TransactionAbortableError
from ..types import TopicPartition
from ._accumulator import ProducerBatch
from ._txn import TransactionManager

__all__ = [
    "DUPLICATE_SEQUENCE", "PRODUCER_STATE_ERRORS", "RETRIABLE", "IdempotenceState", "PartitionState",
    "init_producer_id",
]  # fmt: skip

log = logging.getLogger("odradek.client.producer")

RETRIABLE = frozenset({2, 3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 56, 74, 75})
"""Error codes of Produce and InitProducerId that the producer retries."""
OUT_OF_ORDER = 45
DUPLICATE_SEQUENCE = 46
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_PRODUCER_ID = 59
PRODUCER_STATE_ERRORS = frozenset({OUT_OF_ORDER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID})
SEQ_MAX = 0x7FFFFFFF
MAX_EPOCH = 32767


class PartitionState:
    """The sender's view of one partition: next sequence, last acknowledged, batches in flight."""

    __slots__ = ("in_flight", "last_acked", "next_seq")

    def __init__(self) -> None:
        self.next_seq = 0
        self.last_acked = -1
        self.in_flight = 0


class IdempotenceState:
    """Producer id, epoch, per-partition sequence state and the pending reset (no I/O).

    ``enabled`` False (``enable.idempotence=false``): batches get no sequence (-1) but
    ``parts`` still counts batches in flight per partition."""

    def __init__(self, enabled: bool, txn: TransactionManager | None) -> None:
        self.enabled = enabled
        self.txn = txn
        self.producer_id = -1
        self.epoch = -1
        self.parts: dict[TopicPartition, PartitionState] = {}
        self.reset_pending = 0  # 1: bump the epoch, 2: get a new producer id
        self.reset_reason = ""
        self.pid_requesting = False  # an InitProducerId is under way

    def part(self, tp: TopicPartition) -> PartitionState:
        st = self.parts.get(tp)
        if st is None:
            st = self.parts[tp] = PartitionState()
        return st

    def set_producer_id(self, pid: int, epoch: int) -> None:
        """A new producer id or epoch: sequences start at 0 again."""
        self.producer_id, self.epoch = pid, epoch
        self.parts.clear()

    def assign_sequence(self, b: ProducerBatch) -> tuple[int, int, int]:
        """(producer id, epoch, base sequence) for ``b``'s first encoding; (-1, -1, -1) when
        idempotence is off. Advances the partition's next sequence by the batch's records."""
        if not self.enabled:
            return -1, -1, -1
        st = self.part(b.tp)
        seq = st.next_seq
        st.next_seq = (seq + len(b.records)) & SEQ_MAX
        b.base_sequence = seq
        b.epoch = self.epoch
        return self.producer_id, self.epoch, seq

    def acked(self, b: ProducerBatch) -> None:
        if b.base_sequence >= 0 and b.epoch == self.epoch:
            self.part(b.tp).last_acked = (b.base_sequence + len(b.records) - 1) & SEQ_MAX

    def leaves_hole(self, b: ProducerBatch) -> bool:
        """Whether failing ``b`` leaves a hole in its partition's sequences (it had one under
        the current epoch)."""
        return self.enabled and b.base_sequence >= 0 and b.epoch == self.epoch

    def producer_state_error(self, b: ProducerBatch, err: int) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH for a batch
        (as Kafka's TransactionManager does for an idempotent producer, KIP-360). True: retry it.

        * OUT_OF_ORDER for a batch that is not the next the partition expects: an earlier batch
          failed, and this one is retried after it (with its own sequence).
        * OUT_OF_ORDER for the next expected batch: a real gap (the broker's state for this
          producer lost batches it had acknowledged): bump the epoch and retry the batch (it was
          not written) from sequence 0, as the Java client does.
        * UNKNOWN_PRODUCER_ID (the broker has no state for the producer, e.g. removed with old
          segments): bump the epoch, retry the batch (it was not written).
        * INVALID_PRODUCER_EPOCH: the broker knows a newer epoch; get a new producer id and retry.
        """
        if b.result.done or b.epoch != self.epoch:
            return not b.result.done  # an attempt from before a reset: re-sequenced and retried
        if err == OUT_OF_ORDER:
            st = self.part(b.tp)
            expected = 0 if st.last_acked < 0 else (st.last_acked + 1) & SEQ_MAX
            if b.base_sequence != expected:
                return True
            self.request_reset(1, f"OUT_OF_ORDER_SEQUENCE_NUMBER for {b.tp.topic}-{b.tp.partition} at sequence "
                                  f"{b.base_sequence}, the next one expected (a gap in the broker's state)")
            return True
        if err == UNKNOWN_PRODUCER_ID:
            self.request_reset(1, f"UNKNOWN_PRODUCER_ID for {b.tp.topic}-{b.tp.partition}")
        else:
            self.request_reset(2, f"INVALID_PRODUCER_EPOCH for {b.tp.topic}-{b.tp.partition}")
        return True

    def request_reset(self, level: int, reason: str) -> None:
        """Ask for an epoch bump (1) or a new producer id (2): done by the sender once no request
        is in flight; until then nothing is drained. A transactional producer cannot bump its
        epoch in the middle of a transaction: the transaction becomes abortable, and
        ``abort_transaction()`` gets a new epoch."""
        if self.txn is not None:
            self.txn.fail_abortable(TransactionAbortableError(f"the transaction cannot complete: {reason}"), bump_epoch=True)
            return
        if level > self.reset_pending:
            self.reset_pending = level
        if self.reset_reason:
            return
        self.reset_reason = reason
        log.warning("producer id %s epoch %s: %s; resetting sequences", self.producer_id, self.epoch, reason)

    def reset(self) -> tuple[bool, str]:
        """Perform the pending reset's local part: forget every partition's sequences and bump
        the epoch. Returns (a new producer id is needed instead, the reason)."""
        reason = self.reset_reason
        level = self.reset_pending
        self.parts.clear()
        self.reset_pending = 0
        self.reset_reason = ""
        if level >= 2 or self.epoch >= MAX_EPOCH:
            return True, reason
        self.epoch += 1
        return False, reason


async def init_producer_id(cluster: Cluster, max_block: float, backoff: float) -> tuple[int, int]:
    """InitProducerId without a transactional id, retried until ``max_block`` seconds passed;
    returns (producer id, epoch)."""
    deadline = time.monotonic() + max_block
    while True:
        conn = await cluster.any_connection()
        try:
            version = conn.version(22)
        except KafkaError:
            raise KafkaError("broker does not support InitProducerId: set enable.idempotence=false", 35) from None
        mod = proto.request_module(22, version)
        resp = await conn.request(
            proto.build(mod.InitProducerIdRequest, transactional_id=None, transaction_timeout=60000,
                        producer_id=-1, producer_epoch=-1)
        )
        err = int(resp.error_code)
        if not err:
            return int(resp.producer_id), int(resp.producer_epoch)
        if err not in RETRIABLE or time.monotonic() > deadline:
            raise KafkaError("InitProducerId failed", err)
        await asyncio.sleep(backoff)
