"""Producer stress: every record read back, exactly once and in send order per partition.

Matrix: 1 and 6 partitions x ``send`` / ``send_batch`` / ``AsyncProducer`` x ``linger.ms`` 0
and 5 x (idempotent, acks=all) / (not idempotent, acks=all) / (not idempotent, acks=1) (the
client refuses idempotence with acks=1, as Kafka's does). Plus a broker restarted in the middle
of sending (SIGTERM, and SIGKILL) and a broker that dies for good (every future fails within
delivery.timeout.ms; flush() and close() return, also after an interrupted flush()).

Each case runs ``ODRADEK_STRESS_TRIES`` times (default 3; ``make stress`` sets 20), each try on
a new topic. Without idempotence a retry after a lost connection may write a batch twice (as
with Kafka): the restart cases without idempotence check at-least-once and that every
acknowledged offset holds its record.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from odradek.client import Admin, Consumer, KafkaError, NewTopic, Producer, TopicPartition
from odradek.client.aio import AsyncProducer
from odradek.testing.process import BrokerProcess

TRIES = int(os.environ.get("ODRADEK_STRESS_TRIES", "3"))
N = 2000  # records per try
KEYS = 23  # distinct keys: records spread over the partitions by the key hash

pytestmark = pytest.mark.timeout(60 + 20 * TRIES)


# -- the checker ------------------------------------------------------------------------------
def check_exactly_once_in_order(sent: dict[int, list[int]], read: dict[int, list[int]]) -> list[str]:
    """Problems found comparing what was sent (record ids per partition, in send order) with
    what was read back (ids per partition, in offset order); empty when every record is there
    exactly once, in order."""
    problems = []
    for p in sorted(set(sent) | set(read)):
        want, got = sent.get(p, []), read.get(p, [])
        if got == want:
            continue
        seen: dict[int, int] = {}
        for r in got:
            seen[r] = seen.get(r, 0) + 1
        missing = [r for r in want if r not in seen]
        dups = sorted(r for r, c in seen.items() if c > 1)
        extra = sorted(set(seen) - set(want))
        what = []
        if missing:
            what.append(f"{len(missing)} missing (first {missing[:5]})")
        if dups:
            what.append(f"{len(dups)} duplicated (first {dups[:5]})")
        if extra:
            what.append(f"{len(extra)} never sent (first {extra[:5]})")
        if not what:
            i = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
            what.append(f"out of order at position {i}: read {got[i:i + 3]}, sent {want[i:i + 3]}")
        problems.append(f"partition {p}: " + "; ".join(what))
    return problems


def check_at_least_once(sent: dict[int, list[int]], read: dict[int, list[int]]) -> list[str]:
    problems = []
    for p, want in sent.items():
        missing = set(want) - set(read.get(p, []))
        if missing:
            problems.append(f"partition {p}: {len(missing)} missing (first {sorted(missing)[:5]})")
    return problems


@pytest.mark.parametrize(
    ("read", "problem"),
    [
        ({0: [0, 3], 1: [2]}, "1 missing"),
        ({0: [0, 1, 1, 3], 1: [2]}, "1 duplicated"),
        ({0: [0, 3, 1], 1: [2]}, "out of order at position 1"),
        ({0: [0, 1, 3], 1: [2, 9]}, "never sent"),
        ({0: [0, 1, 3]}, "partition 1: 1 missing"),
    ],
)
def test_checker_finds_gaps_duplicates_and_reordering(read: dict[int, list[int]], problem: str) -> None:
    sent = {0: [0, 1, 3], 1: [2]}
    assert check_exactly_once_in_order(sent, sent) == []
    problems = check_exactly_once_in_order(sent, read)
    assert problems and problem in problems[0], problems


def test_at_least_once_checker_finds_a_gap() -> None:
    sent = {0: [0, 1, 3]}
    assert check_at_least_once(sent, {0: [0, 1, 1, 3]}) == []
    assert check_at_least_once(sent, {0: [0, 3]}) == ["partition 0: 1 missing (first [1])"]


# -- helpers ----------------------------------------------------------------------------------
def _topic(broker: BrokerProcess, partitions: int) -> str:
    name = f"stress-{uuid.uuid4().hex[:10]}"
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def _value(run: str, i: int) -> bytes:
    return f"{run}:{i:08d}:".encode() + b"x" * 60


def _read(broker: BrokerProcess, topic: str, partitions: int, run: str) -> dict[int, list[int]]:
    """Record ids per partition in offset order: everything up to each partition's end offset
    (taken once the producer has finished), so duplicates cannot end the read early."""
    out: dict[int, list[int]] = {p: [] for p in range(partitions)}
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest",
                   "enable.auto.commit": False}) as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + 30
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"read stopped short of the end offsets {ends}"
            for r in c.poll(0.5):
                r_run, idx, _ = r.value.split(b":", 2)
                assert r_run.decode() == run
                out[r.partition].append(int(idx))
    return out


def _expected(partitions_by_record: Sequence[int]) -> dict[int, list[int]]:
    sent: dict[int, list[int]] = {}
    for i, p in enumerate(partitions_by_record):
        sent.setdefault(p, []).append(i)
    return sent


def _produce_sync(config: dict[str, Any], topic: str, run: str, api: str, between: Any = None) -> list[int]:
    """Send N records with ``send`` or ``send_batch`` (chunks of 250); ``between()`` runs after
    the first half is buffered. Returns each record's partition."""
    keys = [str(i % KEYS).encode() for i in range(N)]
    half = N // 2
    with Producer(config) as p:
        futs: list[Any] = []
        for lo, hi in ((0, half), (half, N)):
            if api == "send":
                futs.extend(p.send(topic, _value(run, i), key=keys[i]) for i in range(lo, hi))
            else:
                for a in range(lo, hi, 250):
                    b = min(hi, a + 250)
                    futs.append(p.send_batch(topic, [_value(run, i) for i in range(a, b)], keys=keys[a:b]))
            if between is not None and lo == 0:
                between()
        p.flush()
        if api == "send":
            return [f.result(0).partition for f in futs]
        out: list[int] = []
        for f in futs:
            out.extend(m.partition for m in f.result(0))
        return out


