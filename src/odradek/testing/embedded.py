"""An odradek broker inside the test process: ``EmbeddedBroker``.

It runs the real broker (``odradek.broker.server.Broker``, the same class ``odradek broker``
runs, not a fake) on its own asyncio event loop in a background thread, listening on an
ephemeral 127.0.0.1 port::

    with EmbeddedBroker({"num.partitions": 3}) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

Lifecycle (``start()``/``stop()`` are idempotent; a stopped broker can be started again, it
then starts empty on a new port unless ``data_dir`` was given with ``storage="file"``;
``restart()`` stops and starts on the same port, keeping file data):

* ``start()`` parses the settings in the calling thread (a bad key raises ``ConfigError`` there),
  starts a non-daemon thread that creates a fresh event loop, awaits ``Broker.start()`` and
  reports the bound port back; ``start()`` returns once the broker accepts connections.
* ``stop()`` asks the loop to await ``Broker.stop()`` (which closes the listening socket and
  every client connection, so group members are dropped at once instead of waiting out their
  session timeouts), then cancels whatever tasks are left, shuts down async generators and the
  loop's default executor, closes the loop, joins the thread and removes the temporary data
  directory. Nothing is left: no thread, no socket, no file descriptor. When ``stop()`` (or
  ``astop()``) returns, every connection the broker accepted is closed (its client reads EOF);
  a broker thread that does not finish within about twice ``stop_timeout`` makes ``stop()``
  raise ``RuntimeError`` with that thread's stack (it may still hold sockets) instead of
  returning as if all was well.

Storage: ``storage="memory"`` (the default) selects ``storage.engine=memory``: partitions and
metadata live in Python objects, no directory is created and nothing is fsynced, which makes
start, stop and every produce cheaper; the broker code above the storage contract is the same.
``storage="file"`` uses Kafka's on-disk format in a temporary directory (removed on stop) or
in ``data_dir`` (kept).

Settings are Kafka's broker keys; values may be any type and are turned into strings (booleans
into ``true``/``false``, lists into comma-separated strings). ``TEST_DEFAULTS`` are applied
first and any of them can be overridden.

From inside a running event loop (aiokafka tests) use ``await broker.astart()`` /
``await broker.astop()`` or ``async with EmbeddedBroker(...)``: the broker still runs on its
own thread (so blocking client calls in the test cannot deadlock it) and the caller's loop is
never blocked while it starts or stops. ``EmbeddedBroker(..., thread=False)`` instead runs the
broker as tasks of the caller's loop (no thread; only ``astart``/``astop`` then).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import traceback
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig
    from odradek.broker.server import Broker
    from odradek.clock import Clock

__all__ = ["TEST_DEFAULTS", "EmbeddedBroker", "sockets_on_port", "to_properties"]

log = logging.getLogger(__name__)

T = TypeVar("T")

StorageEngine = Literal["memory", "file"]

TEST_DEFAULTS: dict[str, str] = {
    # An ephemeral port on loopback only; read the real one from bootstrap_servers.
    "listeners": "PLAINTEXT://127.0.0.1:0",
    # The first consumer of a group joins at once instead of after 3 s.
    "group.initial.rebalance.delay.ms": "0",
    # One __consumer_offsets partition instead of 50: created on the first group use, so fewer
    # partitions make the first FindCoordinator cheaper. Every group still works.
    "offsets.topic.num.partitions": "1",
    # Let tests use short session timeouts (Kafka refuses anything below 6 s by default).
    "group.min.session.timeout.ms": "100",
    # No console / HTTP listener unless asked ("http.listeners": "http://127.0.0.1:0").
    "http.listeners": "",
}
"""Settings every EmbeddedBroker starts from (before the caller's settings)."""

_STATE_NEW, _STATE_RUNNING, _STATE_STOPPED = "new", "running", "stopped"
_JOIN_AFTER_FINISHED = 5.0
"""Seconds to join the broker thread once it set ``finished`` (its last action: immediate)."""
_ids = itertools.count(1)
_live: weakref.WeakSet[EmbeddedBroker] = weakref.WeakSet()
_atexit_registered = False
_atexit_lock = threading.Lock()


def to_properties(settings: Mapping[str, object] | None) -> dict[str, str]:
    """Broker settings as ``.properties`` strings: ``True`` → ``"true"``, ``[a, b]`` → ``"a,b"``,
    ``Path`` → its string, anything else → ``str(value)``. ``None`` values are dropped."""
    out: dict[str, str] = {}
    for key, value in (settings or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (list, tuple, set, frozenset)):
            text = ",".join(str(v) for v in value)
        else:
            text = str(value)
        out[str(key)] = text
    return out


def _stop_all_at_exit() -> None:
    """Runs before the interpreter joins non-daemon threads: a broker somebody forgot to stop
    would otherwise keep the process alive forever."""
    for broker in list(_live):
        try:
            broker.stop()
        except Exception:  # pragma: no cover - best effort at exit
            log.exception("stopping %r at exit failed", broker)


def _register_atexit() -> None:
    global _atexit_registered
    with _atexit_lock:
        if _atexit_registered:
            return
        register = getattr(threading, "_register_atexit", None)
        if register is not None:
            try:
                register(_stop_all_at_exit)
            except RuntimeError:  # interpreter already shutting down
                return
        _atexit_registered = True


class EmbeddedBroker:
    """A real odradek broker on a background thread (see the module docstring).

    :param settings: broker settings (Kafka's keys), applied over ``TEST_DEFAULTS``.
    :param storage: ``"memory"`` (default) or ``"file"``; a ``storage.engine`` key in
        ``settings`` wins over it.
    :param data_dir: with ``storage="file"``, keep the data here (not removed on stop) instead
        of a temporary directory. ``log.dirs`` in ``settings`` has the same effect.
    :param clock: an ``odradek.clock.Clock`` handed to the broker (e.g. a ``ManualClock``).
    :param thread: ``False`` runs the broker on the caller's event loop (``astart`` only).
    :param loop_factory: creates the broker thread's loop; default ``asyncio.new_event_loop``.
    :param start_timeout / stop_timeout: seconds; ``stop()`` never hangs longer than about
        twice ``stop_timeout`` (graceful broker stop, then cancellation of what is left).
    """

    def __init__(
        self,
        settings: Mapping[str, object] | None = None,
        *,
        storage: StorageEngine | None = None,
        data_dir: str | Path | None = None,
        clock: Clock | None = None,
        thread: bool = True,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        **kwargs: object,
    ) -> None:
        merged: dict[str, object] = dict(settings or {})
        # Keyword settings with underscores are also accepted: num_partitions=3.
        for key, value in kwargs.items():
            merged[key.replace("_", ".")] = value
        self._user_settings = to_properties(merged)
        engine = self._user_settings.get("storage.engine") or storage or "memory"
        if engine not in ("memory", "file"):
            raise ValueError(f"storage must be 'memory' or 'file', not {engine!r}")
        self.storage: StorageEngine = engine  # type: ignore[assignment]
        self._data_dir_arg = Path(data_dir) if data_dir is not None else None
        self._clock = clock
        self._use_thread = thread
        self._loop_factory = loop_factory or asyncio.new_event_loop
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.name = f"odradek-embedded-{next(_ids)}"

        self._lock = threading.Lock()  # guards the state fields
        # Serialises the synchronous start()/stop()/restart() of callers in several threads.
        self._lifecycle = threading.RLock()
        self._state = _STATE_NEW
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._broker: Broker | None = None
        self._stop_event: asyncio.Event | None = None
        self._started: concurrent.futures.Future[int] | None = None
        self._finished: concurrent.futures.Future[None] | None = None
        self._temp_dir: Path | None = None
        self._pinned_port: int | None = None  # set by restart(): start on the same port
        self._last_port: int | None = None  # the port of the last run, for restart()
        self.settings: dict[str, str] = {}
        """The effective settings the broker was started with (after ``TEST_DEFAULTS``)."""
        self.port: int | None = None
        self.host = "127.0.0.1"

    # ------------------------------------------------------------------ public surface

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:<port>"`` of the running broker."""
        if self.port is None:
            raise RuntimeError(f"{self.name} is not running: call start() first")
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._state == _STATE_RUNNING

    @property
    def data_dir(self) -> Path | None:
        """The data directory with ``storage="file"`` (``None`` in memory)."""
        dirs = self.settings.get("log.dirs")
        return Path(dirs.split(",")[0]) if dirs and self.storage == "file" else None

    @property
    def broker(self) -> Broker:
        """The ``Broker`` object. It lives on the broker's loop: touch its state only through
        ``call()`` (or ``loop.call_soon_threadsafe``)."""
        if self._broker is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._broker

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the broker runs on."""
        if self._loop is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._loop

    def call(self, fn: Callable[[], Awaitable[T] | T], timeout: float | None = 10.0) -> T:
        """Run ``fn()`` on the broker's loop (awaiting it if it returns an awaitable) and return
        its result; for tests that inspect or poke broker internals thread-safely."""

        async def run() -> T:
            result = fn()
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                return await result
            return result  # type: ignore[return-value]

        if not self._use_thread:
            raise RuntimeError("call() needs thread=True; with thread=False just await it")
        fut = asyncio.run_coroutine_threadsafe(run(), self.loop)
        return fut.result(timeout)

    def build_config(self) -> BrokerConfig:
        """Validate the settings (``ConfigError`` names a bad key) without starting anything."""
        from odradek.broker.config import BrokerConfig

        return BrokerConfig.from_properties(self._effective_settings(data_dir=None))

    # ------------------------------------------------------------------ sync lifecycle

    def start(self) -> EmbeddedBroker:
        """Start the broker and return once it accepts connections (idempotent)."""
        if not self._use_thread:
            raise RuntimeError("thread=False brokers run on the caller's loop: use astart()")
        with self._lifecycle:
            with self._lock:
                if self._state == _STATE_RUNNING:
                    return self
                started, _finished = self._launch()
            try:
                port = started.result(self.start_timeout)
            except BaseException:
                self._abort_start()
                raise
            self._mark_running(port)
            return self

    def stop(self) -> None:
        """Stop the broker, close every connection and release every resource (idempotent)."""
        self._stop_sync(keep_data=False)

    def restart(self) -> EmbeddedBroker:
        """Stop (if running) and start again on the port of the last run, so that clients
        reconnect to the same address.

        With ``storage="file"`` the data survives, the temporary directory included; in memory
        the restarted broker is empty. Handy to test client reconnection, and to let clients
        whose ``close()`` needs a broker (librdkafka's consumer close waits for its group
        coordinator) close cleanly after a stop."""
        with self._lifecycle:
            self._stop_sync(keep_data=True)
            with self._on_last_port():
                return self.start()

    def _stop_sync(self, keep_data: bool) -> None:
        if not self._use_thread:
            raise RuntimeError("thread=False brokers run on the caller's loop: use astop()")
        with self._lifecycle:
            self._stop_sync_locked(keep_data)

    def _stop_sync_locked(self, keep_data: bool) -> None:
        stopping, finished = self._leave_running(request_stop=True)
        if stopping:
            self._wait_finished_and_clean(finished, keep_data=keep_data)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ async lifecycle

    async def astart(self) -> EmbeddedBroker:
        """``start()`` for code already inside an event loop: never blocks that loop."""
        if not self._use_thread:
            return await self._astart_in_loop()
        with self._lock:
            if self._state == _STATE_RUNNING:
                return self
            started, _finished = self._launch()
        try:
            port = await asyncio.wait_for(asyncio.wrap_future(started), self.start_timeout)
        except BaseException:
            self._abort_start()
            raise
        self._mark_running(port)
        return self

    async def astop(self) -> None:
        """``stop()`` for code already inside an event loop: never blocks that loop."""
        await self._astop(keep_data=False)

    async def arestart(self) -> EmbeddedBroker:
        """``restart()`` for code already inside an event loop."""
        await self._astop(keep_data=True)
        with self._on_last_port():
            return await self.astart()

    async def _astop(self, keep_data: bool) -> None:
        if not self._use_thread:
            await self._astop_in_loop(keep_data)
            return
        stopping, finished = self._leave_running(request_stop=True)
        if not stopping:
            return
        in_time = True
        try:
            if finished is not None:
                try:
                    await asyncio.wait_for(
                        asyncio.shield(asyncio.wrap_future(finished)), self._join_timeout
                    )
                except TimeoutError:
                    in_time = False
        finally:
            # The thread has set `finished` as its very last action: joining is immediate. If
            # it has not, do not block the caller's loop joining it: _join_and_clean raises.
            self._join_and_clean(_JOIN_AFTER_FINISHED if in_time else 0, keep_data=keep_data)

    async def __aenter__(self) -> EmbeddedBroker:
        return await self.astart()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    @classmethod
    def run_async(
        cls, settings: Mapping[str, object] | None = None, **kwargs: Any
    ) -> EmbeddedBroker:
        """``async with EmbeddedBroker.run_async({...}) as broker:`` (same as constructing one
        and using ``async with``)."""
        return cls(settings, **kwargs)

    # ------------------------------------------------------------------ internals

    def _effective_settings(self, data_dir: Path | None) -> dict[str, str]:
        props = dict(TEST_DEFAULTS)
        props["storage.engine"] = self.storage
        if self.storage == "file":
            if data_dir is not None:
                props["log.dirs"] = str(data_dir)
            elif self._data_dir_arg is not None:
                props["log.dirs"] = str(self._data_dir_arg)
        if self._pinned_port is not None and "listeners" not in self._user_settings:
            props["listeners"] = f"PLAINTEXT://127.0.0.1:{self._pinned_port}"
        props.update(self._user_settings)
        return props

    def _prepare_config(self) -> BrokerConfig:
        from odradek.broker.config import BrokerConfig

        temp_dir: Path | None = self._temp_dir  # kept by restart()
        if (
            temp_dir is None
            and self.storage == "file"
            and self._data_dir_arg is None
            and "log.dirs" not in self._user_settings
            and "log.dir" not in self._user_settings
        ):
            temp_dir = Path(tempfile.mkdtemp(prefix="odradek-embedded-"))
        try:
            props = self._effective_settings(temp_dir)
            config = BrokerConfig.from_properties(props)
        except BaseException:
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            self._temp_dir = None
            raise
        self._temp_dir = temp_dir
        self.settings = props
        return config

    def _launch(self) -> tuple[concurrent.futures.Future[int], concurrent.futures.Future[None]]:
        """Called with the lock held: prepare config, start the thread."""
        config = self._prepare_config()
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._started, self._finished = started, finished
        _register_atexit()
        thread = threading.Thread(
            target=self._thread_main, args=(config, started, finished), name=self.name, daemon=False
        )
        self._thread = thread
        thread.start()
        return started, finished

    def _mark_running(self, port: int) -> None:
        with self._lock:
            self.port = port
            self._last_port = port
            self._state = _STATE_RUNNING
            _live.add(self)

    def _abort_start(self) -> None:
        """start() failed or timed out: make the thread finish and clean up."""
        with self._lock:
            finished = self._request_stop()
            self._state = _STATE_STOPPED
        self._wait_finished_and_clean(finished, keep_data=False)

    def _wait_finished_and_clean(
        self, finished: concurrent.futures.Future[None] | None, *, keep_data: bool
    ) -> None:
        """Block until the broker thread sets ``finished`` (its last action; bounded by the join
        timeout), then join it and clean up; ``RuntimeError`` if the thread is still running."""
        in_time = True
        try:
            if finished is not None:
                try:
                    finished.result(self._join_timeout)
                except concurrent.futures.TimeoutError:
                    in_time = False
        finally:
            self._join_and_clean(_JOIN_AFTER_FINISHED if in_time else 0, keep_data=keep_data)

    @property
    def _join_timeout(self) -> float:
        """How long stop waits for the broker thread: its own stop, twice, and a margin."""
        return 2 * self.stop_timeout + 5

    def _leave_running(
        self, *, request_stop: bool
    ) -> tuple[bool, concurrent.futures.Future[None] | None]:
        """Running -> stopped, under the lock. Returns (False, None) when it was not running;
        else (True, the thread's ``finished`` future when ``request_stop`` asked it to stop)."""
        with self._lock:
            if self._state != _STATE_RUNNING:
                return False, None
            self._state = _STATE_STOPPED
            return True, self._request_stop() if request_stop else None

    @contextlib.contextmanager
    def _on_last_port(self) -> Iterator[None]:
        """Within the block, start() binds the port of the last run (restart)."""
        self._pinned_port = self._last_port
        try:
            yield
        finally:
            self._pinned_port = None

    def _request_stop(self) -> concurrent.futures.Future[None] | None:
        loop, event = self._loop, self._stop_event
        if loop is not None and event is not None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # loop already closed
                pass
        elif self._started is not None and not self._started.done():
            # The thread has not created its stop event yet: it checks this flag after start.
            self._started.cancel()
        return self._finished

    def _join_and_clean(self, timeout: float, keep_data: bool = False) -> None:
        """Join the broker thread (up to ``timeout`` s) and forget this run. A thread still
        running may still hold sockets and files: ``RuntimeError`` with its stack (logged too),
        and the data directory is left to it."""
        thread, self._thread = self._thread, None
        stuck: str | None = None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                stuck = (
                    f"{self.name}: the broker thread is still running after stop waited"
                    f" {self._join_timeout:.1f} s for it; its sockets may still be open."
                    f" Its stack:\n{_thread_stack(thread)}"
                )
        self._loop = None
        self._broker = None
        self._stop_event = None
        self.port = None
        _live.discard(self)
        if stuck is not None:
            log.error("%s", stuck)
            raise RuntimeError(stuck)
        if keep_data:
            return
        temp_dir, self._temp_dir = self._temp_dir, None
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)

    # -- the broker thread -------------------------------------------------------------------

    def _thread_main(
        self,
        config: BrokerConfig,
        started: concurrent.futures.Future[int],
        finished: concurrent.futures.Future[None],
    ) -> None:
        loop = self._loop_factory()
        bound: list[int] = []  # the port, once the broker listens
        try:
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(config, started, bound))
            except BaseException as exc:  # pragma: no cover - _serve reports its own errors
                if not started.done():
                    started.set_exception(exc)
                log.exception("%s: broker loop failed", self.name)
            finally:
                _drain_loop(loop, self.stop_timeout, self.name)
        finally:
            asyncio.set_event_loop(None)
            loop.close()
            if bound:
                # the guarantee stop() gives: every accepted connection is closed by now
                _shut_down_leftover_connections(self.host, bound[0], self.name)
            if not started.done():
                started.set_exception(RuntimeError(f"{self.name} stopped before it started"))
            finished.set_result(None)

    async def _serve(
        self, config: BrokerConfig, started: concurrent.futures.Future[int], bound: list[int]
    ) -> None:
        stop_event = asyncio.Event()
        self._stop_event = stop_event
        broker: Broker | None = None
        try:
            from odradek.broker.server import Broker

            broker = Broker(config, clock=self._clock)
            self._broker = broker
            await broker.start()
            port = int(broker.bound_port)
            bound.append(port)
        except BaseException as exc:
            if broker is not None:
                await _stop_quietly(broker, self.stop_timeout, self.name)
                _release_partial_start(broker, self.name)
            if not started.done():
                started.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if not started.set_running_or_notify_cancel():
            # start() gave up (timeout) before we got here.
            await _stop_quietly(broker, self.stop_timeout, self.name)
            return
        started.set_result(port)
        await stop_event.wait()
        await _stop_quietly(broker, self.stop_timeout, self.name)

    # -- thread=False: on the caller's loop --------------------------------------------------

    async def _astart_in_loop(self) -> EmbeddedBroker:
        with self._lock:
            if self._state == _STATE_RUNNING:
                return self
            config = self._prepare_config()
        from odradek.broker.server import Broker

        broker = Broker(config, clock=self._clock)
        try:
            await asyncio.wait_for(broker.start(), self.start_timeout)
        except BaseException:
            await _stop_quietly(broker, self.stop_timeout, self.name)
            _release_partial_start(broker, self.name)
            self._join_and_clean(0)
            raise
        self._broker = broker
        self._loop = asyncio.get_running_loop()
        self._mark_running(int(broker.bound_port))
        return self

    async def _astop_in_loop(self, keep_data: bool = False) -> None:
        if not self._leave_running(request_stop=False)[0]:
            return
        broker = self._broker
        try:
            if broker is not None:
                await _stop_quietly(broker, self.stop_timeout, self.name)
                _shut_down_leftover_connections(self.host, int(broker.bound_port), self.name)
        finally:
            self._join_and_clean(0, keep_data=keep_data)

    def __repr__(self) -> str:
        where = f" {self.bootstrap_servers}" if self.port is not None else ""
        return f"<EmbeddedBroker {self.name} {self._state}{where} storage={self.storage}>"


