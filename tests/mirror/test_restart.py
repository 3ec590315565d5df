"""A flow that fails after it found its topics (its target went away) and starts again in the
same process copies those topics again."""

from __future__ import annotations

from collections.abc import Callable

from odradek.client import Producer
from odradek.testing.process import BrokerProcess

from .conftest import SETTINGS, MirrorProcess, base_properties, end_offsets, wait_until


def test_flow_started_again_copies_its_topics(mirrors: Callable[..., MirrorProcess]) -> None:
    a, b = BrokerProcess(SETTINGS), BrokerProcess(SETTINGS)
    a.start()
    try:
        b.start()
        try:
            with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
                for i in range(50):
                    p.send("orders", b"v%d" % i, partition=0)
                p.flush(10)
            m = mirrors(base_properties(a, b, **{"A->B.topics": "orders", "emit.checkpoints.enabled": "false"})).start()
            wait_until(lambda: end_offsets(b.bootstrap_servers, "A.orders").get(0, 0) >= 50, 60, "first copy", m.log)
            b.kill()
            wait_until(lambda: "retrying in" in m.log(), 60, "the flow failing", m.log)
            b.restart(same_port=True)
            with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
                for i in range(50, 100):
                    p.send("orders", b"v%d" % i, partition=0)
                p.flush(10)
            wait_until(lambda: end_offsets(b.bootstrap_servers, "A.orders").get(0, 0) >= 100, 60, "the copy after the restart", m.log)
            assert m.terminate() == 0
        finally:
            b.close()
    finally:
        a.close()
