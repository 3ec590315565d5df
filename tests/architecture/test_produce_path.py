"""A Produce request's call path enters each odradek module at most twice.

One broker runs in this process (``EmbeddedBroker``, file storage: the code ``odradek broker``
runs); a profile hook (``threading.setprofile``, set before the broker thread starts) watches
the broker thread. From the connection's ``_handle_frame`` of a Produce request (api key 0) to
the connection's ``_emit`` of its encoded response, every call into an odradek module from
another module is an *entry* into it (a call within one module is not); consecutive entries
into the same module count once (``A → B.f``, back, ``A → B.g`` enters B once). The
sequence of entries names each module at most twice: a path that keeps climbing back into a
module it has left is a sign that a layer's work is split over several places.

Both the first Produce request on a connection (the route is built and cached) and the next
one (the cached route) are checked, with acks=1 and acks=-1 (one broker: the high watermark
moves at the append, so the handler never suspends and the whole path runs in one call).
"""

from __future__ import annotations

import threading
from collections import Counter
from types import FrameType
from typing import Any

import pytest
from confluent_kafka import Producer

from odradek.testing import EmbeddedBroker

PRODUCE = 0
START = ("odradek.broker.connection", "_handle_frame")
END = ("odradek.broker.connection", "_emit")


class PathRecorder:
    """The module entries of the broker thread's calls, one list per Produce request."""

    def __init__(self) -> None:
        self.paths: list[list[tuple[str, str]]] = []
        self.closed: list[bool] = []
        self._thread: int | None = None

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("odradek."):
            return
        name = frame.f_code.co_name
        if self._thread is None:
            if (module, name) != START:
                return
            data = frame.f_locals["frame"]
            if int.from_bytes(data[0:2], "big") != PRODUCE:
                return
            self._thread = threading.get_ident()
            self.paths.append([(module, name)])
            self.closed.append(False)
            return
        if threading.get_ident() != self._thread:
            return
        caller = frame.f_back
        if caller is None or caller.f_globals.get("__name__", "") != module:
            self.paths[-1].append((module, name))
        if (module, name) == END:
            self.closed[-1] = True
            self._thread = None


def entries(path: list[tuple[str, str]]) -> list[str]:
    """The modules of ``path`` with consecutive repeats counted once."""
    out: list[str] = []
    for module, _name in path:
        if not out or out[-1] != module:
            out.append(module)
    return out


@pytest.mark.parametrize("acks", [1, -1])
def test_a_produce_request_enters_each_module_at_most_twice(acks: int) -> None:
    recorder = PathRecorder()
    threading.setprofile(recorder)  # the broker thread, started next, inherits it
    try:
        broker = EmbeddedBroker({"num.partitions": 1}, storage="file")
        broker.start()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    try:
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "acks": acks, "linger.ms": 0}
        )
        for i in range(2):  # one Produce request each: the first, then one on a cached route
            producer.produce("path", f"record-{i}".encode())
            assert producer.flush(30) == 0
    finally:
        broker.stop()
    assert len(recorder.paths) == 2, recorder.paths
    for path, closed in zip(recorder.paths, recorder.closed, strict=True):
        assert closed, f"the response was not emitted from the request's own call: {path}"
        modules = [module for module, _name in path]
        assert "odradek.broker.partition" in modules and "odradek.storage.log" in modules
        sequence = entries(path)
        over = {m: n for m, n in Counter(sequence).items() if n > 2}
        assert not over, f"entered more than twice: {over}; path: {' -> '.join(sequence)}"