async def _stop_quietly(broker: Broker, timeout: float, name: str) -> None:
    try:
        await asyncio.wait_for(broker.stop(), timeout)
    except TimeoutError:
        log.error("%s: Broker.stop() took more than %.1f s; cancelling what is left", name, timeout)
    except Exception:
        log.exception("%s: Broker.stop() failed", name)


def _release_partial_start(broker: Broker, name: str) -> None:
    """``Broker.start()`` failed (e.g. the port is taken) after it had opened its logs, and
    ``Broker.stop()`` does nothing for a broker that never started: close the log manager
    (it holds the data directory's lock file open) and the metadata store. Both are idempotent."""
    for attr in ("log_manager", "metadata"):
        part = getattr(broker, attr, None)
        close = getattr(part, "close", None)
        if close is None:
            continue
        try:
            close()
        except Exception:
            log.exception("%s: closing %s after a failed start failed", name, attr)


def _abort_leftover_sockets(loop: asyncio.AbstractEventLoop) -> list[str]:
    """Safety net run after ``Broker.stop()``: abort every transport and close every listening
    socket the loop still watches, so that no socket outlives the loop whatever the broker
    missed (a transport whose ``close()`` waits for a client that no longer reads). Works on
    selector loops (the default); returns what it closed so the caller can report it. A socket
    the loop does not watch (a transport whose construction failed) is not seen here: the last
    guard, ``_shut_down_leftover_connections``, finds it by its port."""
    selector = getattr(loop, "_selector", None)
    if selector is None:  # e.g. uvloop: nothing to inspect
        return []
    closed: list[str] = []
    for key in list(selector.get_map().values()):
        handles = key.data if isinstance(key.data, tuple) else ()
        for handle in handles:
            callback = getattr(handle, "_callback", None)
            owner = getattr(callback, "__self__", None)
            if isinstance(owner, asyncio.BaseTransport):
                closed.append(f"transport {owner.get_extra_info('peername')}")
                owner.abort()  # type: ignore[attr-defined]
                break
            if owner is loop and getattr(callback, "__name__", "") == "_accept_connection":
                closed.append(f"listener {key.fileobj}")
                loop.remove_reader(key.fd)
                try:
                    key.fileobj.close()
                except Exception:  # pragma: no cover
                    pass
                break
    return closed


