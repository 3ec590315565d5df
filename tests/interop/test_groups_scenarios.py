"""Consumer-group scenarios run with every client (confluent-kafka, kafka-python, aiokafka, kcat).

Each group member is a separate process (so it can be killed with SIGKILL): this file is also
the member program (``python test_groups_scenarios.py member '<json config>'``), which
consumes with the named client and prints one JSON line per event:
``{"event": "assigned"|"revoked", "partitions": [...]}``, ``{"event": "record", "p", "o", "v"}``,
``{"event": "committed", "p", "o"}`` (a synchronous commit of offset o for partition p),
``{"event": "closed"}``; confluent members with a cooperative ``strategy`` report incremental
``{"event": "added"|"removed", "partitions": [...]}`` instead of assigned/revoked, and every
confluent member reports client errors as ``{"event": "error", "name", "fatal"}``. Closing its stdin stops it gracefully (commit, close, leave the
group). kcat members are the ``kcat -G`` process itself; their assignment comes from kcat's
"rebalanced" lines on stderr, and they commit with librdkafka's auto commit.

``GroupScenarios`` holds the tests; ``test_groups_<client>.py`` subclasses it per client (each
module gets its own broker process, from the ``broker`` fixture in tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

# -------------------------------------------------------------------------------------------
# The member program (runs in a subprocess; imports only the client it uses)


def _emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def _member_confluent(cfg: dict[str, Any], stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaError

    conf: dict[str, Any] = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "client.id": cfg["client_id"],
        "auto.offset.reset": cfg["offset_reset"],
        "enable.auto.commit": False,
        "session.timeout.ms": cfg["session_ms"],
        "heartbeat.interval.ms": cfg["heartbeat_ms"],
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if cfg.get("instance_id"):
        conf["group.instance.id"] = cfg["instance_id"]
    if cfg.get("strategy"):
        conf["partition.assignment.strategy"] = cfg["strategy"]
    added, removed = "assigned", "revoked"
    if cfg.get("strategy") == "cooperative-sticky":  # the callbacks get increments
        added, removed = "added", "removed"
    c = Consumer(conf)
    c.subscribe(
        [cfg["topic"]],
        on_assign=lambda _c, ps: _emit(event=added, partitions=[p.partition for p in ps]),
        on_revoke=lambda _c, ps: _emit(event=removed, partitions=[p.partition for p in ps]),
        on_lost=lambda _c, ps: _emit(event=removed, partitions=[p.partition for p in ps]),
    )
    n = 0
    every = cfg["commit_every"]
    while not stop.is_set():
        m = c.poll(0.1)
        if m is None:
            continue
        if m.error():
            err = m.error()
            # a fatal error reaches poll() as code _FATAL (its fatal() flag is not set there)
            fatal = err.fatal() or err.code() == KafkaError._FATAL
            _emit(event="error", name=err.name(), fatal=fatal, text=err.str())
            if fatal:
                break
            continue
        _emit(event="record", p=m.partition(), o=m.offset(), v=(m.value() or b"").decode())
        n += 1
        if every and n % every == 0:
            c.commit(message=m, asynchronous=False)
            _emit(event="committed", p=m.partition(), o=m.offset() + 1)
    c.close()
    _emit(event="closed")


def _member_kafka_python(cfg: dict[str, Any], stop: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.structs import OffsetAndMetadata

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            _emit(event="revoked", partitions=[tp.partition for tp in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            _emit(event="assigned", partitions=[tp.partition for tp in assigned])

    c = KafkaConsumer(
        bootstrap_servers=cfg["bootstrap"],
        group_id=cfg["group"],
        client_id=cfg["client_id"],
        auto_offset_reset=cfg["offset_reset"],
        enable_auto_commit=False,
        session_timeout_ms=cfg["session_ms"],
        heartbeat_interval_ms=cfg["heartbeat_ms"],
        fetch_max_wait_ms=100,
        metadata_max_age_ms=1000,
    )
    c.subscribe([cfg["topic"]], listener=Listener())
    n = 0
    every = cfg["commit_every"]
    while not stop.is_set():
        _unstick_kafka_python(c)
        batch = c.poll(timeout_ms=100)
        _unstick_kafka_python(c)
        for tp, msgs in batch.items():
            for m in msgs:
                _emit(event="record", p=tp.partition, o=m.offset, v=(m.value or b"").decode())
                n += 1
                if every and n % every == 0:
                    c.commit({tp: OffsetAndMetadata(m.offset + 1, "", -1)})
                    _emit(event="committed", p=tp.partition, o=m.offset + 1)
    c.close()
    _emit(event="closed")


def _unstick_kafka_python(c: Any) -> None:
    """Work around a kafka-python 3.0 bug (client side; checked against 3.0.12).

    The exact sequence (a group leader; ``kafka/coordinator/base.py`` and ``consumer.py``):

    1. The leader's metadata changes after it assigned (the topic's partitions arrive after
       the first join, or partitions are added): ``ConsumerCoordinator.need_rejoin()`` is True
       because ``_assignment_snapshot != _metadata_snapshot``, while the base flag
       ``rejoin_needed`` is already False (cleared when the previous join completed).
    2. ``poll()`` -> ``ConsumerCoordinator.poll`` -> ``ensure_active_group`` ->
       ``join_group_async`` starts ``_do_join_and_sync_async`` as ``_join_task`` and waits
       for it only as long as poll's timer; when the timer ends it returns False and leaves
       the task in flight (comment: "leave self._join_task in flight so the next poll
       re-awaits it").
    3. The JoinGroup answer arrives; the task, as leader, runs ``_perform_assignment``,
       which sets ``_assignment_snapshot = _metadata_snapshot``; it sends SyncGroup and gets
       its assignment. The task is done.
    4. Next ``poll()``: ``need_rejoin()`` is now False (snapshots equal, ``rejoin_needed``
       False), so ``ConsumerCoordinator.poll`` (``if self.need_rejoin():``) never calls
       ``ensure_active_group``, and ``join_group_async`` (``while self.need_rejoin():``)
       would not look at the task either: its result is never read,
       ``_on_join_complete_async`` never runs, ``state`` stays REBALANCING, heartbeats stay
       disabled, no partitions are assigned, for good. The coordinator's answers are right
       (DescribeGroups: Stable, the member holds its partitions until its session expires).

    Java's ``AbstractCoordinator`` loops on ``rejoinNeededOrPending()`` = ``rejoinNeeded ||
    joinFuture != null`` ("if there's a pending joinFuture, we should try to complete
    handling it"); kafka-python 3.0 dropped the "or pending". Any broker that does not
    answer a rejoin within the rest of poll's timeout triggers it: a rejoin parked for other
    members (every multi-member rebalance) or a loaded machine. With
    group.initial.rebalance.delay.ms=0 the first join completes before kafka-python has the
    subscribed topic's metadata, so step 1 follows at once (Kafka's default delay of 3 s
    hides it). Reproduced on purpose in test_groups_kafka_python.py.

    Workaround: finish the pending join as Java does - when a finished join task has not been
    consumed, apply its result exactly as ``join_group_async`` would have (member STABLE,
    heartbeat on, ``_on_join_complete_async`` with the SyncGroup assignment). A failed task
    is dropped and a rejoin requested (``join_group_async`` retries those too).

    An earlier version asked for a rejoin instead of applying the result. That livelocks:
    the leader's new JoinGroup from Stable starts another rebalance, which is parked until the
    follower rejoins - during the *follower's* poll - so the leader's join again finishes while
    the leader is not polling, and is again thrown away (a failing run went through 70+
    generations in 20 s while A kept its old assignment: ``AssertionError: ([0], [2, 3])``).

    kafka-python throws a finished join away by itself in the same way when the base flag
    ``rejoin_needed`` is still True: the flag is cleared only by ``join_group_async`` after it
    read the task's result, so when a heartbeat's REBALANCE_IN_PROGRESS set it and the join
    that answers that very rebalance finished between polls, the next ``poll()`` finds
    ``need_rejoin()`` True and ``_join_task.is_done``, and ``join_group_async`` starts a new
    ``_do_join_and_sync_async`` without reading the old one. A leader's JoinGroup in Stable
    starts a rebalance (Kafka's GroupCoordinator does the same), parked until the other
    member rejoins during its own poll, and the circle closes: the set-up of
    test_groups_kafka_python.py, A and B polled in turn for 50 ms each on a loaded machine,
    went through 74 generations in 20 s with the broker in PreparingRebalance every time it
    was asked. Java's SyncGroup handler clears ``rejoinNeeded`` when the join succeeds, so
    the workaround applies a succeeded join whatever ``rejoin_needed`` says; if the
    consumer's own reasons still ask for a rejoin (its metadata or subscription changed
    since), ``need_rejoin()`` stays True and the next ``poll()`` rejoins, as Java's loop
    does after ``onJoinComplete``. A caller polling several consumers in turn must call it
    right before each ``poll()`` too: a join that finished during another consumer's poll is
    otherwise thrown away by this consumer's next ``poll()`` before anything sees it.
    """
    from kafka.coordinator.base import MemberState

    coordinator: Any = getattr(c, "_coordinator", None)
    task = getattr(coordinator, "_join_task", None)
    if task is None or not task.is_done:
        return
    if not task.succeeded():
        if not coordinator.need_rejoin():
            coordinator._join_task = None
            coordinator.request_rejoin()
        return
    coordinator._join_task = None
    with coordinator._lock:
        coordinator.rejoining = False
        coordinator.rejoin_needed = False
        coordinator.state = MemberState.STABLE
        coordinator._enable_heartbeat()
    generation = coordinator._generation
    coordinator._net.run(
        coordinator._on_join_complete_async,
        generation.generation_id,
        generation.member_id,
        generation.protocol,
        task.value,
    )


def _member_aiokafka(cfg: dict[str, Any], stop: threading.Event) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            _emit(event="revoked", partitions=[tp.partition for tp in revoked])

        async def on_partitions_assigned(self, assigned: Any) -> None:
            _emit(event="assigned", partitions=[tp.partition for tp in assigned])

    async def main() -> None:
        c = AIOKafkaConsumer(
            bootstrap_servers=cfg["bootstrap"],
            group_id=cfg["group"],
            client_id=cfg["client_id"],
            auto_offset_reset=cfg["offset_reset"],
            enable_auto_commit=False,
            session_timeout_ms=cfg["session_ms"],
            heartbeat_interval_ms=cfg["heartbeat_ms"],
            fetch_max_wait_ms=100,
            metadata_max_age_ms=1000,
        )
        c.subscribe([cfg["topic"]], listener=Listener())
        await c.start()
        n = 0
        every = cfg["commit_every"]
        try:
            while not stop.is_set():
                batch = await c.getmany(timeout_ms=100)
                for tp, msgs in batch.items():
                    for m in msgs:
                        _emit(
                            event="record", p=tp.partition, o=m.offset, v=(m.value or b"").decode()
                        )
                        n += 1
                        if every and n % every == 0:
                            await c.commit({tp: m.offset + 1})
                            _emit(event="committed", p=tp.partition, o=m.offset + 1)
        finally:
            await c.stop()
        _emit(event="closed")

    asyncio.run(main())


_MEMBERS: dict[str, Callable[[dict[str, Any], threading.Event], None]] = {
    "confluent": _member_confluent,
    "kafka-python": _member_kafka_python,
    "aiokafka": _member_aiokafka,
}


def _member_main(config_json: str) -> None:
    cfg = json.loads(config_json)
    if os.environ.get("GROUPS_MEMBER_DEBUG"):  # the client's own logs on stderr (see _diagnose)
        import logging

        logging.basicConfig(
            level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
        )
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()  # EOF: the test closed it, or the test process is gone
        stop.set()
        # never outlive the test run: a graceful close that waits on a dead broker gets 60 s
        time.sleep(60)
        os._exit(3)

    threading.Thread(target=watch_stdin, daemon=True).start()
    _MEMBERS[cfg["client"]](cfg, stop)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "member":
        _member_main(sys.argv[2])
        sys.exit(0)


# -------------------------------------------------------------------------------------------
# The test side

import pytest  # noqa: E402

from odradek.testing.helpers import create_topic  # noqa: E402
from odradek.testing.process import set_parent_death_signal  # noqa: E402

from .support import unique_topic, wait_for  # noqa: E402

CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat")
SESSION_MS = 2000
HEARTBEAT_MS = 300
_ASSIGNED = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)$")


class Member:
    """One group member in its own process; events are collected by reader threads."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        commit_every: int = 1,
        offset_reset: str = "earliest",
        session_ms: int = SESSION_MS,
        instance_id: str | None = None,
        strategy: str | None = None,
    ) -> None:
        self.client = client
        self.group = group
        self.topic = topic
        self.client_id = f"{client}-{uuid.uuid4().hex[:6]}"
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        if client == "kcat":
            cmd = [
                _kcat(),
                "-b", bootstrap,
                "-G", group,
                "-u",
                "-f", "%p %o %s\\n",
                "-X", f"client.id={self.client_id}",
                "-X", f"auto.offset.reset={offset_reset}",
                "-X", f"session.timeout.ms={session_ms}",
                "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}",
                "-X", "auto.commit.interval.ms=100",
                "-X", "fetch.wait.max.ms=100",
                topic,
            ]  # fmt: skip
        else:
            cfg = {
                "client": client,
                "bootstrap": bootstrap,
                "group": group,
                "topic": topic,
                "client_id": self.client_id,
                "commit_every": commit_every,
                "offset_reset": offset_reset,
                "session_ms": session_ms,
                "heartbeat_ms": HEARTBEAT_MS,
                "instance_id": instance_id,
                "strategy": strategy,
            }
            cmd = [sys.executable, os.path.abspath(__file__), "member", json.dumps(cfg)]
        self.proc = subprocess.Popen(
            cmd,
            # python members stop when stdin reaches EOF; kcat cannot, it gets SIGTERM
            preexec_fn=set_parent_death_signal if client == "kcat" else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._threads = [
            threading.Thread(
                target=self._read, args=(self.proc.stdout, self._on_stdout), daemon=True
            ),
            threading.Thread(
                target=self._read, args=(self.proc.stderr, self._on_stderr), daemon=True
            ),
        ]
        for t in self._threads:
            t.start()

    # -- event intake ---------------------------------------------------------------------------

    @staticmethod
    def _read(stream: Any, handler: Callable[[str], None]) -> None:
        for line in stream:
            handler(line.rstrip("\n"))

    def _add(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)

    def _on_stdout(self, line: str) -> None:
        if not line:
            return
        if self.client == "kcat":
            p, o, v = line.split(" ", 2)
            self._add({"event": "record", "p": int(p), "o": int(o), "v": v})
        else:
            try:
                self._add(json.loads(line))
            except json.JSONDecodeError:
                self._stderr.write(line + "\n")

    def _on_stderr(self, line: str) -> None:
        self._stderr.write(line + "\n")
        m = _ASSIGNED.search(line)
        if m and self.client == "kcat":
            parts = [int(x) for x in re.findall(r"\[(\d+)\]", m.group(2))]
            self._add({"event": m.group(1), "partitions": parts})

    # -- views ----------------------------------------------------------------------------------

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    @property
    def assignment(self) -> set[int]:
        current: set[int] = set()
        for e in self.snapshot():
            if e["event"] == "assigned":
                current = set(e["partitions"])
            elif e["event"] == "added":
                current |= set(e["partitions"])
            elif e["event"] in ("revoked", "removed"):
                current -= set(e["partitions"])
        return current

    @property
    def records(self) -> list[tuple[int, int, str]]:
        return [(e["p"], e["o"], e["v"]) for e in self.snapshot() if e["event"] == "record"]

    def rebalances(self) -> int:
        return sum(
            1 for e in self.snapshot() if e["event"] in ("assigned", "revoked", "added", "removed")
        )

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["event"] == "error"]

    def stderr(self) -> str:
        self._stderr.seek(0)
        text = self._stderr.read()
        self._stderr.seek(0, 2)
        if os.environ.get("GROUPS_MEMBER_DEBUG"):  # the group protocol lines of the client's log
            with open(
                os.path.join(tempfile.gettempdir(), f"groups-member-{self.client_id}.log"), "w"
            ) as f:
                f.write(text)
            keep = re.compile(
                r"JoinGroup|SyncGroup|LeaveGroup|Heartbeat failed|rror_code=[1-9]|Exception"
                r"|newly assigned|Revoking|rejoin: True|Traceback"
            )
            text = "\n".join(line[:300] for line in text.splitlines() if keep.search(line))
        return text[-6000:]

    # -- lifecycle ------------------------------------------------------------------------------

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful: the member commits, closes and leaves the group."""
        if self.proc.poll() is None:
            if self.client == "kcat":
                self.proc.send_signal(signal.SIGTERM)
            else:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(
                    f"{self.client} member did not stop: {self.stderr()}"
                ) from None
        self._join()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._join()

    def _join(self) -> None:
        for t in self._threads:
            t.join(5)
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()


def _kcat() -> str:
    from .support import kcat_binary

    path = kcat_binary()
    if path is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    return path


# -- cluster helpers (confluent-kafka's AdminClient and Producer) ------------------------------


def new_topic(bootstrap: str, partitions: int, prefix: str = "groups") -> str:
    """A topic of a fresh name (``prefix``-...) with ``partitions`` partitions, every one led."""
    topic = unique_topic(prefix)
    create_topic(bootstrap, topic, partitions, timeout=15)
    return topic


def produce(
    bootstrap: str, topic: str, partitions: int, count: int, start: int = 0
) -> set[tuple[int, str]]:
    """``count`` records r<start>… round-robin over partitions; returns {(partition, value)}."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    out = set()
    for i in range(start, start + count):
        value = f"r{i}"
        p.produce(topic, value=value.encode(), partition=i % partitions)
        out.add((i % partitions, value))
    assert p.flush(15) == 0
    return out


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (partition -> offset; absent = none), from the broker."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def settled(members: list[Member], partitions: int) -> bool:
    """Every partition owned by exactly one member, and every member owns at least one."""
    owned = [m.assignment for m in members]
    if any(not a for a in owned):
        return False
    flat = [p for a in owned for p in a]
    return sorted(flat) == list(range(partitions))