def _produce_async(config: dict[str, Any], topic: str, run: str, between: Any = None) -> list[int]:
    async def main() -> list[int]:
        async with AsyncProducer(config) as p:
            futs = []
            for i in range(N):
                if between is not None and i == N // 2:
                    await asyncio.to_thread(between)
                futs.append(await p.send(topic, _value(run, i), key=str(i % KEYS).encode()))
            await p.flush()
            return [(await f).partition for f in futs]

    return asyncio.run(main())


def _produce(config: dict[str, Any], topic: str, run: str, api: str, between: Any = None) -> list[int]:
    if api == "async":
        return _produce_async(config, topic, run, between)
    return _produce_sync(config, topic, run, api, between)


MODES = {  # name: (enable.idempotence, acks)
    "idempotent": (True, "all"),
    "plain-all": (False, "all"),
    "plain-1": (False, "1"),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("linger", [0, 5])
@pytest.mark.parametrize("api", ["send", "send_batch", "async"])
@pytest.mark.parametrize("partitions", [1, 6])
def test_every_record_once_in_order(broker: BrokerProcess, partitions: int, api: str, linger: int, mode: str) -> None:
    idempotent, acks = MODES[mode]
    config = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": linger, "acks": acks,
              "enable.idempotence": idempotent}
    for _ in range(TRIES):
        topic, run = _topic(broker, partitions), uuid.uuid4().hex[:8]
        parts = _produce(config, topic, run, api)
        sent = _expected(parts)
        problems = check_exactly_once_in_order(sent, _read(broker, topic, partitions, run))
        assert not problems, problems