def _drain_loop(loop: asyncio.AbstractEventLoop, timeout: float, name: str = "") -> None:
    """Abort leftover sockets, cancel every task left on ``loop`` and wait (bounded) for them,
    then shut down async generators and the default executor, so that closing the loop leaks
    nothing."""
    leftovers = _abort_leftover_sockets(loop)
    if leftovers:
        log.warning(
            "%s: %d socket(s) still open after Broker.stop(), aborted: %s",
            name,
            len(leftovers),
            ", ".join(leftovers),
        )
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        _, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=timeout))
        for task in pending:
            log.error("task %r ignored cancellation", task)
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.debug("task %r ended with %r", task, task.exception())
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(_shutdown_executor(loop, timeout))
    # A transport closed or aborted during the steps above (a cancelled task's clean-up) closes
    # its socket in a callback one loop turn later, and loop.close() drops pending callbacks:
    # abort what is still watched and give the loop that turn.
    late = _abort_leftover_sockets(loop)
    if late:
        log.warning("%s: aborted while draining the loop: %s", name, ", ".join(late))
    loop.run_until_complete(asyncio.sleep(0))


def _thread_stack(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or -1)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(not running)\n"


def sockets_on_port(port: int, host: str = "127.0.0.1") -> list[tuple[int, str]]:
    """The sockets of this process whose local address is ``(host, port)``: a broker's listener
    and the connections it accepted, as (fd, ``"listening"`` or the peer's address). Reads
    ``/proc/self/fd`` (Linux; elsewhere: an empty list). After a broker stopped there must be
    none: stop()'s guarantee, and what a test reports when a client sees no EOF."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return []
    found: list[tuple[int, str]] = []
    for name in names:
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            # a duplicate, so that this function never closes anybody's descriptor
            sock = socket.socket(fileno=os.dup(int(name)))
        except (OSError, ValueError):
            continue  # closed meanwhile, or not a socket any more
        with sock:
            try:
                if sock.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                local = sock.getsockname()
                if local[1] != port or (host not in ("", "0.0.0.0", "::") and local[0] != host):
                    continue
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    found.append((int(name), "listening"))
                else:
                    try:
                        found.append((int(name), f"{sock.getpeername()}"))
                    except OSError:
                        found.append((int(name), "not connected"))
            except OSError:
                continue
    return found


def _shut_down_leftover_connections(host: str, port: int, name: str) -> list[tuple[int, str]]:
    """Last guard of stop(): a socket still bound to the stopped broker's ``(host, port)`` is a
    connection nothing will close (e.g. held only by a reference cycle, closed whenever the
    cyclic garbage collector runs). Shut it down, so that its client sees EOF now, and say so
    loudly: it is a bug. The descriptor itself stays with its (unreachable) owner, which closes
    it when collected; closing it here could close a reused descriptor later."""
    leftovers = sockets_on_port(port, host)
    if not leftovers:
        return []
    log.error(
        "%s: %d socket(s) on port %d still open after the broker stopped (a bug): %s;"
        " shutting them down",
        name,
        len(leftovers),
        port,
        ", ".join(f"fd {fd} {what}" for fd, what in leftovers),
    )
    for fd, _what in leftovers:
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    return leftovers


async def _shutdown_executor(loop: asyncio.AbstractEventLoop, timeout: float) -> None:
    try:
        await asyncio.wait_for(loop.shutdown_default_executor(), timeout)
    except TimeoutError:  # pragma: no cover
        log.error("default executor did not shut down in %.1f s", timeout)
