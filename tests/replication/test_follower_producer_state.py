"""A follower keeps its partition's producer state current as it appends the leader's batches
and as it truncates (``Partition.append_as_follower`` / ``truncate_to``), so that a new leader
has it without replaying the log. Property: after any sequence of follower appends (plain,
idempotent, transactional batches, COMMIT/ABORT markers), truncations and producer-state
snapshots and reloads, the incrementally kept state equals a replay of the log from scratch."""

from __future__ import annotations

import asyncio
import re
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from odradek.broker.metadata_store import PartitionState
from odradek.broker.partition import Partition
from odradek.protocol.records import build_batch
from odradek.storage import LogConfig, MemoryLog
from odradek.storage.api import PartitionLog
from odradek.storage.log import FileLog
from odradek.storage.producer_state import (
    ProducerStateManager,
    Verdict,
    snapshot_offset,
    write_snapshot,
)
from odradek.storage.transaction_index import (
    AbortedTxn,
    ControlRecordType,
    TransactionIndex,
    build_control_batch,
)
from odradek.testing.process import BrokerProcess

from .controller import NONE, Controller, produce

TS = 1_700_000_000_000


def follower(snapshot_path: Path | None = None, log_dir: Path | None = None) -> Partition:
    """A follower of broker 2 on a ``MemoryLog``, or on a ``FileLog`` in ``log_dir``."""
    config = LogConfig(segment_bytes=2048)
    plog: PartitionLog
    if log_dir is None:
        plog = MemoryLog("t", 0, config)
    else:
        plog = FileLog(log_dir / "t-0", config, topic="t", partition=0)
    p = Partition("t", 0, plog, LogConfig(), PartitionState(0, -1, -1), 1, snapshot_path)
    p.make_follower(PartitionState(0, 2, 0, [1, 2], [1, 2]))
    return p


def data_batch(
    base_offset: int,
    epoch: int,
    n: int,
    *,
    pid: int = -1,
    seq: int = -1,
    transactional: bool = False,
) -> bytes:
    return build_batch(
        [(None, b"v", (), TS + i) for i in range(n)],
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        partition_leader_epoch=epoch,
        is_transactional=transactional,
    )


def state_of(ps: ProducerStateManager, high_watermark: int) -> tuple[Any, ...]:
    aborted = [(t.producer_id, t.first_offset, t.last_offset) for t in ps.txn.aborted]
    return ps.snapshot(), aborted, ps.last_stable_offset(high_watermark)


