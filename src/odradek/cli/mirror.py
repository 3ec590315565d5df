"""`odradek mirror mm2.properties`: run MirrorMaker 2 flows; `odradek mirror translate`.

    odradek mirror mm2.properties [--clusters B] [--instance N] [--metrics HOST:PORT]
    odradek mirror translate mm2.properties --group G --source A --target B

The first runs every enabled flow of the MM2 properties file (only those into the ``--clusters``
given, as MM2's dedicated mode), logs one progress line per flow every few seconds, and exits
cleanly on SIGTERM or Ctrl-C. Processes started with the same file share the flows' partitions
(each with its own ``--instance``: it names the process's transactional id). The second prints the offsets group G would resume at on B,
translated from A's checkpoints (``A.checkpoints.internal`` on B), one ``topic partition offset``
line per partition.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from odradek.console.http import HttpServer
    from odradek.mirror.config import MirrorConfig
    from odradek.mirror.flow import Flow

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
    metrics: Annotated[str | None, typer.Option("--metrics", help="Serve /metrics (MM2's metric names) on HOST:PORT.")] = None,
    instance: Annotated[int, typer.Option("--instance", help="This process's number among those sharing the flows (0, 1, ...).")] = 0,
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
    asyncio.run(_run(cfg, progress_interval, metrics, instance))


async def _run(cfg: MirrorConfig, progress_interval: float, metrics: str | None, instance: int) -> None:
    from odradek.mirror.flow import Flow, run_flows

    flows = [Flow(f, progress_interval=progress_interval, instance=instance) for f in cfg.flows]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log = logging.getLogger("odradek.mirror")
    server = None
    if metrics is not None:
        server = await _serve_metrics(flows, metrics)
    log.info("mirror: running %s", ", ".join(f.name for f in flows))
    try:
        await run_flows(flows, stop)
    finally:
        if server is not None:
            await server.stop()
    log.info("mirror: stopped")


async def _serve_metrics(flows: list[Flow], listener: str) -> HttpServer:
    """/metrics in Prometheus' text format on ``listener`` (host:port; port 0 picks one)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.exposition import CONTENT_TYPE_LATEST

    from odradek.console.http import HttpServer, Request, Response
    from odradek.mirror.metrics import MirrorCollector

    registry = CollectorRegistry()
    registry.register(MirrorCollector(flows))

    async def handle(request: Request) -> Response:
        if request.path != "/metrics":
            return Response(404, b"not found\n", "text/plain")
        return Response(200, generate_latest(registry), CONTENT_TYPE_LATEST)

    host, _, port = listener.rpartition(":")
    server = HttpServer(handle)
    bound = await server.start(host or "127.0.0.1", int(port))
    logging.getLogger("odradek.mirror").info("mirror: metrics on http://%s:%d/metrics", host or "127.0.0.1", bound)
    return server


def _translate(cfg: MirrorConfig, group: str, source: str, target: str) -> None:
    from odradek.mirror.translate import translate_offsets

    clusters = cfg.cluster_clients
    if source not in clusters or target not in clusters:
        fail(f"--source/--target must be among clusters = {', '.join(clusters)}", 2)
    policy = next((f.policy for f in cfg.flows if f.source == source and f.target == target), None)
    try:
        offsets = asyncio.run(translate_offsets(dict(clusters[target]["consumer"]), source, group, policy))
    except Exception as exc:
        fail(str(exc))
    for tp in sorted(offsets):
        typer.echo(f"{tp.topic}\t{tp.partition}\t{offsets[tp]}")
