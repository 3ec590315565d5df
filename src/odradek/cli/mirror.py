"""`odradek mirror mm2.properties`: run MirrorMaker 2 flows; `odradek mirror translate`.

    odradek mirror mm2.properties [--clusters B]
    odradek mirror translate mm2.properties --group G --source A --target B

The first runs every enabled flow of the MM2 properties file (only those into the ``--clusters``
given, as MM2's dedicated mode), logs one progress line per flow every few seconds, and exits
cleanly on SIGTERM or Ctrl-C. The second prints the offsets group G would resume at on B,
translated from A's checkpoints (``A.checkpoints.internal`` on B), one ``topic partition offset``
line per partition.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Annotated

import typer

from ._clientopts import fail

__all__ = ["app"]

app = typer.Typer(add_completion=False, invoke_without_command=True)


@app.callback(invoke_without_command=True)
def mirror(
    config: Annotated[str, typer.Argument(help="MM2 properties file (or `translate`).")],
    properties: Annotated[str | None, typer.Argument(help="With translate: the MM2 properties file.")] = None,
    clusters: Annotated[list[str] | None, typer.Option("--clusters", help="Run only the flows into these clusters.")] = None,
    group: Annotated[str | None, typer.Option("--group", help="translate: the consumer group.")] = None,
    source: Annotated[str | None, typer.Option("--source", help="translate: the source cluster alias.")] = None,
    target: Annotated[str | None, typer.Option("--target", help="translate: the target cluster alias.")] = None,
    progress_interval: Annotated[float, typer.Option("--progress-interval", help="Seconds between progress lines.")] = 5.0,
) -> None:
    """Mirror topics between Kafka-compatible clusters, configured as MirrorMaker 2."""
    from odradek.mirror.config import MirrorConfigError, load_config, parse_properties

    translating = config == "translate"
    path = properties if translating else config
    if path is None:
        fail("translate needs the MM2 properties file", 2)
    assert path is not None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        fail(f"{path}: {exc.strerror}", 2)
    try:
        props = parse_properties(text, path)
        cfg = load_config(props, [c.strip() for item in clusters for c in item.split(",")] if clusters else None)
    except MirrorConfigError as exc:
        fail(str(exc), 2)
    if translating:
        if not (group and source and target):
            fail("translate needs --group, --source and --target", 2)
        assert group and source and target
        _translate(cfg, group, source, target)
        return
    if not cfg.flows:
        fail(f"{path}: no enabled flow (set e.g. A->B.enabled = true)", 2)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    for key in cfg.ignored:
        logging.getLogger("odradek.mirror").info("%s: %s is not used by odradek mirror", props.where(key), key)
    asyncio.run(_run(cfg, progress_interval))


async def _run(cfg: object, progress_interval: float) -> None:
    from odradek.mirror.flow import Flow, run_flows

    flows = [Flow(f, progress_interval=progress_interval) for f in cfg.flows]  # type: ignore[attr-defined]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log = logging.getLogger("odradek.mirror")
    log.info("mirror: running %s", ", ".join(f.name for f in flows))
    await run_flows(flows, stop)
    log.info("mirror: stopped")


def _translate(cfg: object, group: str, source: str, target: str) -> None:
    from odradek.mirror.translate import translate_offsets

    clusters = cfg.cluster_clients  # type: ignore[attr-defined]
    if source not in clusters or target not in clusters:
        fail(f"--source/--target must be among clusters = {', '.join(clusters)}", 2)
    policy = next((f.policy for f in cfg.flows if f.source == source and f.target == target), None)  # type: ignore[attr-defined]
    try:
        offsets = asyncio.run(translate_offsets(dict(clusters[target]["consumer"]), source, group, policy))
    except Exception as exc:
        fail(str(exc))
    for tp in sorted(offsets):
        typer.echo(f"{tp.topic}\t{tp.partition}\t{offsets[tp]}")
