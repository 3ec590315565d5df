"""What the console shows of a schema registry, read through Confluent's REST API.

``SchemaSource(url)`` takes the registry's URL, or a callable returning it (None while there is
none: inside a broker the registry starts after the console, and the broker hands the console
``ConsoleHost.schema_registry_url``). Every call is a blocking ``SchemaRegistryClient`` request
run in a worker thread, so the event loop (the broker's, when the registry is the broker's own)
keeps serving, including the registry's own answer.

* ``subjects()``: each subject's latest version, id, type and compatibility level, and the
  global level;
* ``subject(s)``: the versions of one subject, and its level;
* ``diff(s, a, b)``: a unified diff of versions ``a`` and ``b`` (schemas pretty-printed as JSON
  when they parse as JSON, so that a diff shows fields, not one long line);
* ``decode(records)``: for each record whose value is Confluent-framed (byte 0 = 0, 4-byte
  big-endian id) the id and, when its schema is Avro, the decoded value as JSON text (or the
  reason it could not be decoded). Writer schemas are cached by id (ids never change meaning).
"""

from __future__ import annotations

import asyncio
import difflib
import io
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.client.avro import (
    CONTENT_TYPE,
    SchemaRegistryClient,
    SchemaRegistryError,
    parse_with_references,
    registry_error,
)

__all__ = ["DecodedValue", "SchemaSource", "SubjectView", "pretty_schema"]


@dataclass(frozen=True)
class SubjectView:
    subject: str
    latest_version: int
    latest_id: int
    schema_type: str
    compatibility: str


@dataclass(frozen=True)
class DecodedValue:
    """The schema id of a framed value, and its decoded value (JSON) or why not."""

    schema_id: int
    text: str | None
    error: str | None = None


def pretty_schema(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text  # Protobuf


def _q(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


class _HostRegistryClient(SchemaRegistryClient):
    """A registry client with extra request headers (the broker's own registry wants its
    process's internal bearer token when it authenticates) and a TLS context (that registry's
    own HTTPS listener). One try per call: the console shows an error rather than wait."""

    def __init__(
        self, url: str, headers: dict[str, str], ssl_context: ssl.SSLContext | None
    ) -> None:
        super().__init__(url, timeout=5.0, retries=0)
        self.headers = headers
        self.ssl_context = ssl_context

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE, **self.headers}
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.ssl_context) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            message, code = registry_error(exc.read())
            raise SchemaRegistryError(f"{method} {self.url}{path}: {message}", exc.code, code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise SchemaRegistryError(f"schema registry {self.url} unreachable: {exc}") from None


class SchemaSource:
    """``headers`` and ``ssl_context``, when given, go with every request (inside a broker:
    its internal token and a context for its own registry's HTTPS listener). ``config``: the
    registry client's credentials and TLS settings (``SchemaRegistryClient``'s keys, e.g.
    ``basic.auth.user.info``), for a registry elsewhere (``odradek console``)."""

    def __init__(
        self,
        url: str | Callable[[], str | None] | None,
        headers: dict[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        self._url = url
        self._headers = headers
        self._ssl_context = ssl_context
        self._config = dict(config or {})
        self._client: SchemaRegistryClient | None = None
        self._client_url: str | None = None
        self._writers: dict[int, tuple[str, Any]] = {}  # id -> (schema type, parsed Avro or None)

    @property
    def url(self) -> str | None:
        return self._url() if callable(self._url) else self._url

    def client(self) -> SchemaRegistryClient | None:
        url = self.url
        if not url:
            return None
        if self._client is None or self._client_url != url:
            self._client_url = url
            if self._headers is not None or (url.startswith("https:") and not self._config):
                self._client = _HostRegistryClient(url, self._headers or {}, self._ssl_context)
            else:
                self._client = SchemaRegistryClient(
                    url, timeout=5.0, retries=1, config=self._config
                )
        return self._client

    async def _get(self, path: str) -> Any:
        client = self.client()
        if client is None:
            raise SchemaRegistryError("no schema registry: set schema.registry.listeners")
        return await asyncio.to_thread(client._call, "GET", path)

    async def subjects(self) -> tuple[str, list[SubjectView]]:
        """(global compatibility level, every subject's latest version)."""
        level = str((await self._get("/config"))["compatibilityLevel"])
        out = []
        for subject in sorted(await self._get("/subjects")):
            latest = await self._get(f"/subjects/{_q(subject)}/versions/latest")
            out.append(SubjectView(subject, int(latest["version"]), int(latest["id"]),
                                   str(latest.get("schemaType", "AVRO")), await self.level(subject)))
        return level, out

    async def level(self, subject: str) -> str:
        cfg = await self._get(f"/config/{_q(subject)}?defaultToGlobal=true")
        return str(cfg["compatibilityLevel"])

    async def subject(self, subject: str) -> tuple[str, list[dict[str, Any]]]:
        """(compatibility level, every version: {subject, version, id, schema, schemaType?, references?})."""
        versions = await self._get(f"/subjects/{_q(subject)}/versions")
        out = [await self._get(f"/subjects/{_q(subject)}/versions/{v}") for v in versions]
        return await self.level(subject), out

    async def diff(self, subject: str, a: int, b: int) -> str:
        va = await self._get(f"/subjects/{_q(subject)}/versions/{a}")
        vb = await self._get(f"/subjects/{_q(subject)}/versions/{b}")
        lines = difflib.unified_diff(
            pretty_schema(str(va["schema"])).splitlines(), pretty_schema(str(vb["schema"])).splitlines(),
            f"{subject} version {a} (id {va['id']})", f"{subject} version {b} (id {vb['id']})", lineterm="")
        return "\n".join(lines)

    # -- the message browser ---------------------------------------------------------------------
    async def decode(self, values: Sequence[bytes | None]) -> list[DecodedValue | None]:
        """For each value: None when it is not framed (or there is no registry), else its id and
        decoded value."""
        if self.client() is None or not any(_framed(v) is not None for v in values):
            return [None] * len(values)
        return await asyncio.to_thread(self._decode, values)

    def _decode(self, values: Sequence[bytes | None]) -> list[DecodedValue | None]:
        return [None if (sid := _framed(v)) is None or v is None else self._decode_one(sid, v) for v in values]

    def _decode_one(self, schema_id: int, data: bytes) -> DecodedValue:
        import fastavro

        try:
            schema_type, parsed = self._writer(schema_id)
        except SchemaRegistryError as exc:
            return DecodedValue(schema_id, None, str(exc))
        if parsed is None:
            return DecodedValue(schema_id, None, f"{schema_type} schema: not decoded here")
        try:
            value = fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, None)
        except Exception as exc:  # fastavro raises many types on bytes that do not fit
            return DecodedValue(schema_id, None, f"does not decode with schema id {schema_id}: {exc}")
        return DecodedValue(schema_id, json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable))

    def _writer(self, schema_id: int) -> tuple[str, Any]:
        found = self._writers.get(schema_id)
        if found is None:
            client = self.client()
            assert client is not None
            answer = client.get_schema_full(schema_id)
            schema_type = str(answer.get("schemaType", "AVRO"))
            parsed = None
            if schema_type == "AVRO":
                parsed = parse_with_references(client, answer)  # references at every depth
            found = self._writers[schema_id] = (schema_type, parsed)
        return found


def _framed(data: bytes | None) -> int | None:
    if data is None or len(data) < 5 or data[0] != 0:
        return None
    return int.from_bytes(data[1:5], "big", signed=True)


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    return str(v)
