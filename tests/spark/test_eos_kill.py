"""Kill test of the exactly-once sink: the query's process (driver and local executors) and its
executors' Python workers are SIGKILLed at random points; the query restarts from its
checkpoint each time. The output topic, read with read_committed, must hold every input row
exactly once.

* default run: a short version (``ODRADEK_SPARK_KILL_BATCHES``, default 8 micro-batches, one
  driver kill and one executor kill);
* ``make spark-kill`` (or ``ODRADEK_SPARK_KILL_LONG=1``): the long version, marked slow —
  at least 200 micro-batches with a kill every few batches, alternating driver and executors.

Kills are timed from events, not sleeps: the test waits for the checkpoint's commit log to
record a new batch, then kills after a random delay of 0-1.5 s, which lands anywhere in the
next batch (planning, tasks writing, the driver's two-phase commit).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from odradek.testing.helpers import create_topic

from .conftest import BROKER_SETTINGS as _SPARK_SETTINGS
from .conftest import produce

BROKER_SETTINGS = {**_SPARK_SETTINGS, "transaction.state.log.num.partitions": 3}

pytestmark = [pytest.mark.spark]

QUERY = Path(__file__).with_name("eos_query.py")


def _committed_batches(ckpt: Path) -> int:
    """Batches committed so far: one past the largest batch id in Spark's commit log (files
    named by batch id). Not the number of files: Spark keeps only the last
    ``spark.sql.streaming.minBatchesToRetain`` (100) of them, so a count stops growing at
    about 100 while the query goes on (the long run then waited for a count it could not
    reach until the query had finished every batch and exited)."""
    d = ckpt / "commits"
    if not d.is_dir():
        return 0
    return max((int(p.name) + 1 for p in d.iterdir() if p.name.isdigit()), default=0)


def _python_workers(root: int) -> list[int]:
    """PIDs of the Spark Python workers under process ``root`` (the daemon's forked children)."""
    children: dict[int, list[int]] = {}
    cmd: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        for c in children.get(pid, []):
            stack.append(c)
            # forked workers share the daemon's command line; the daemon's parent is the JVM
            if "pyspark.daemon" in cmd.get(c, "") and "pyspark.daemon" in cmd.get(pid, ""):
                out.append(c)
    return out


class QueryProcess:
    def __init__(self, args: list[str], log: Path) -> None:
        self.log = open(log, "ab")  # noqa: SIM115 - closed in wait()/kill()
        self.proc = subprocess.Popen(
            [sys.executable, str(QUERY), *args], stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, "ODRADEK_SPARK_FAULTS": ""},
        )

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the driver, its JVM and every worker
        except ProcessLookupError:
            pass
        self.proc.wait(60)
        self.log.close()

    def running(self) -> bool:
        return self.proc.poll() is None


def _run_with_kills(bs: str, tmp: Path, batches: int, per_batch: int, kills: int, seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    src, dst = f"kill-src-{seed}", f"kill-dst-{seed}"
    create_topic(bs, src, 2)
    create_topic(bs, dst, 3)
    rows = batches * per_batch
    produce(bs, src, ((i % 2, b"%d" % i, b"row-%d" % i, None, None) for i in range(rows)))
    ckpt = tmp / "ckpt"
    args = [bs, src, dst, str(ckpt), str(per_batch)]
    log = tmp / "query.log"
    deadline = time.monotonic() + max(600, batches * 12)
    spacing = max(1, batches // (kills + 1))
    plan = ["driver" if i % 2 == 0 else "executor" for i in range(kills)]
    done = {"driver": 0, "executor": 0}
    q = QueryProcess(args, log)
    try:
        for what in plan:
            target = _committed_batches(ckpt) + rnd.randint(1, spacing)
            while _committed_batches(ckpt) < target:
                assert time.monotonic() < deadline, f"no progress: see {log}"
                assert q.running(), (
                    f"query process exited (rc {q.proc.returncode}) at batch "
                    f"{_committed_batches(ckpt)} before the kill planned at batch {target}: see {log}"
                )
                time.sleep(0.05)  # polling the commit log (another process's files)
            time.sleep(rnd.uniform(0, 1.5))  # the random point in the next batch
            if what == "driver":
                q.kill()
                q = QueryProcess(args, log)
            else:
                workers = _python_workers(q.proc.pid)
                if not workers:
                    continue
                try:
                    os.kill(rnd.choice(workers), signal.SIGKILL)
                except ProcessLookupError:
                    continue
            done[what] += 1
        rc = q.proc.wait(max(1.0, deadline - time.monotonic()))
        assert rc == 0, f"query exited with {rc}: see {log}"
    finally:
        if q.running():
            q.kill()
    # every input row exactly once, read with read_committed
    from odradek.client import Consumer, TopicPartition

    got: Counter[bytes] = Counter()
    with Consumer({"bootstrap.servers": bs, "isolation.level": "read_committed"}) as c:
        tps = [TopicPartition(dst, p) for p in range(3)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        ends = c.end_offsets(tps)
        for _ in range(2000):
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
            got.update(r.value for r in c.poll(0.5))
    missing = rows - len(got)
    dups = {v: n for v, n in got.items() if n > 1}
    assert missing == 0 and not dups, f"{missing} rows missing, {len(dups)} duplicated (e.g. {list(dups)[:5]})"
    assert set(got) == {b"row-%d" % i for i in range(rows)}
    return {"batches": _committed_batches(ckpt), "kills": done}


@pytest.mark.timeout(900)
def test_kill_driver_and_executor_short(broker: Any, tmp_path: Path) -> None:
    batches = int(os.environ.get("ODRADEK_SPARK_KILL_BATCHES", "8"))
    result = _run_with_kills(str(broker.bootstrap_servers), tmp_path, batches, 20, kills=2, seed=1)
    assert result["batches"] >= batches
    assert result["kills"]["driver"] == 1


@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.skipif(not os.environ.get("ODRADEK_SPARK_KILL_LONG"), reason="long kill test: make spark-kill")
def test_kill_driver_and_executors_over_200_batches(broker: Any, tmp_path: Path) -> None:
    result = _run_with_kills(str(broker.bootstrap_servers), tmp_path, 210, 10, kills=30, seed=2)
    assert result["batches"] >= 200
    assert result["kills"]["driver"] >= 10 and result["kills"]["executor"] >= 5
