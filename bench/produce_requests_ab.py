"""A/B of odradek trees on the Produce path alone: broker CPU per Produce request (acks=1, one
topic, one partition, no authorizer, no quota), the same requests for every tree.

    .venv/bin/python bench/produce_requests_ab.py --tree old=/tmp/odradek-old/src \\
        --tree new=src [--records 170] [--requests 8000] [--rounds 7] [--window 4]

``bench/restructure_rate.py`` measures the whole broker under a real client, whose batching
follows the machine's load and whose CPU is read in 10 ms ticks over a few seconds. Here the
client is a raw socket sending Produce v9 requests encoded once beforehand
(``encode_produce_request``: one batch of ``--records`` records of 100 B, partitions 0, 1, 2 in
turn, ``--window`` requests in flight), so every tree gets byte-identical requests and the
broker CPU of a round (user + system from /proc, about 40 µs per request) is many ticks.

Setup: one ``odradek broker`` per ``--tree NAME=SRC`` (SRC put on its PYTHONPATH) with a
3-partition RF 1 topic, all up during the whole run; one unmeasured warm-up round each. Then
``--rounds`` rounds, the trees in turn (the order reversed every other round). Reported: per
tree the median (and every round) of broker CPU µs per request, its ratio to the first tree,
and the median of the round-by-round ratios (each tree against the first in the same round:
steadier when the machine's speed drifts during the run, as it does when the logs grow past
the page cache); the load average before and after. ``--data-root DIR`` puts the brokers'
data directories under DIR (a tmpfs such as /dev/shm keeps disk writeback out of the figures).
Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka.admin import AdminClient, NewTopic

from common import median, proc_stat
from odradek.protocol.produce_request_encoder import encode_produce_request
from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

TOPIC = "produce-ab"
PARTITIONS = 3
_SIZE = struct.Struct(">i")


def cpu(pid: int) -> float:
    user, system, _ = proc_stat(pid)
    return user + system


def requests(n: int, records: int) -> list[bytes]:
    """``n`` Produce v9 requests (acks=1), each one batch of ``records`` records of 100 B."""
    batch = build_batch([(None, b"x" * 100, (), 0) for _ in range(records)])
    return [
        b"".join(
            encode_produce_request(
                9, i, "produce-ab", 1, 30_000, {TOPIC: [(i % PARTITIONS, bytes(batch))]}
            )
        )
        for i in range(n)
    ]


def run(port: int, pid: int, reqs: list[bytes], window: int, max_seconds: float = 120.0) -> float:
    """Send ``reqs`` with ``window`` in flight, read every response: broker CPU µs per request."""
    n = len(reqs)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        deadline = time.monotonic() + max_seconds
        before = cpu(pid)
        sent = answered = 0
        buf = b""
        while answered < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{answered} of {n} answers in {max_seconds} s")
            while sent < n and sent - answered < window:
                sock.sendall(reqs[sent])
                sent += 1
            data = sock.recv(1 << 16)
            if not data:
                raise RuntimeError("the broker closed the connection")
            buf += data
            while len(buf) >= 4:
                size = _SIZE.unpack_from(buf)[0]
                if len(buf) < 4 + size:
                    break
                buf = buf[4 + size :]
                answered += 1
        after = cpu(pid)
    return (after - before) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tree", action="append", required=True, help="NAME=SRC (the first is the reference)"
    )
    ap.add_argument("--records", type=int, default=170, help="records per request")
    ap.add_argument("--requests", type=int, default=8000, help="requests per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--window", type=int, default=4, help="requests in flight")
    ap.add_argument("--data-root", type=Path, default=None, help="where the data dirs go")
    args = ap.parse_args(argv)
    trees = [t.split("=", 1) for t in args.tree]
    reqs = requests(args.requests, args.records)
    load0 = os.getloadavg()
    results: dict[str, list[float]] = {name: [] for name, _ in trees}
    with contextlib.ExitStack() as stack:
        brokers: dict[str, tuple[int, int]] = {}
        saved = os.environ.get("PYTHONPATH")
        for name, src in trees:
            os.environ["PYTHONPATH"] = str(Path(src).resolve())
            data_dir = None
            if args.data_root is not None:
                data_dir = Path(
                    stack.enter_context(tempfile.TemporaryDirectory(dir=args.data_root))
                )
            broker = stack.enter_context(
                BrokerProcess({"num.partitions": PARTITIONS}, data_dir=data_dir)
            )
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
            brokers[name] = (int(broker.bootstrap_servers.rsplit(":", 1)[1]), broker.pid or 0)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        for port, pid in brokers.values():
            run(port, pid, reqs[:500], args.window)  # warm-up: routes, imports, first segment
        names = list(brokers)
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                port, pid = brokers[name]
                results[name].append(run(port, pid, reqs, args.window))
            print(
                f"round {r + 1}: "
                + ", ".join(f"{k} {v[-1]:.1f}" for k, v in results.items())
                + " µs/request"
            )
            sys.stdout.flush()
    load1 = os.getloadavg()
    print(
        f"\n{args.rounds} rounds of {args.requests:,} Produce requests of {args.records} records"
        f" (acks=1, window {args.window}); load average before {load0[0]:.1f}, after"
        f" {load1[0]:.1f}"
    )
    print(
        "| tree | broker CPU µs per request, median | rounds | ratio | round-by-round ratio, median |"
    )
    print("|---|---|---|---|---|")
    first = results[names[0]]
    ref = median(first)
    for name in names:
        values = results[name]
        every = " ".join(f"{v:.0f}" for v in values)
        paired = median([v / f for v, f in zip(values, first, strict=True)])
        print(
            f"| {name} | {median(values):.1f} | {every} | {median(values) / ref:.3f} | {paired:.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] if len(sys.argv) > 1 else None))
