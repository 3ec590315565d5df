"""The console: routes, pages and the Prometheus endpoint over a ``ClusterSource``.

Routes (GET unless marked):

* ``/metrics`` Prometheus text format (cluster series from a snapshot, plus any extra
  collectors, e.g. the broker's internals), rendered at most once per ``render_max_age_s``;
* ``/health`` 200 ``ready`` or 503 ``not ready`` (``ready()`` decides; the broker passes its own);
* ``/`` cluster and brokers; ``/topics``; ``/topics/<t>`` partitions, configs, message browser;
  ``/topics/<t>/messages?partition=&offset=|timestamp=&limit=&format=text|json|hex`` (HTML
  fragment); ``/groups``; ``/groups/<g>`` state, members, lag; ``/groups/<g>/lag`` (fragment);
* POST ``/groups/<g>/reset`` (form: topic, to) and POST ``/groups/<g>/delete``: only with the
  ``HX-Request`` header htmx sends (a cross-site form cannot set it), after the page's
  confirmation dialog;
* ``/schemas`` subjects (latest version, id, type, compatibility level) of the schema registry
  the console is handed (``schemas``; inside a broker its own); ``/schemas/<subject>`` its
  versions and level, ``?from=&to=`` a diff between two versions;
* ``/clients`` the client instances that push their metrics (KIP-714 client telemetry) with
  the latest value of each metric (inside a broker: what it received);
* ``/mirroring`` the mirror flows into this cluster, derived from its ``heartbeats``,
  ``<source>.checkpoints.internal`` and remote topics (console/mirroring.py);
* the message browser shows the schema id of Confluent-framed values and, for Avro, the
  decoded value;
* ``/api/cluster``, ``/api/topics``, ``/api/topics/<t>``, ``/api/topics/<t>/messages``,
  ``/api/groups``, ``/api/groups/<g>``, ``/api/groups/<g>/history`` JSON;
* ``/static/<file>`` the vendored htmx and uPlot (package data; no CDN).

A background task refreshes the snapshot every ``sample_interval_s`` so that the lag charts and
the time-to-clear estimates have history even when nobody scrapes.

With ``auth`` (a ``ConsoleAuth``: the broker has an authorizer) every route but the skipped ones
(``/metrics`` and ``/health`` by default) and ``/static`` needs a user (console/auth.py):
GET ``/login`` is the form, POST ``/login`` (form: ``username`` + ``password``, or ``token``;
``next``) sets the session cookie, POST ``/logout`` clears it. A page asked for without a user
redirects to ``/login?next=<path>``; ``/api/*`` and ``/metrics`` answer 401 with
``WWW-Authenticate``. Each user sees only the topics and groups their ACLs let them DESCRIBE (a
topic or group they may not is answered as one that does not exist); the message browser needs
READ on the topic, a group's offset reset READ on the group and the topic, its deletion DELETE
on the group, the Mirroring page and the cluster errors DESCRIBE on the cluster, a schema
subject READ on its topic (``subject_topic``), ``/metrics`` (when not skipped) DESCRIBE on the
cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime
import json
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from importlib import resources
from typing import Any
from urllib.parse import unquote, urlencode

import jinja2
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from odradek.client import KafkaError
from odradek.client.avro import SchemaRegistryError
from odradek.console.auth import ConsoleAuth, Viewer, safe_next
from odradek.console.http import HttpServer, Request, Response
from odradek.console.mirroring import mirror_flows
from odradek.console.schemas import SchemaSource, pretty_schema
from odradek.console.source import MAX_BROWSE, ClusterSource
from odradek.metrics.cluster import ClusterCollector, ClusterSnapshot
from odradek.security.acls import AclOperation

__all__ = ["Console"]

log = logging.getLogger("odradek.console")

_STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
}
_VALUE_PREVIEW = 4096
"""Bytes of a key or value shown per record in the browser (the rest is cut)."""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 0:
        return "not clearing"
    if math.isinf(seconds):
        return "∞"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _timestamp(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(
        timespec="milliseconds"
    )


def render_bytes(data: bytes | None, fmt: str) -> str:
    """A key, value or header value as text, pretty JSON or hex (cut at _VALUE_PREVIEW)."""
    if data is None:
        return "null"
    cut = data[:_VALUE_PREVIEW]
    suffix = f" … ({len(data)} bytes)" if len(data) > _VALUE_PREVIEW else ""
    if fmt == "hex":
        return cut.hex(" ") + suffix
    text = cut.decode("utf-8", "replace")
    if fmt == "json":
        with contextlib.suppress(ValueError):
            return json.dumps(json.loads(data), indent=2, ensure_ascii=False)
    return text + suffix


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


_VIEWER: ContextVar[Viewer | None] = ContextVar("odradek_console_viewer", default=None)
"""The user of the request being served (each connection is served by its own task)."""


def _json(obj: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(_jsonable(obj)).encode(), "application/json")


def _text(status: int, text: str) -> Response:
    return Response(status, text.encode(), "text/plain; charset=utf-8")


_RENDER_SLICE = 32
"""Samples formatted between two returns to the event loop (~0.5-1.3 ms here)."""
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")
"""Samples generate_latest moves to a block of their own after the family: such a family is
formatted whole."""


class _Families:
    """Already collected metric families, as the registry ``generate_latest`` takes."""

    __slots__ = ("families",)

    def __init__(self, families: tuple[Any, ...]) -> None:
        self.families = families

    def collect(self) -> tuple[Any, ...]:
        return self.families


class Console:
    """Serve the console and /metrics for ``source`` on the running event loop."""

    def __init__(
        self,
        source: ClusterSource,
        *,
        collectors: Iterable[Collector] = (),
        ready: Callable[[], bool] | None = None,
        title: str = "odradek",
        metrics_max_age_s: float = 1.0,
        render_max_age_s: float | None = None,
        sample_interval_s: float = 5.0,
        schemas: SchemaSource | None = None,
        auth: ConsoleAuth | None = None,
        clients: Callable[[], Sequence[Any]] | None = None,
    ) -> None:
        self.source = source
        self.auth = auth
        self.clients = clients
        """The client instances that pushed telemetry and their latest metrics (KIP-714;
        ``metrics.client_telemetry.ClientInstance``), None where nothing collects them."""
        self.schemas = schemas if schemas is not None else SchemaSource(None)
        self.ready = ready
        self.title = title
        self.metrics_max_age_s = metrics_max_age_s
        """How old a cluster snapshot the pages and the API may show."""
        self.render_max_age_s = metrics_max_age_s if render_max_age_s is None else render_max_age_s
        """How old the /metrics text (and the snapshot behind it) may be."""
        self.sample_interval_s = sample_interval_s
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ClusterCollector(lambda: source.latest))
        for collector in collectors:
            self.registry.register(collector)
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("odradek.console", "templates"),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["duration"] = _duration
        self.env.filters["size"] = _size
        self.env.filters["timestamp"] = _timestamp
        self.env.globals["render_bytes"] = render_bytes
        self.env.globals["pretty_schema"] = pretty_schema
        self.env.globals["title"] = title
        self.http = HttpServer(self.handle)
        self._sampler: asyncio.Task[None] | None = None
        self._metrics_cache: tuple[float, bytes] | None = None
        self._rendering: asyncio.Task[bytes] | None = None

    async def start(self, host: str, port: int, ssl_context: Any = None) -> int:
        """Listen on host:port (0: any free port; HTTPS with ``ssl_context``); returns the
        bound port."""
        bound = await self.http.start(host, port, ssl_context)
        self._sampler = asyncio.get_running_loop().create_task(self._sample())
        return bound

    async def stop(self) -> None:
        for task in (self._sampler, self._rendering):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._sampler = self._rendering = None
        await self.http.stop()
        await self.source.close()

    async def _sample(self) -> None:
        while True:
            try:
                await self.source.snapshot(max_age_s=self.sample_interval_s / 2)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("console: snapshot failed: %s", exc)
            await asyncio.sleep(self.sample_interval_s)

    # -- dispatch -------------------------------------------------------------------------------

    async def handle(self, req: Request) -> Response:
        path = req.path.rstrip("/") or "/"
        parts = [unquote(p) for p in path.split("/") if p]
        _VIEWER.set(None)
        try:
            viewer: Viewer | None = None
            if self.auth is not None and not self.auth.skips(path) and parts[:1] != ["static"]:
                if parts == ["login"] or parts == ["logout"]:
                    return await self._login(req, parts, self.auth)
                who = await self.auth.authenticate(req)
                if who is None:
                    return self._unauthenticated(req, parts)
                viewer = self.auth.viewer(who, req.client)
                _VIEWER.set(viewer)
            if req.method == "POST":
                return await self._post(req, parts, viewer)
            if req.method not in ("GET", "HEAD"):
                return _text(405, "method not allowed\n")
            return await self._get(req, parts, viewer)
        except (KafkaError, SchemaRegistryError) as exc:
            return self._page("error.html", {"message": str(exc)}, status=502)

    # -- logins ---------------------------------------------------------------------------------

    def _unauthenticated(self, req: Request, parts: list[str]) -> Response:
        if parts[:1] == ["api"] or req.method != "GET" or parts in (["metrics"], ["health"]):
            realm = [("www-authenticate", 'Basic realm="odradek", charset="UTF-8"')]
            if parts[:1] == ["api"]:
                return Response(
                    401, json.dumps({"error": "login required"}).encode(), "application/json", realm
                )
            return Response(401, b"login required\n", "text/plain; charset=utf-8", realm)
        target = req.path + (f"?{urlencode(req.query)}" if req.query else "")
        return Response(303, b"", headers=[("location", "/login?" + urlencode({"next": target}))])

    async def _login(self, req: Request, parts: list[str], auth: ConsoleAuth) -> Response:
        if parts == ["logout"]:
            if req.method != "POST":
                return _text(405, "method not allowed\n")
            return Response(
                303, b"", headers=[("location", "/login"), ("set-cookie", auth.clear_cookie())]
            )
        if req.method == "GET":
            return self._page(
                "login.html",
                {"next": safe_next(req.query.get("next", "/")), "error": None, "tokens": auth.auth.tokens},
            )
        if req.method != "POST":
            return _text(405, "method not allowed\n")
        form = req.form()
        target = safe_next(form.get("next", "/"))
        who = await auth.login(form)
        if who is None:
            log.warning("console: failed login from %s", req.client or "a client")
            return self._page(
                "login.html",
                {"next": target, "error": "Login failed.", "tokens": auth.auth.tokens},
                status=401,
            )
        return Response(
            303, b"", headers=[("location", target), ("set-cookie", auth.session_cookie(who))]
        )

    async def _snapshot(self, viewer: Viewer | None, max_age_s: float) -> ClusterSnapshot:
        snap = await self.source.snapshot(max_age_s)
        return snap if viewer is None else viewer.snapshot(snap)

    def _forbidden(self, viewer: Viewer | None, what: str) -> Response:
        return self._page("error.html", {"message": f"{viewer.user if viewer else 'you'} may not {what}"}, 403)

    async def _get(self, req: Request, parts: list[str], viewer: Viewer | None = None) -> Response:
        match parts:
            case []:
                snap = await self._snapshot(viewer, self.metrics_max_age_s)
                return self._page("cluster.html", {"snap": snap})
            case ["metrics"]:
                if viewer is not None and not viewer.cluster():
                    return _text(403, "metrics need DESCRIBE on the cluster\n")
                return Response(200, await self._metrics_text(), CONTENT_TYPE_LATEST)
            case ["health"]:
                ok = self.ready() if self.ready is not None else True
                return _text(200 if ok else 503, "ready\n" if ok else "not ready\n")
            case ["static", name]:
                return self._static(name)
            case ["topics"]:
                snap = await self._snapshot(viewer, self.metrics_max_age_s)
                return self._page("topics.html", {"snap": snap})
            case ["topics", topic]:
                snap = await self._snapshot_with(viewer, topic=topic)
                t = snap.topics.get(topic)
                if t is None:
                    return self._page("error.html", {"message": f"no topic {topic}"}, 404)
                configs = await self._topic_configs(viewer, topic)
                return self._page("topic.html", {"snap": snap, "topic": t, "configs": configs})
            case ["topics", topic, "messages"]:
                if viewer is not None and not viewer.topic(topic):
                    return self._page("error.html", {"message": f"no topic {topic}"}, 404)
                if viewer is not None and not viewer.topic(topic, AclOperation.READ):
                    return self._forbidden(viewer, f"read topic {topic}")
                records, fmt, error = await self._browse(topic, req.query)
                decoded = await self.schemas.decode([r.value for r in records])
                return self._page(
                    "messages.html",
                    {"records": records, "fmt": fmt, "error": error, "decoded": decoded},
                )
            case ["schemas"]:
                if self.schemas.url is None:
                    return self._page("schemas.html", {"registry": None})
                level, subjects = await self.schemas.subjects()
                if viewer is not None:
                    allowed = set(viewer.subjects(s.subject for s in subjects))
                    subjects = [s for s in subjects if s.subject in allowed]
                return self._page(
                    "schemas.html", {"registry": self.schemas.url, "level": level, "subjects": subjects}
                )
            case ["schemas", subject]:
                if viewer is not None and not viewer.subject(subject):
                    return self._page("error.html", {"message": f"no subject {subject}"}, 404)
                return await self._subject_page(subject, req.query)
            case ["mirroring"]:
                if viewer is not None and not viewer.cluster():
                    return self._forbidden(viewer, "describe the cluster")
                snap = await self.source.snapshot(self.metrics_max_age_s)
                flows = await mirror_flows(self.source, snap)
                return self._page("mirroring.html", {"flows": flows, "now_ms": snap.taken_ms})
            case ["clients"]:
                if viewer is not None and not viewer.cluster():
                    return self._forbidden(viewer, "describe the cluster")
                clients = None if self.clients is None else self.clients()
                return self._page("clients.html", {"clients": clients})
            case ["groups"]:
                snap = await self._snapshot(viewer, self.metrics_max_age_s)
                return self._page("groups.html", {"snap": snap})
            case ["groups", group]:
                snap = await self._snapshot_with(viewer, group=group)
                g = snap.groups.get(group)
                if g is None:
                    return self._page("error.html", {"message": f"no group {group}"}, 404)
                return self._page("group.html", {"snap": snap, "group": g})
            case ["groups", group, "lag"]:
                snap = await self._snapshot(viewer, self.metrics_max_age_s)
                g = snap.groups.get(group)
                if g is None:
                    return self._page("error.html", {"message": f"no group {group}"}, 404)
                return self._page("group_lag.html", {"group": g})
            case ["api", *rest]:
                return await self._api(req, rest, viewer)
        return self._page("error.html", {"message": f"no page {req.path}"}, 404)

    async def _subject_page(self, subject: str, query: dict[str, str]) -> Response:
        if self.schemas.url is None:
            return self._page("error.html", {"message": "no schema registry"}, 404)
        try:
            level, versions = await self.schemas.subject(subject)
        except SchemaRegistryError as exc:
            if exc.status == 404:
                return self._page("error.html", {"message": f"no subject {subject}"}, 404)
            raise
        numbers = [int(v["version"]) for v in versions]
        diff, diff_error = None, None
        a, b = query.get("from", ""), query.get("to", "")
        if not (a and b) and len(numbers) >= 2:  # by default: the latest two versions
            a, b = str(numbers[-2]), str(numbers[-1])
        if a and b:
            if not (a.isdigit() and b.isdigit() and int(a) in numbers and int(b) in numbers):
                diff_error = f"versions must be two of {', '.join(map(str, numbers))}"
            else:
                diff = await self.schemas.diff(subject, int(a), int(b))
        return self._page(
            "subject.html",
            {"subject": subject, "level": level, "versions": versions, "diff": diff,
             "diff_error": diff_error, "from": a, "to": b},
        )

    async def _snapshot_with(
        self, viewer: Viewer | None, topic: str | None = None, group: str | None = None
    ) -> ClusterSnapshot:
        """A recent snapshot (what ``viewer`` may see of it); a fresh one when the one at hand
        lacks the topic or group."""
        snap = await self.source.snapshot(self.metrics_max_age_s)
        if (topic is not None and topic not in snap.topics) or (
            group is not None and group not in snap.groups
        ):
            snap = await self.source.snapshot(0)
        return snap if viewer is None else viewer.snapshot(snap)

    async def _topic_configs(self, viewer: Viewer | None, topic: str) -> dict[str, Any]:
        """The topic's configs; none when the viewer may not DESCRIBE_CONFIGS it."""
        if viewer is not None and not viewer.topic(topic, AclOperation.DESCRIBE_CONFIGS):
            return {}
        return dict(await self.source.topic_configs(topic))

    async def _metrics_text(self) -> bytes:
        """The exposition, rendered at most once per ``render_max_age_s``: Prometheus scrapes
        every 15 s or so, but a tight scrape loop (dashboards, benchmarks) must not make the
        broker re-render every histogram each time. Scrapes that arrive while a rendering is
        under way wait for it instead of starting their own."""
        loop = asyncio.get_running_loop()
        cached = self._metrics_cache
        if cached is not None and loop.time() - cached[0] < self.render_max_age_s:
            return cached[1]
        rendering = self._rendering
        if rendering is None:
            rendering = self._rendering = loop.create_task(self._refresh_metrics())
            rendering.add_done_callback(self._rendered)
        return await asyncio.shield(rendering)

    async def _refresh_metrics(self) -> bytes:
        await self._fresh_or_stale()
        body = await self.render_metrics()
        self._metrics_cache = (asyncio.get_running_loop().time(), body)
        return body

    def _rendered(self, task: asyncio.Task[bytes]) -> None:
        self._rendering = None
        if not task.cancelled():
            task.exception()  # retrieved: a scrape that awaited it has it re-raised

    async def render_metrics(self) -> bytes:
        """``generate_latest(self.registry)``, at most ``_RENDER_SLICE`` samples at a time,
        giving the event loop back in between: formatting costs prometheus-client ~15-40 us per
        sample, so a broker with a few hundred series (the request-latency histogram alone has
        19 per API) would otherwise hold Produce and Fetch requests back for 5-20 ms once per
        rendering (measured with bench/console_scrape.py). A large family is formatted in
        slices of its samples, each slice as the same family, and the repeated ``# HELP`` and
        ``# TYPE`` lines are dropped: the text is byte for byte generate_latest's. Collectors
        hand out families built from copies (sorted lists, snapshots), so what changes between
        two slices is only how recent each one is."""
        parts: list[bytes] = []
        for family in self.registry.collect():
            samples = family.samples
            if len(samples) <= _RENDER_SLICE or any(
                s.name.endswith(_OM_SUFFIXES) for s in samples
            ):
                parts.append(generate_latest(_Families((family,))))
                await asyncio.sleep(0)
                continue
            for start in range(0, len(samples), _RENDER_SLICE):
                piece = copy.copy(family)
                piece.samples = samples[start : start + _RENDER_SLICE]
                text = generate_latest(_Families((piece,)))
                parts.append(text if start == 0 else text.split(b"\n", 2)[2])
                await asyncio.sleep(0)
        return b"".join(parts)

    async def _fresh_or_stale(self) -> ClusterSnapshot | None:
        """A fresh snapshot for /metrics; if the cluster does not answer, the last one."""
        try:
            return await self.source.snapshot(self.render_max_age_s)
        except (TimeoutError, KafkaError, OSError) as exc:
            log.warning("console: cluster snapshot failed: %s", exc)
            return self.source.latest

    async def _api(self, req: Request, parts: list[str], viewer: Viewer | None = None) -> Response:
        snap = await self._snapshot(viewer, self.metrics_max_age_s)
        match parts:
            case ["cluster"]:
                return _json(
                    {
                        "cluster_id": snap.cluster_id,
                        "controller": snap.controller,
                        "brokers": snap.brokers,
                        "taken_ms": snap.taken_ms,
                    }
                )
            case ["topics"]:
                return _json(list(snap.topics.values()))
            case ["topics", topic]:
                t = snap.topics.get(topic)
                if t is None:
                    return _json({"error": f"no topic {topic}"}, 404)
                configs = await self._topic_configs(viewer, topic)
                return _json({"topic": t, "configs": {k: c._asdict() for k, c in configs.items()}})
            case ["topics", topic, "messages"]:
                if viewer is not None and not viewer.topic(topic):
                    return _json({"error": f"no topic {topic}"}, 404)
                if viewer is not None and not viewer.topic(topic, AclOperation.READ):
                    return _json({"error": f"{viewer.user} may not read topic {topic}"}, 403)
                records, fmt, error = await self._browse(topic, req.query)
                if error:
                    return _json({"error": error}, 400)
                decoded = await self.schemas.decode([r.value for r in records])
                return _json(
                    [
                        {
                            "partition": r.partition,
                            "offset": r.offset,
                            "timestamp": r.timestamp,
                            "key": render_bytes(r.key, fmt) if r.key is not None else None,
                            "value": render_bytes(r.value, fmt) if r.value is not None else None,
                            "headers": [[k, render_bytes(v, fmt)] for k, v in r.headers],
                            **(
                                {}
                                if d is None
                                else {
                                    "value_schema_id": d.schema_id,
                                    "value_decoded": None if d.text is None else json.loads(d.text),
                                    "value_decode_error": d.error,
                                }
                            ),
                        }
                        for r, d in zip(records, decoded, strict=True)
                    ]
                )
            case ["groups"]:
                return _json(list(snap.groups.values()))
            case ["groups", group]:
                g = snap.groups.get(group)
                if g is None:
                    return _json({"error": f"no group {group}"}, 404)
                return _json(g)
            case ["groups", group, "history"]:
                if group not in snap.groups and viewer is not None:
                    return _json({"error": f"no group {group}"}, 404)
                hist = self.source.history
                keys = [tp for tp in hist.group_keys(group) if viewer is None or viewer.topic(tp[0])]
                series = {f"{t}-{p}": hist.series(group, t, p) for t, p in keys}
                return _json(
                    {
                        name: [[s.at_ms / 1000, s.lag] for s in samples]
                        for name, samples in series.items()
                    }
                )
        return _json({"error": "not found"}, 404)

    async def _browse(self, topic: str, query: dict[str, str]) -> tuple[list[Any], str, str | None]:
        fmt = query.get("format", "text")
        if fmt not in ("text", "json", "hex"):
            fmt = "text"
        try:
            partition = int(query.get("partition", "0"))
            limit = min(int(query.get("limit", "20") or 20), MAX_BROWSE)
            offset = query.get("offset", "").strip()
            stamp = query.get("timestamp", "").strip()
            timestamp_ms: int | None = None
            if stamp:
                if stamp.lstrip("-").isdigit():
                    timestamp_ms = int(stamp)
                else:
                    dt = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                    if dt.tzinfo is None:
                        dt = dt.replace(tzinfo=datetime.UTC)
                    timestamp_ms = int(dt.timestamp() * 1000)
            start = int(offset) if offset and timestamp_ms is None else None
        except ValueError as exc:
            return [], fmt, f"bad query: {exc}"
        records = await self.source.read(
            topic, partition, offset=start, timestamp_ms=timestamp_ms, limit=limit
        )
        return records, fmt, None

    async def _post(self, req: Request, parts: list[str], viewer: Viewer | None = None) -> Response:
        if req.headers.get("hx-request") != "true":
            return _text(403, "actions need the console page (HX-Request header)\n")
        form = req.form()
        match parts:
            case ["groups", group, "reset"]:
                topic = form.get("topic", "")
                if viewer is not None and not (
                    viewer.group(group, AclOperation.READ) and viewer.topic(topic, AclOperation.READ)
                ):
                    message = f"{viewer.user} may not reset group {group} on topic {topic}"
                    return self._page("flash.html", {"ok": False, "message": message}, 403)
                to: str | int = form.get("to", "earliest")
                if to not in ("earliest", "latest"):
                    try:
                        to = int(to)
                    except ValueError:
                        return self._page("flash.html", {"ok": False, "message": f"bad offset {to!r}"})
                try:
                    new = await self.source.reset_offsets(group, topic, to)
                except KafkaError as exc:
                    return self._page("flash.html", {"ok": False, "message": str(exc)})
                text = ", ".join(f"{tp.topic}-{tp.partition} → {o}" for tp, o in sorted(new.items()))
                return self._page(
                    "flash.html", {"ok": True, "message": f"committed {len(new)} offset(s): {text}"}
                )
            case ["groups", group, "delete"]:
                if viewer is not None and not viewer.group(group, AclOperation.DELETE):
                    message = f"{viewer.user} may not delete group {group}"
                    return self._page("flash.html", {"ok": False, "message": message}, 403)
                try:
                    await self.source.delete_group(group)
                except KafkaError as exc:
                    return self._page("flash.html", {"ok": False, "message": str(exc)})
                return self._page("flash.html", {"ok": True, "message": f"deleted group {group}"})
        return _text(404, "not found\n")

    # -- rendering ------------------------------------------------------------------------------

    def _page(self, template: str, context: dict[str, Any], status: int = 200) -> Response:
        body = self.env.get_template(template).render(viewer=_VIEWER.get(), **context)
        return Response(status, body.encode())

    def _static(self, name: str) -> Response:
        if "/" in name or name.startswith("."):
            return _text(404, "not found\n")
        suffix = name[name.rfind(".") :] if "." in name else ""
        ctype = _STATIC_TYPES.get(suffix)
        if ctype is None:
            return _text(404, "not found\n")
        try:
            data = resources.files("odradek.console").joinpath("static", name).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return _text(404, "not found\n")
        return Response(200, data, ctype, [("cache-control", "max-age=86400")])
