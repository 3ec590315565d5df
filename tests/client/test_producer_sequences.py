"""The idempotent producer's sequence decisions, offline (no broker, no event loop): what the
sender does with OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_EPOCH
answers, how a reset re-sequences queued batches, and that retries go back in drain order.
(The end-to-end behaviour is in test_stress.py.)"""

from __future__ import annotations

from typing import Any

from odradek.client import KafkaError, TopicPartition
from odradek.client.aio import AsyncProducer

TP = TopicPartition("t", 0)


def _producer() -> AsyncProducer:
    p = AsyncProducer({"bootstrap.servers": "127.0.0.1:1", "batch.size": 200, "linger.ms": 0})
    p._idem.set_producer_id(7, 0)
    return p


def _drain(p: AsyncProducer, n: int) -> list[Any]:
    """Fill and take ``n`` batches of partition 0 in order, encoded as the sender does."""
    for _ in range(n * 3):
        p._append("t", b"v" * 40, None, None, 0, 1, 1, block=True)
    q = p._acc.queues[TP]
    out = []
    for _ in range(n):
        b = q.popleft()
        b.sealed = True
        p._sender.encode(b)
        b.attempts = 1
        out.append(b)
    return out


def test_sequences_follow_drain_order() -> None:
    p = _producer()
    b = _drain(p, 3)
    assert [x.base_sequence for x in b] == [0, len(b[0].records), len(b[0].records) + len(b[1].records)]
    assert [x.order for x in b] == [0, 1, 2]


def test_requeue_puts_retries_back_in_drain_order_ahead_of_newer_batches() -> None:
    p = _producer()
    b = _drain(p, 3)
    newer = list(p._acc.queues[TP])
    p._sender.requeue([b[2]])
    p._sender.requeue([b[0], b[1]])
    assert list(p._acc.queues[TP]) == [b[0], b[1], b[2], *newer]


def test_out_of_order_for_a_later_batch_is_retried() -> None:
    p = _producer()
    b = _drain(p, 2)
    assert p._idem.producer_state_error(b[1], 45) is True
    assert not p._idem.reset_pending and not b[1].result.done


def test_out_of_order_for_the_next_batch_bumps_the_epoch_and_retries_it() -> None:
    p = _producer()
    b = _drain(p, 3)
    p._idem.acked(b[0])
    b[2].ambiguous = True  # its request was lost: it may have been written
    assert p._idem.producer_state_error(b[1], 45) is True  # not written: retried after the bump
    assert p._idem.reset_pending == 1 and not b[1].result.done
    p._sender.requeue([b[1], b[2]])
    queued = list(p._acc.queues[TP])
    p._sender.reset_producer_state()
    assert p._idem.epoch == 1 and not p._idem.reset_pending
    # the ambiguous batch fails (re-sending it under a new epoch could duplicate it) ...
    assert isinstance(b[2].result.exception, KafkaError) and "may or may not" in str(b[2].result.exception)
    # ... the others are re-sequenced from 0 under the new epoch, in order, b[1] first
    rest = list(p._acc.queues[TP])
    assert rest == [x for x in queued if x is not b[2]] and rest[0] is b[1]
    for x in rest:
        p._sender.encode(x)
    assert rest[0].base_sequence == 0 and rest[0].epoch == 1
    assert rest[1].base_sequence == len(rest[0].records)


def test_unknown_producer_id_retries_after_an_epoch_bump() -> None:
    p = _producer()
    b = _drain(p, 1)
    assert p._idem.producer_state_error(b[0], 59) is True
    assert p._idem.reset_pending == 1 and not b[0].result.done


def test_invalid_producer_epoch_asks_for_a_new_producer_id() -> None:
    p = _producer()
    b = _drain(p, 1)
    assert p._idem.producer_state_error(b[0], 47) is True
    assert p._idem.reset_pending == 2


def test_a_failed_sequenced_batch_leaves_a_hole_and_asks_for_a_reset() -> None:
    p = _producer()
    b = _drain(p, 2)
    p._sender.fail_batch(b[0], KafkaError("boom", 87))
    assert b[0].result.done and p._idem.reset_pending == 1