def _stop_all(members: list[Member]) -> None:
    errors = []
    for m in members:
        try:
            m.stop()
        except AssertionError as exc:
            errors.append(str(exc))
    assert not errors, errors


def _diagnose(members: list[Member], kafka: Any = None) -> str:
    broker_log = ""
    handle = getattr(kafka, "handle", None)
    if handle is not None and hasattr(handle, "stderr_tail"):
        broker_log = f"\n--- broker stderr:\n{handle.stderr_tail(3000)}"
    return broker_log + "\n".join(
        f"--- {m.client_id}: assignment={sorted(m.assignment)} records={len(m.records)} events={m.snapshot()[-6:]}\n{m.stderr()}"
        for m in members
    )


# -------------------------------------------------------------------------------------------
# The scenarios


class GroupScenarios:
    """Consumer-group behaviour every client must see. Subclasses set ``client``."""

    client: str = ""
    commits_synchronously = True  # False for kcat (auto commit)

    def member(self, kafka: Any, group: str, topic: str, **kw: Any) -> Member:
        return Member(self.client, kafka.bootstrap_servers, group, topic, **kw)

    @pytest.mark.timeout(90)
    def test_three_members_split_partitions_and_consume_each_record_once(self, kafka: Any) -> None:
        bs = kafka.bootstrap_servers
        topic = new_topic(bs, 6)
        group = unique_topic("g3")
        members = [self.member(kafka, group, topic) for _ in range(3)]
        try:
            wait_for(lambda: settled(members, 6), 45, "three members owning all six partitions")
            expected = produce(bs, topic, 6, 600)
            wait_for(
                lambda: sum(len(m.records) for m in members) >= 600, 45, "600 records consumed"
            )
            # a negative check: no event marks "no duplicate will come", so members get 0.3 s
            # more (a few fetch rounds) to show one; the count above was awaited
            time.sleep(0.3)
            owned = [m.assignment for m in members]
        except TimeoutError:
            raise AssertionError(_diagnose(members, kafka)) from None
        finally:
            _stop_all(members)
        seen = Counter((p, o) for m in members for p, o, _ in m.records)
        assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1][:10]
        assert {(p, v) for m in members for p, _, v in m.records} == expected
        for m, parts in zip(members, owned, strict=True):
            # every record came from a partition the member owned
            assert {p for p, _, _ in m.records} <= parts
        assert sorted(len(parts) for parts in owned) == [2, 2, 2]

    @pytest.mark.timeout(100)
    def test_killed_member_partitions_move_and_uncommitted_records_are_redelivered(
        self, kafka: Any
    ) -> None:
        bs = kafka.bootstrap_servers
        topic = new_topic(bs, 6)
        group = unique_topic("gkill")
        members = [self.member(kafka, group, topic, commit_every=7) for _ in range(3)]
        victim, survivors = members[0], members[1:]
        try:
            wait_for(lambda: settled(members, 6), 45, "three members owning all six partitions")
            expected = produce(bs, topic, 6, 300)  # 50 per partition
            wait_for(
                lambda: sum(len(m.records) for m in members) >= 300, 45, "300 records consumed"
            )
            victim_parts = victim.assignment
            victim.kill()
            killed_at = time.monotonic()
            committed = committed_offsets(bs, group, topic, 6)
            wait_for(
                lambda: set().union(*(m.assignment for m in survivors)) == set(range(6)),
                45,
                "the survivors to take over the killed member's partitions",
            )
            moved_after = time.monotonic() - killed_at
            wait_for(
                lambda: all(
                    any(p == vp and o == 49 for m in survivors for p, o, _ in m.records)
                    for vp in victim_parts
                ),
                30,
                "the survivors to read the killed member's partitions to the end",
            )
        except TimeoutError:
            raise AssertionError(_diagnose(members, kafka)) from None
        finally:
            _stop_all(survivors)
        # the group noticed only when the session timed out (no LeaveGroup from a killed process)
        assert moved_after >= SESSION_MS / 1000 * 0.5, moved_after
        # none skipped: every record was consumed by someone
        assert {(p, v) for m in members for p, _, v in m.records} == expected
        redelivered = 0
        for vp in victim_parts:
            after = sorted(o for m in survivors for p, o, _ in m.records if p == vp)
            start = committed.get(vp, 0)
            # the survivors resumed exactly at the killed member's last commit
            assert after and after[0] == start and after[-1] == 49, (vp, start, after[:3])
            assert after == list(range(start, 50)) or set(range(start, 50)) <= set(after)
            victim_seen = {o for p, o, _ in victim.records if p == vp}
            redelivered += len(victim_seen & set(after))
        if self.commits_synchronously:
            # commit_every=7 over 100 records leaves the last ones uncommitted: read again
            assert redelivered > 0

    @pytest.mark.timeout(100)
    def test_committed_offsets_survive_a_broker_restart(self, kafka: Any) -> None:
        bs = kafka.bootstrap_servers
        topic = new_topic(bs, 3)
        group = unique_topic("grestart")
        first_batch = produce(bs, topic, 3, 90)
        m = self.member(kafka, group, topic)
        try:
            wait_for(lambda: len(m.records) >= 90, 45, "90 records consumed")
        except TimeoutError:
            raise AssertionError(_diagnose([m], kafka)) from None
        finally:
            m.stop()
        assert {(p, v) for p, _, v in m.records} == first_batch
        wait_for(
            lambda: committed_offsets(bs, group, topic, 3) == {0: 30, 1: 30, 2: 30},
            10,
            "offsets 30/30/30 committed",
        )
        kafka.restart()
        bs = kafka.bootstrap_servers
        assert committed_offsets(bs, group, topic, 3) == {0: 30, 1: 30, 2: 30}
        second_batch = produce(bs, topic, 3, 30, start=90)
        m2 = self.member(kafka, group, topic)
        try:
            wait_for(lambda: len(m2.records) >= 30, 45, "the 30 new records consumed")
            time.sleep(0.3)  # a duplicate would show up now (no event marks its absence)
        except TimeoutError:
            raise AssertionError(_diagnose([m2], kafka)) from None
        finally:
            m2.stop()
        # resumed at the committed offsets: only the new records, each once
        assert sorted((p, v) for p, _, v in m2.records) == sorted(second_batch)
        assert min(o for _, o, _ in m2.records) == 30

    @pytest.mark.timeout(90)
    def test_two_groups_each_see_every_record(self, kafka: Any) -> None:
        bs = kafka.bootstrap_servers
        topic = new_topic(bs, 4)
        expected = produce(bs, topic, 4, 200)
        a = self.member(kafka, unique_topic("ga"), topic)
        b = self.member(kafka, unique_topic("gb"), topic)
        try:
            wait_for(
                lambda: len(a.records) >= 200 and len(b.records) >= 200, 45, "both groups read 200"
            )
            time.sleep(0.3)  # a duplicate would show up now (no event marks its absence)
        except TimeoutError:
            raise AssertionError(_diagnose([a, b], kafka)) from None
        finally:
            _stop_all([a, b])
        for m in (a, b):
            assert len(m.records) == 200
            assert {(p, v) for p, _, v in m.records} == expected

    @pytest.mark.timeout(90)
    def test_auto_offset_reset_earliest_and_latest(self, kafka: Any) -> None:
        bs = kafka.bootstrap_servers
        topic = new_topic(bs, 2)
        old = produce(bs, topic, 2, 20)
        early = self.member(kafka, unique_topic("gearliest"), topic, offset_reset="earliest")
        late = self.member(kafka, unique_topic("glatest"), topic, offset_reset="latest")
        try:
            wait_for(lambda: len(early.records) >= 20, 45, "earliest: the 20 old records")
            wait_for(lambda: late.assignment == {0, 1}, 45, "latest: both partitions assigned")
            # the 'latest' position is fixed some time after the assignment: produce markers
            # until one arrives, then the real records
            n = 20

            def marker_arrived() -> bool:
                nonlocal n
                produce(bs, topic, 2, 2, start=n)
                n += 2
                return bool(late.records)

            wait_for(marker_arrived, 30, "a record produced after 'latest' was fixed", interval=0.3)
            new = produce(bs, topic, 2, 10, start=1000)
            wait_for(
                lambda: {(p, v) for p, _, v in late.records} >= new, 30, "latest: the new records"
            )
        except TimeoutError:
            raise AssertionError(_diagnose([early, late], kafka)) from None
        finally:
            _stop_all([early, late])
        assert {(p, v) for p, _, v in early.records} >= old
        # nothing produced before the latest consumer started
        assert not ({(p, v) for p, _, v in late.records} & old)
        assert min(o for _, o, _ in late.records) >= 10

    @pytest.mark.timeout(90)
    def test_reset_offsets_then_consume(self, kafka: Any) -> None:
        from typer.testing import CliRunner

        from odradek.cli.groups import app

        runner = CliRunner()
        bs = kafka.bootstrap_servers
        topic = new_topic(bs, 2)
        group = unique_topic("greset")
        produce(bs, topic, 2, 40)
        m = self.member(kafka, group, topic)
        try:
            wait_for(lambda: len(m.records) >= 40, 45, "40 records consumed")
            wait_for(
                lambda: committed_offsets(bs, group, topic, 2) == {0: 20, 1: 20},
                10,
                "all committed",
            )
            # refused while the group has a member
            busy = runner.invoke(
                app,
                [
                    "reset-offsets",
                    group,
                    "--topic",
                    topic,
                    "--to-earliest",
                    "--execute",
                    "--bootstrap-server",
                    bs,
                ],
            )
            assert busy.exit_code == 1 and "stop its consumers" in busy.output
        except TimeoutError:
            raise AssertionError(_diagnose([m], kafka)) from None
        finally:
            m.stop()
        described = runner.invoke(app, ["describe", group, "--bootstrap-server", bs])
        assert described.exit_code == 0, described.output
        assert "state Empty" in described.output and "LAG" in described.output
        dry = runner.invoke(
            app,
            [
                "reset-offsets",
                group,
                "--topic",
                topic,
                "--to-offset",
                "15",
                "--bootstrap-server",
                bs,
            ],
        )
        assert dry.exit_code == 0 and "dry run" in dry.output
        assert committed_offsets(bs, group, topic, 2) == {0: 20, 1: 20}
        done = runner.invoke(
            app,
            [
                "reset-offsets",
                group,
                "--topic",
                topic,
                "--to-offset",
                "15",
                "--execute",
                "--bootstrap-server",
                bs,
            ],
        )
        assert done.exit_code == 0, done.output
        assert committed_offsets(bs, group, topic, 2) == {0: 15, 1: 15}
        m2 = self.member(kafka, group, topic)
        try:
            wait_for(lambda: len(m2.records) >= 10, 45, "the 10 records after the reset")
            time.sleep(0.3)  # a duplicate would show up now (no event marks its absence)
        except TimeoutError:
            raise AssertionError(_diagnose([m2], kafka)) from None
        finally:
            m2.stop()
        assert sorted((p, o) for p, o, _ in m2.records) == [
            (p, o) for p in (0, 1) for o in range(15, 20)
        ]
        shifted = runner.invoke(
            app,
            [
                "reset-offsets",
                group,
                "--topic",
                f"{topic}:1",
                "--shift-by",
                "-5",
                "--execute",
                "--bootstrap-server",
                bs,
            ],
        )
        assert shifted.exit_code == 0, shifted.output
        assert committed_offsets(bs, group, topic, 2) == {0: 20, 1: 15}
        deleted = runner.invoke(app, ["delete", group, "--bootstrap-server", bs])
        assert deleted.exit_code == 0, deleted.output
        assert committed_offsets(bs, group, topic, 2) == {}