# (kind, producer index, record count)
_step = st.one_of(
    st.tuples(
        st.sampled_from(["plain", "idempotent", "txn", "commit", "abort"]),
        st.integers(0, 1),
        st.integers(1, 4),
    ),
    st.tuples(st.just("truncate"), st.integers(0, 1), st.integers(1, 6)),
    st.tuples(st.just("snapshot"), st.just(0), st.just(0)),
    st.tuples(st.just("reload"), st.just(0), st.just(0)),
)


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
@settings(max_examples=60, deadline=None)
@given(st.lists(_step, min_size=1, max_size=30))
# an aborted transaction, a snapshot after it, then a truncation back to the snapshot's
# offset: the reload from the snapshot must keep the aborted transaction below it
@example([("txn", 1, 1), ("abort", 1, 1), ("snapshot", 0, 0), ("plain", 0, 1), ("truncate", 0, 1)])
@example([("txn", 1, 1), ("abort", 1, 1), ("snapshot", 0, 0), ("plain", 0, 1), ("reload", 0, 0)])
def test_incremental_state_equals_a_replay(
    on_disk: bool, steps: list[tuple[str, int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "producer_state.snapshot"
        p = follower(path, Path(tmp) if on_disk else None)
        try:
            _run_steps(p, path, steps)
        finally:
            p.log.close()


def _run_steps(p: Partition, path: Path, steps: list[tuple[str, int, int]]) -> None:
    plog = p.log
    seqs = [0, 0]
    for kind, who, n in steps:
        end = plog.log_end_offset
        if kind == "truncate":
            p.truncate_to(max(plog.log_start_offset, end - n))
        elif kind == "reload":  # the state dropped and loaded again: snapshot, then the log
            p.reset_producer_state()
            p.producer_state()
        elif kind == "snapshot":
            payload = p.producer_state().snapshot_payload(plog, force=True)
            assert payload is not None
            write_snapshot(path, payload)
        elif kind in ("commit", "abort"):
            marker = ControlRecordType.COMMIT if kind == "commit" else ControlRecordType.ABORT
            p.append_as_follower(
                build_control_batch(
                    100 + who, 0, marker, 0, TS, base_offset=end, partition_leader_epoch=0
                )
            )
        else:
            pid = -1 if kind == "plain" else (10 if kind == "idempotent" else 100) + who
            seq = -1 if pid < 0 else seqs[who]
            if pid >= 0:
                seqs[who] += n
            p.append_as_follower(
                data_batch(end, 0, n, pid=pid, seq=seq, transactional=kind == "txn")
            )
        ps = p.loaded_producer_state()
        if ps is None:  # nothing appended nor truncated yet
            continue
        hw = plog.log_end_offset
        assert state_of(ps, hw) == state_of(ProducerStateManager.load(plog, None), hw)


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
def test_read_committed_still_skips_an_aborted_transaction_after_a_truncation(
    on_disk: bool,
) -> None:
    """A truncation reloads the producer state from a snapshot taken after an ABORT marker:
    the aborted transaction below the snapshot is still listed to read_committed fetches (and
    its ``.txnindex`` entry stays); a truncation through the marker reopens the transaction."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "producer_state.snapshot"
        p = follower(path, Path(tmp) if on_disk else None)
        txnindex = Path(tmp) / "t-0" / f"{0:020d}.txnindex"
        try:
            p.append_as_follower(data_batch(0, 0, 2, pid=101, seq=0, transactional=True))
            p.append_as_follower(
                build_control_batch(
                    101, 0, ControlRecordType.ABORT, 0, TS, base_offset=2, partition_leader_epoch=0
                )
            )
            payload = p.producer_state().snapshot_payload(p.log, force=True)
            assert payload is not None
            write_snapshot(path, payload)  # covers [0, 3)
            p.append_as_follower(data_batch(3, 0, 1))
            p.truncate_to(3)
            assert snapshot_offset(path) == 3 == p.log.log_end_offset
            aborted = AbortedTxn(101, 0, 2, 3)
            if on_disk:
                assert TransactionIndex(0, txnindex).entries == [aborted]
            p.make_leader(PartitionState(0, 1, 1, [1], [1]), now_ms=0)
            p.log.update_high_watermark(3)
            data = p.fetch_records(0, 1 << 20, True, follower=False, read_committed=True)
            assert data.error == NONE
            assert data.last_stable_offset == 3
            assert data.aborted_transactions == [(101, 0)]
            # through the marker: the transaction is open again, nothing is aborted
            p.truncate_to(2)
            ps = p.loaded_producer_state()
            assert ps is not None and ps.txn.aborted == [] and ps.in_transaction(101)
            assert ps.last_stable_offset(2) == 0
            if on_disk:
                assert TransactionIndex(0, txnindex).entries == []
        finally:
            p.log.close()


def test_a_follower_that_becomes_leader_continues_the_sequences() -> None:
    p = follower()
    p.append_as_follower(data_batch(0, 0, 3, pid=7, seq=0))
    p.append_as_follower(data_batch(3, 0, 2, pid=7, seq=3))
    p.append_as_follower(data_batch(5, 0, 1, pid=8, seq=0, transactional=True))
    ps = p.loaded_producer_state()
    assert ps is not None
    p.make_leader(PartitionState(0, 1, 1, [1, 2], [1, 2]), now_ms=0)
    assert p.producer_state() is ps  # the same object: nothing replayed
    assert ps.check(7, 0, 5, 5) == (Verdict.OK, -1)
    assert ps.check(7, 0, 3, 4) == (Verdict.DUPLICATE, 3)
    assert ps.check(7, 0, 9, 9)[0] is Verdict.OUT_OF_ORDER
    assert ps.in_transaction(8)
    assert ps.last_stable_offset(6) == 5


def test_truncation_keeps_a_snapshot_below_and_drops_one_past_the_truncation_point() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "producer_state.snapshot"
        p = follower(path)
        p.append_as_follower(data_batch(0, 0, 2, pid=7, seq=0))
        payload = p.producer_state().snapshot_payload(p.log, force=True)
        assert payload is not None
        write_snapshot(path, payload)  # covers [0, 2)
        p.append_as_follower(data_batch(2, 0, 2, pid=7, seq=2))
        p.truncate_to(3)  # inside the second batch: the batch goes (whole batches only)
        assert snapshot_offset(path) == 2
        ps = p.loaded_producer_state()
        assert ps is not None and ps.check(7, 0, 2, 3) == (Verdict.OK, -1)
        p.truncate_to(1)
        assert not path.exists()
        ps = p.loaded_producer_state()
        assert ps is not None and p.log.log_end_offset == 0 and len(ps) == 0


# -- two real broker processes ---------------------------------------------------------------

OUT_OF_ORDER_SEQUENCE_NUMBER = 45


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[int, BrokerProcess]]:
    """Brokers 1 and 2 (no ZooKeeper), logging at INFO: the test reads their producer-state
    load lines."""
    with ExitStack() as stack:
        procs = {}
        for i in (1, 2):
            conf = {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "broker.id": i,
                "auto.create.topics.enable": False,
                "replica.fetch.backoff.ms": 100,
            }
            procs[i] = stack.enter_context(BrokerProcess(conf, log_level="info"))
        yield procs


def loads(broker: BrokerProcess, topic: str) -> list[int]:
    """How many batches each load of ``topic``-0's producer state replayed (its log lines)."""
    assert broker.log_path is not None
    text = broker.log_path.read_text(errors="replace")
    pattern = rf"producer state of {re.escape(topic)}-0 loaded: replayed (\d+) batches"
    return [int(n) for n in re.findall(pattern, text)]


def idempotent(seq: int, n: int, pid: int = 4242) -> bytes:
    return data_batch(0, -1, n, pid=pid, seq=seq)


@pytest.mark.timeout(120)
def test_new_leader_continues_sequences_without_replaying_the_log(
    cluster: dict[int, BrokerProcess],
) -> None:
    controller = Controller(cluster)
    t = f"ps-{uuid.uuid4().hex[:8]}"
    controller.elect(t, 0, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert produce(cluster[1], t, idempotent(0, 3)) == (NONE, 0)
    assert produce(cluster[1], t, idempotent(3, 2)) == (NONE, 3)  # acks=all: broker 2 has it
    # broker 2 loaded the state as a follower before its first append: an empty log
    assert loads(cluster[2], t) == [0], loads(cluster[2], t)
    # restarted cleanly, it reads the snapshot it wrote at shutdown (a new log file)
    cluster[2].restart()
    controller.leader_and_isr(2, t, 0, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert produce(cluster[1], t, idempotent(5, 1)) == (NONE, 5)
    # failover to broker 2: the producer continues its sequence there
    controller.elect(t, 0, leader=2, leader_epoch=1, isr=[2, 1], replicas=[1, 2])
    assert produce(cluster[2], t, idempotent(6, 2)) == (NONE, 6)
    assert produce(cluster[2], t, idempotent(3, 2)) == (NONE, 3)  # a retry: its first offset
    assert produce(cluster[2], t, idempotent(20, 1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    # since its restart broker 2 loaded the state once, as a follower (its snapshot covers
    # its log), and never replayed a batch of the log
    assert loads(cluster[2], t) == [0], loads(cluster[2], t)


# -- the leader's lazy load, yielding to the event loop ---------------------------------------


def big_leader(batches: int) -> Partition:
    """A leader whose producer state is not loaded, with ``batches`` idempotent batches of
    20 records (3000: about 650 KB, three chunks of the replay) and an aborted transaction."""
    p = follower()
    for i in range(batches):
        p.log.append(data_batch(0, 0, 20, pid=7, seq=20 * i), 0)
    p.log.append(data_batch(0, 0, 1, pid=8, seq=0, transactional=True), 0)
    p.log.append(build_control_batch(8, 0, ControlRecordType.ABORT, 0, TS), 0)
    p.make_leader(PartitionState(0, 1, 1, [1, 2], [1, 2]), now_ms=0)
    return p


async def _load_with_ticker(p: Partition, during: Any = None) -> tuple[ProducerStateManager, int]:
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            if during is not None and ticks == 2:
                during()
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        ps = await p.load_producer_state(yield_every_s=0)  # yield after every chunk
    finally:
        stop.set()
        await task
    return ps, ticks


def test_the_lazy_load_yields_to_the_event_loop_and_equals_the_replay() -> None:
    p = big_leader(3000)
    ps, ticks = asyncio.run(_load_with_ticker(p))
    assert ticks > 1  # other tasks ran while the log was replayed
    assert p.loaded_producer_state() is ps
    end = p.log.log_end_offset
    assert state_of(ps, end) == state_of(ProducerStateManager.load(p.log, None), end)
    assert ps.check(7, 0, 60000, 60000) == (Verdict.OK, -1)
    assert [t.producer_id for t in ps.txn.aborted] == [8]


def test_a_lazy_load_overtaken_by_a_truncation_is_discarded() -> None:
    p = big_leader(3000)
    ps, _ = asyncio.run(_load_with_ticker(p, during=lambda: p.truncate_to(100)))
    assert p.log.log_end_offset == 100
    assert p.loaded_producer_state() is ps
    assert state_of(ps, 100) == state_of(ProducerStateManager.load(p.log, None), 100)
    assert ps.check(7, 0, 100, 100) == (Verdict.OK, -1)


def test_a_snapshot_of_a_diverged_log_is_ignored() -> None:
    """A snapshot written late (after the truncation that should have removed it: the periodic
    write runs in a thread) describes the old log: its leader epoch at its last offset differs
    from the rewritten log's, so the load replays the log instead."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "producer_state.snapshot"
        p = follower(path)
        p.append_as_follower(data_batch(0, 0, 2, pid=7, seq=0))
        p.append_as_follower(data_batch(2, 0, 2, pid=9, seq=0))  # diverges: another leader
        stale = p.producer_state().snapshot_payload(p.log, force=True)
        assert stale is not None
        p.truncate_to(2)
        write_snapshot(path, stale)  # lands after the truncation
        p.append_as_follower(data_batch(2, 1, 2, pid=7, seq=2))  # epoch 1's records
        assert snapshot_offset(path) == 4 == p.log.log_end_offset
        ps = ProducerStateManager.load(p.log, path)
        assert ps.producer_epoch(9) is None
        assert state_of(ps, 4) == state_of(ProducerStateManager.load(p.log, None), 4)
        # a snapshot of the same log is used
        good = p.producer_state().snapshot_payload(p.log, force=True)
        assert good is not None
        write_snapshot(path, good)
        loaded = ProducerStateManager.load(p.log, path)
        assert state_of(loaded, 4) == state_of(ps, 4)
