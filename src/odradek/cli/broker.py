"""`odradek broker`: run one broker until SIGTERM/SIGINT.

    odradek broker [--config server.properties] [--set key=value ...] [--log-level LEVEL]

Without arguments: listeners=PLAINTEXT://127.0.0.1:9092, log.dirs=./odradek-data. ``--set``
overrides the file. When the broker is ready it prints exactly one line to stdout (and flushes):

    odradek broker listening on <host>:<port> (node <id>, log.dirs <path>)

An unknown key or an invalid value prints ``error: <key>: <reason>`` to stderr and exits with
code 2 (as does a malformed command line). The command parses its few options itself, with
argparse, before anything else is imported: ``odradek`` hands it its arguments before importing
typer, whose parameter building (pydantic) would cost every broker process ~0.1 s of its
start; the broker module is imported only after the arguments are parsed.

Hidden option for parents that start brokers (test fixtures): ``--exit-with-parent-fd N``
names the read end of a pipe whose write end only the parent holds. When the pipe reaches EOF
(the parent exited, even by SIGKILL) the broker stops as on SIGTERM, and exits with code 70
if that graceful stop has not finished within 10 s. Unlike PR_SET_PDEATHSIG this follows the
parent *process*, not the thread that forked the broker.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["HELP", "main", "run"]

EXIT_CONFIG = 2
HELP = "Run a broker."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek broker", description=HELP)
    parser.add_argument(
        "--config",
        "-c",
        type=Path,
        help="A Java .properties file with broker settings (Kafka key names).",
    )
    parser.add_argument(
        "--set",
        "-s",
        dest="set_",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="key=value, repeatable; overrides the config file.",
    )
    parser.add_argument(
        "--log-level", default="warning", help="debug, info, warning or error (default warning)."
    )
    parser.add_argument("--exit-with-parent-fd", type=int, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`odradek broker ARGS`: parse, validate the settings, run; returns the exit code."""
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help (0) or a malformed command line (2)
        return exc.code if isinstance(exc.code, int) else EXIT_CONFIG
    _skip_optional_imports()
    from odradek.broker.config import BrokerConfig, ConfigError, load_properties_file

    props: dict[str, str] = {}
    if args.config is not None:
        try:
            props.update(load_properties_file(args.config))
        except OSError as exc:
            print(f"error: cannot read {args.config}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_CONFIG
    for item in args.set_:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"error: --set {item!r}: expected key=value", file=sys.stderr)
            return EXIT_CONFIG
        props[key.strip()] = value
    try:
        cfg = BrokerConfig.from_properties(props)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return run(cfg, args.log_level, parent_fd=args.exit_with_parent_fd)


def _skip_optional_imports() -> None:
    """kio imports hypothesis (when installed) only to register test strategies: ~0.2 s of the
    broker's start-up. The broker process never uses it, so keep it from being imported."""
    if "hypothesis" not in sys.modules and not os.environ.get("ODRADEK_ALLOW_HYPOTHESIS"):
        sys.modules["hypothesis"] = None  # type: ignore[assignment]


PARENT_GONE_GRACE_S = 10.0
EXIT_PARENT_GONE = 70


def _watch_parent(fd: int, stop: Any, loop: Any) -> None:
    """Start a daemon thread that blocks on ``fd`` until EOF (the parent's write end closed),
    then sets ``stop`` in ``loop``; it exits the process hard if the broker is still running
    PARENT_GONE_GRACE_S later (a stuck event loop). The thread dies with the process."""
    import threading
    import time

    def watch() -> None:
        try:
            while os.read(fd, 4096):
                pass  # the parent never writes; drain anything it does
        except OSError:
            pass
        print("odradek broker: parent process gone, stopping", file=sys.stderr, flush=True)
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:
            return  # the loop is closed: the broker is exiting anyway
        time.sleep(PARENT_GONE_GRACE_S)
        os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def run(cfg: object, log_level: str = "warning", parent_fd: int | None = None) -> int:
    """Run the broker in this process until SIGTERM/SIGINT (or EOF on ``parent_fd``, see the
    module docstring); returns the exit code."""
    import asyncio
    import gc
    import logging
    import signal

    from odradek.broker.config import BrokerConfig

    assert isinstance(cfg, BrokerConfig)
    level = getattr(logging, log_level.upper(), logging.WARNING)
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    async def main() -> int:
        from odradek.broker.server import Broker

        broker = Broker(cfg)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        if parent_fd is not None:
            _watch_parent(parent_fd, stop, loop)
        try:
            await broker.start()
        except OSError as exc:
            # the log dir is locked by another broker, or the listener cannot bind
            print(f"error: {exc}", file=sys.stderr)
            return 1
        # what exists now (modules, kio schemas, logs) lives as long as the process: keep it
        # out of the cyclic GC's full collections (shorter pauses, less CPU)
        gc.collect()
        gc.freeze()
        host = broker.host
        log_dirs = (
            "(memory)" if cfg.in_memory else ",".join(str(p.resolve()) for p in cfg.data_dirs)
        )
        sys.stdout.write(
            f"odradek broker listening on {host}:{broker.bound_port} (node {broker.node_id}, log.dirs {log_dirs})\n"
        )
        sys.stdout.flush()
        await stop.wait()
        await broker.stop()
        return 0

    try:
        import uvloop
    except ImportError:
        return _run_plain(main)
    try:
        return uvloop.run(main())
    except KeyboardInterrupt:
        return 130


def _run_plain(main: Any) -> int:
    import asyncio

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130