def test_issue_workload_first_batches_never_lost(broker: BrokerProcess) -> None:
    """The workload that lost the first batches of partitions: 5 partitions, 5,000 x 100 B,
    partition i % 5, linger.ms 5, a new producer (so a new leader connection) per try. The
    batches drained while that connection opened used to be written in the wrong order, the
    broker took a later sequence as the partition's first, and the first batches were retried
    with OUT_OF_ORDER_SEQUENCE_NUMBER until delivery.timeout.ms."""
    for _ in range(max(10, TRIES)):
        topic, run = _topic(broker, 5), uuid.uuid4().hex[:8]
        with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5}) as p:
            futs = [p.send(topic, _value(run, i)[:100], partition=i % 5) for i in range(5000)]
            p.flush(15)
            assert all(f.result(0).offset == i // 5 for i, f in enumerate(futs))
        problems = check_exactly_once_in_order(_expected([i % 5 for i in range(5000)]),
                                               _read(broker, topic, 5, run))
        assert not problems, problems


# -- broker restarts and deaths ---------------------------------------------------------------
@pytest.fixture(scope="module")
def restart_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess({"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
@pytest.mark.parametrize(
    ("api", "mode"),
    [("send", "idempotent"), ("send_batch", "idempotent"), ("async", "idempotent"), ("send", "plain-all")],
)
def test_broker_restart_while_sending(restart_broker: BrokerProcess, api: str, mode: str, kill: bool) -> None:
    idempotent, acks = MODES[mode]
    config = {"bootstrap.servers": restart_broker.bootstrap_servers, "linger.ms": 5, "acks": acks,
              "enable.idempotence": idempotent, "delivery.timeout.ms": 60000,
              "reconnect.backoff.max.ms": 200}
    for _ in range(TRIES):
        topic, run = _topic(restart_broker, 6), uuid.uuid4().hex[:8]
        # the first half is buffered (some of it in flight) when the broker goes down
        parts = _produce(config, topic, run, api, between=lambda: restart_broker.restart(kill=kill))
        sent = _expected(parts)
        read = _read(restart_broker, topic, 6, run)
        if idempotent:
            problems = check_exactly_once_in_order(sent, read)
        else:
            problems = check_at_least_once(sent, read)
        assert not problems, problems


class _Interrupted(BaseException):
    """What a pytest-timeout signal or ^C raises inside a blocking call."""


@pytest.mark.parametrize("api", ["send", "send_batch", "async"])
def test_broker_dies_for_good_futures_fail_within_delivery_timeout(api: str) -> None:
    delivery = 3.0
    config = {"linger.ms": 5, "delivery.timeout.ms": int(delivery * 1000), "request.timeout.ms": 1000,
              "reconnect.backoff.max.ms": 200}
    with BrokerProcess({"group.initial.rebalance.delay.ms": 0}) as broker:
        config["bootstrap.servers"] = broker.bootstrap_servers
        topic = _topic(broker, 6)
        if api == "async":

            async def main() -> tuple[float, list[BaseException | None], float]:
                async with AsyncProducer(config) as p:
                    await p.send_and_wait(topic, b"first")
                    broker.kill()
                    t0 = time.monotonic()
                    futs = [await p.send(topic, _value("dead", i)) for i in range(500)]
                    outcomes: list[BaseException | None] = []
                    for f in futs:
                        try:
                            await f
                            outcomes.append(None)
                        except KafkaError as exc:
                            outcomes.append(exc)
                    waited = time.monotonic() - t0
                    t1 = time.monotonic()
                    await p.flush()  # nothing left: returns at once
                return waited, outcomes, time.monotonic() - t1

            waited, outcomes, closing = asyncio.run(main())
            assert all(isinstance(o, KafkaError) for o in outcomes)
            assert waited < delivery + 1.5
            assert closing < 2.0
            return
        p = Producer(config)
        try:
            p.send(topic, b"first").result(10)
            broker.kill()
            t0 = time.monotonic()
            if api == "send":
                futs = [p.send(topic, _value("dead", i)) for i in range(500)]
                errors = [f.exception(delivery + 2) for f in futs]
            else:
                bulk = p.send_batch(topic, [_value("dead", i) for i in range(500)])
                with pytest.raises(KafkaError):
                    bulk.result(delivery + 2)
                errors = [KafkaError("bulk failed")]
            waited = time.monotonic() - t0
            assert all(isinstance(e, KafkaError) for e in errors)
            assert waited < delivery + 1.5, f"futures took {waited:.1f} s to fail"
            # more records, then a flush() interrupted by a signal (as pytest-timeout or ^C do),
            # then close(): it must return, bounded, and fail what is left
            late = [p.send(topic, _value("late", i)) for i in range(100)]

            def interrupt(signum: int, frame: Any) -> None:
                raise _Interrupted()

            old = signal.signal(signal.SIGALRM, interrupt)
            try:
                signal.setitimer(signal.ITIMER_REAL, 0.3)
                with pytest.raises(_Interrupted):
                    p.flush()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
            t1 = time.monotonic()
            p.close()
            closing = time.monotonic() - t1
            assert closing < delivery + 1.0 + 2.0, f"close() took {closing:.1f} s"
            assert all(f.done() and isinstance(f.exception(0), KafkaError) for f in late)
        finally:
            p.close(0)
        assert threading.active_count() < 50
