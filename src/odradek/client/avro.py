"""Avro by schema id: serializers in Confluent's wire format and a small registry client.

Wire format (Confluent's, read by every Confluent-compatible deserializer)::

    byte 0      magic 0
    bytes 1-4   schema id, big-endian signed int32
    bytes 5-    the Avro binary encoding of the value (no container, no schema)

A record may instead carry the id in a header (``__value_schema_id`` / ``__key_schema_id``:
magic 0 + the 4-byte id), its value then being the bare Avro encoding: ``AvroDeserializer.
decode_record`` reads both.

    from odradek.client import Producer
    from odradek.client.avro import AvroSerializer
    ser = AvroSerializer("http://127.0.0.1:8081", schema_text, topic="users")
    with Producer({"bootstrap.servers": "127.0.0.1:9092", "value.serializer": ser}) as p:
        p.send("users", {"name": "ann"}).result(10)

``AvroSerializer`` registers its schema under the subject on first use (``TopicNameStrategy``:
``<topic>-value`` or ``<topic>-key`` unless ``subject`` is given) and caches the id.
``AvroDeserializer`` fetches each writer schema by id once (ids are immutable, so the cache never
expires), with the schemas it references (Confluent's schema references: named types of other
subjects' versions), and resolves it against ``reader_schema`` when given (Avro schema resolution: records
written with an older compatible schema read with the newer one). Encoding and decoding are
``fastavro``'s.

``SchemaRegistryClient`` speaks Confluent's REST API with ``urllib``; a connection failure or a
5xx answer is retried (``retries`` times, 0.2 s doubling); then ``SchemaRegistryError`` names
the URL.
"""

from __future__ import annotations

import json
import ssl
import struct
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MAGIC_BYTE",
    "REGISTRY_CLIENT_KEYS",
    "AvroDeserializer",
    "AvroSerializer",
    "SchemaIdTranslator",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SerializationError",
    "frame",
    "inline_references",
    "parse_with_references",
    "referenced_schemas",
    "registry_error",
    "unframe",
]

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryError(Exception):
    """An error answer (``status``, Confluent ``error_code``) or an unreachable registry."""

    def __init__(self, message: str, status: int = -1, error_code: int = -1) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class SerializationError(Exception):
    """A value that cannot be encoded, or bytes that cannot be decoded (names the schema id)."""


def frame(schema_id: int, payload: bytes) -> bytes:
    """magic 0 + big-endian id + payload."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """(schema id, payload) of Confluent-framed bytes; ``SerializationError`` otherwise."""
    if len(data) < 5 or data[0] != MAGIC_BYTE:
        raise SerializationError(
            "not Confluent-framed Avro: expected magic byte 0 and a 4-byte schema id, got "
            f"{bytes(data[:5])!r}"
        )
    return int.from_bytes(data[1:5], "big", signed=True), memoryview(data)[5:]


CREDENTIAL_SOURCES = ("URL", "USER_INFO")
"""``basic.auth.credentials.source`` values (Confluent's ``SASL_INHERIT`` is not supported)."""

REGISTRY_CLIENT_KEYS = (
    "basic.auth.credentials.source",
    "basic.auth.user.info",
    "bearer.auth.token",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
)
"""The Confluent schema registry client settings ``SchemaRegistryClient(config=...)`` takes
(the Spark options and ``-X`` flags are these with ``schema.registry.`` in front)."""


def _authorization(conf: Mapping[str, str], url_user: tuple[str, str] | None) -> str | None:
    """The ``Authorization`` header value of ``conf`` (see ``SchemaRegistryClient``)."""
    import base64

    info = conf.get("basic.auth.user.info")
    token = conf.get("bearer.auth.token")
    source = conf.get("basic.auth.credentials.source", "USER_INFO" if info else "URL").upper()
    if source not in CREDENTIAL_SOURCES:
        raise ValueError(
            f"basic.auth.credentials.source must be one of {', '.join(CREDENTIAL_SOURCES)}, "
            f"got {source!r}"
        )
    user: tuple[str, str] | None = None
    if source == "USER_INFO":
        if not info or ":" not in info:
            raise ValueError(
                "basic.auth.credentials.source USER_INFO needs basic.auth.user.info "
                "as user:password"
            )
        name, _, password = info.partition(":")
        user = (name, password)
    elif url_user is not None:
        user = url_user
    if user is not None and token:
        raise ValueError("give basic auth credentials or bearer.auth.token, not both")
    if user is not None:
        raw = f"{user[0]}:{user[1]}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")
    if token:
        return f"Bearer {token}"
    return None


def _ssl_context(conf: Mapping[str, str], scheme: str) -> ssl.SSLContext | None:
    """The TLS context of an ``https`` registry: verified against ``ssl.ca.location`` (else the
    system's CAs), with the client certificate of ``ssl.certificate.location`` /
    ``ssl.key.location`` when given."""
    ca = conf.get("ssl.ca.location")
    cert = conf.get("ssl.certificate.location")
    key = conf.get("ssl.key.location")
    if scheme != "https":
        if ca or cert or key:
            raise ValueError("ssl.*.location settings need an https:// schema registry URL")
        return None
    if bool(cert) != bool(key) and not cert:
        raise ValueError("ssl.key.location needs ssl.certificate.location")
    context = ssl.create_default_context(cafile=ca or None)
    if cert:
        context.load_cert_chain(cert, key or None)
    return context


class SchemaRegistryClient:
    """Confluent's REST API over ``urllib``. ``config`` takes the Confluent client's keys:

    * ``basic.auth.credentials.source``: ``USER_INFO`` (``basic.auth.user.info``, the default
      when that key is given) or ``URL`` (the ``user:password@`` of ``url``, the default
      otherwise); the credentials go as ``Authorization: Basic base64(user:password)``;
    * ``basic.auth.user.info``: ``user:password``;
    * ``bearer.auth.token``: sent as ``Authorization: Bearer <token>`` (not with basic auth);
    * ``ssl.ca.location`` (PEM CA file an ``https`` registry is verified with),
      ``ssl.certificate.location`` / ``ssl.key.location`` (PEM client certificate and key).

    ``url`` may carry ``user:password@``; it is never shown in errors (``self.url`` has it
    removed). A 401 answer raises ``SchemaRegistryError`` naming 401 and whether credentials
    were sent."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        config: Mapping[str, str] | None = None,
    ) -> None:
        conf = {k: str(v) for k, v in (config or {}).items()}
        unknown = sorted(set(conf) - set(REGISTRY_CLIENT_KEYS))
        if unknown:
            raise ValueError(
                f"unknown schema registry client setting(s) {', '.join(unknown)} "
                f"(known: {', '.join(REGISTRY_CLIENT_KEYS)})"
            )
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        url_user = (
            (urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or ""))
            if parts.username is not None
            else None
        )
        netloc = parts.hostname or ""
        if ":" in netloc:  # an IPv6 literal
            netloc = f"[{netloc}]"
        if parts.port is not None:
            netloc += f":{parts.port}"
        self.url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        self.timeout = timeout
        self.retries = retries
        self._headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        authorization = _authorization(conf, url_user)
        if authorization is not None:
            self._headers["Authorization"] = authorization
        self._context = _ssl_context(conf, parts.scheme)
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, str] = {}
        self._versions: dict[tuple[str, int], dict[str, Any]] = {}

    @property
    def sends_credentials(self) -> bool:
        return "Authorization" in self._headers

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        delay = 0.2
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(
                self.url + path, data=data, method=method, headers=self._headers
            )
            try:
                with urllib.request.urlopen(req, timeout=self.timeout, context=self._context) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError as exc:
                message, code = registry_error(exc.read())
                if exc.code == 401:
                    sent = (
                        "the credentials sent were refused"
                        if self.sends_credentials
                        else "no credentials were sent: set basic.auth.user.info "
                        "(or bearer.auth.token)"
                    )
                    raise SchemaRegistryError(
                        f"{method} {self.url}{path}: 401 Unauthorized ({sent})", 401, code
                    ) from None
                if exc.code < 500 or attempt == self.retries:
                    raise SchemaRegistryError(
                        f"{method} {self.url}{path}: {message}", exc.code, code
                    ) from None
            except (urllib.error.URLError, OSError) as exc:
                if attempt == self.retries:
                    raise SchemaRegistryError(
                        f"schema registry {self.url} unreachable: {exc}"
                    ) from None
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """The id of ``schema`` under ``subject``, registering it if needed (cached)."""
        key = (subject, schema)
        schema_id = self._ids.get(key)
        if schema_id is None:
            body: dict[str, Any] = {"schema": schema}
            if schema_type != "AVRO":
                body["schemaType"] = schema_type
            quoted = urllib.parse.quote(subject, safe="")
            schema_id = int(self._call("POST", f"/subjects/{quoted}/versions", body)["id"])
            self._ids[key] = schema_id
        return schema_id

    def lookup(self, subject: str, schema: str) -> int:
        """The id of an already registered ``schema`` (cached); 40401/40403 when it is not."""
        key = (subject, schema)
        schema_id = self._ids.get(key)
        if schema_id is None:
            quoted = urllib.parse.quote(subject, safe="")
            schema_id = int(self._call("POST", f"/subjects/{quoted}", {"schema": schema})["id"])
            self._ids[key] = schema_id
        return schema_id

    def latest(self, subject: str, *, self_contained: bool = False) -> tuple[int, str]:
        """(id, schema text) of the subject's latest version (not cached: it changes).
        ``self_contained``: an Avro schema with references comes back with the named types it
        references defined inline, where first used (``inline_references``), so that it parses
        alone (a reader schema handed to other processes)."""
        quoted = urllib.parse.quote(subject, safe="")
        answer = self._call("GET", f"/subjects/{quoted}/versions/latest")
        self._schemas.setdefault(int(answer["id"]), str(answer["schema"]))
        text = str(answer["schema"])
        if self_contained and answer.get("references"):
            deps = referenced_schemas(self, answer["references"])
            text = json.dumps(inline_references(json.loads(text), deps))
        return int(answer["id"]), text

    def get_version(self, subject: str, version: int) -> dict[str, Any]:
        """``GET /subjects/{subject}/versions/{version}`` (cached: a version never changes)."""
        key = (subject, int(version))
        found = self._versions.get(key)
        if found is None:
            quoted = urllib.parse.quote(subject, safe="")
            found = self._versions[key] = dict(
                self._call("GET", f"/subjects/{quoted}/versions/{int(version)}")
            )
        return found

    def get_schema_full(self, schema_id: int) -> dict[str, Any]:
        """``GET /schemas/ids/{id}``: ``{"schema", "schemaType"?, "references"?}`` (not cached)."""
        return dict(self._call("GET", f"/schemas/ids/{schema_id}"))

    def register_full(self, subject: str, body: dict[str, Any]) -> int:
        """``POST /subjects/{subject}/versions`` with a whole body (schema, schemaType,
        references); the id."""
        quoted = urllib.parse.quote(subject, safe="")
        return int(self._call("POST", f"/subjects/{quoted}/versions", body)["id"])

    def get_schema(self, schema_id: int) -> str:
        """The schema text of ``schema_id`` (cached: ids never change meaning)."""
        text = self._schemas.get(schema_id)
        if text is None:
            text = str(self._call("GET", f"/schemas/ids/{schema_id}")["schema"])
            self._schemas[schema_id] = text
        return text


def registry_error(body: bytes) -> tuple[str, int]:
    """(message, error code) of a registry's error answer: Confluent's JSON ``{"error_code",
    "message"}``, or, when the body is not that, its text and -1."""
    try:
        err = json.loads(body)
        return str(err.get("message")), int(err.get("error_code", -1))
    except (ValueError, AttributeError):
        return body.decode("utf-8", "replace"), -1


_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))


def referenced_schemas(
    client: SchemaRegistryClient, references: Iterable[Mapping[str, Any]]
) -> list[Any]:
    """The parsed JSON of every schema ``references`` (Confluent's ``[{"name", "subject",
    "version"}]``) names, with theirs, depth first: each one after those it references, each
    (subject, version) once. Parsing them in this order into one fastavro ``named_schemas``
    defines every named type before it is used."""
    out: list[Any] = []
    seen: set[tuple[str, int]] = set()

    def walk(refs: Iterable[Mapping[str, Any]]) -> None:
        for ref in refs:
            key = (str(ref["subject"]), int(ref["version"]))
            if key in seen:
                continue
            seen.add(key)
            answer = client.get_version(*key)
            walk(answer.get("references") or ())
            out.append(json.loads(str(answer["schema"])))

    walk(references)
    return out


def parse_with_references(client: SchemaRegistryClient, answer: Mapping[str, Any]) -> Any:
    """The fastavro-parsed Avro schema of a registry ``answer`` (``{"schema", "references"?}``,
    as ``GET /schemas/ids/{id}`` or a subject version gives it): the schemas it references,
    with theirs (``referenced_schemas``), parsed first into the same ``named_schemas``, so
    every named type they define is known where ``answer["schema"]`` uses it."""
    import fastavro

    named: dict[str, Any] = {}
    for dep in referenced_schemas(client, answer.get("references") or ()):
        fastavro.parse_schema(dep, named_schemas=named)
    return fastavro.parse_schema(json.loads(str(answer["schema"])), named_schemas=named)


def _full_name(schema: Mapping[str, Any], namespace: str) -> tuple[str, str]:
    """(full name, namespace for its children) of a named type's definition."""
    name = str(schema.get("name", ""))
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    ns = schema.get("namespace", namespace) or ""
    return (f"{ns}.{name}" if ns else name), ns


def inline_references(schema: Any, referenced: Iterable[Any]) -> Any:
    """``schema`` (parsed JSON) with each named type of ``referenced`` (parsed JSON, as
    ``referenced_schemas`` returns) defined where it is first used and referred to by its full
    name after that: one Avro schema that parses alone. An inlined definition keeps its own
    namespace (``""`` when it has none), so that its full name does not change."""
    defs: dict[str, Any] = {}
    for dep in referenced:
        if isinstance(dep, dict) and dep.get("type") in ("record", "error", "enum", "fixed"):
            defs[_full_name(dep, "")[0]] = dep
    defined: set[str] = set()

    def walk(node: Any, ns: str) -> Any:
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return node
            candidates = [f"{ns}.{node}", node] if ns and "." not in node else [node]
            for full in candidates:
                if full in defined:
                    return full
            for full in candidates:
                if full in defs:
                    definition = dict(defs[full])
                    if "." not in str(definition.get("name", "")):
                        definition["namespace"] = definition.get("namespace") or ""
                    return walk(definition, "")
            return node
        if isinstance(node, list):
            return [walk(b, ns) for b in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        out = dict(node)
        if kind in ("record", "error", "enum", "fixed"):
            full, child_ns = _full_name(node, ns)
            defined.add(full)
            if kind in ("record", "error"):
                out["fields"] = [
                    {**f, "type": walk(f["type"], child_ns)} for f in node.get("fields", ())
                ]
            return out
        if kind == "array":
            out["items"] = walk(node["items"], ns)
        elif kind == "map":
            out["values"] = walk(node["values"], ns)
        elif isinstance(kind, (str, list, dict)):
            out["type"] = walk(kind, ns)
        return out

    return walk(schema, "")


def _client(registry: str | SchemaRegistryClient) -> SchemaRegistryClient:
    return (
        registry if isinstance(registry, SchemaRegistryClient) else SchemaRegistryClient(registry)
    )


def _schema_text(schema: str | Mapping[str, Any] | list[Any]) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema)


class AvroSerializer:
    """``ser(value) -> bytes``: ``value`` (dicts, lists, scalars as fastavro takes them)
    encoded with ``schema`` and framed with its id."""

    def __init__(
        self,
        registry: str | SchemaRegistryClient,
        schema: str | Mapping[str, Any] | list[Any],
        *,
        topic: str | None = None,
        subject: str | None = None,
        is_key: bool = False,
        auto_register: bool = True,
    ) -> None:
        import fastavro

        if subject is None:
            if topic is None:
                raise ValueError("AvroSerializer needs a topic (TopicNameStrategy) or a subject")
            subject = f"{topic}-{'key' if is_key else 'value'}"
        self.registry = _client(registry)
        self.subject = subject
        self.schema = _schema_text(schema)
        self.auto_register = auto_register
        self._parsed = fastavro.parse_schema(json.loads(self.schema))
        self._writer = fastavro.schemaless_writer
        self._id: int | None = None

    @property
    def schema_id(self) -> int:
        if self._id is None:
            if self.auto_register:
                self._id = self.registry.register(self.subject, self.schema)
            else:
                self._id = self.registry.lookup(self.subject, self.schema)
        return self._id

    def __call__(self, value: Any) -> bytes:
        import io

        schema_id = self.schema_id
        buf = io.BytesIO()
        buf.write(_HEADER.pack(MAGIC_BYTE, schema_id))
        try:
            self._writer(buf, self._parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(
                f"value does not match schema id {schema_id} ({self.subject}): {exc}"
            ) from None
        return buf.getvalue()


class AvroDeserializer:
    """``de(data) -> value``: reads the id from the frame, fetches that writer schema once and
    decodes, resolving to ``reader_schema`` when given. ``named_types``: a value of a union that
    is a record, enum or fixed comes as ``(full name, value)`` (which branch it is)."""

    def __init__(
        self,
        registry: str | SchemaRegistryClient,
        reader_schema: str | Mapping[str, Any] | list[Any] | None = None,
        *,
        is_key: bool = False,
        named_types: bool = False,
    ) -> None:
        import fastavro

        self.registry = _client(registry)
        self.header = "__key_schema_id" if is_key else "__value_schema_id"
        # fastavro's return_named_type: a union's record/enum/fixed value as (full name, value)
        self._named_types = named_types
        self._reader = (
            None
            if reader_schema is None
            else fastavro.parse_schema(json.loads(_schema_text(reader_schema)))
        )
        self._writers: dict[int, Any] = {}
        self._read = fastavro.schemaless_reader

    def _writer(self, schema_id: int, where: str) -> Any:
        """The parsed writer schema of ``schema_id``, the schemas it references parsed first
        (into the same named types)."""
        parsed = self._writers.get(schema_id)
        if parsed is None:
            try:
                answer = self.registry.get_schema_full(schema_id)
                self.registry._schemas.setdefault(schema_id, str(answer["schema"]))
                parsed = parse_with_references(self.registry, answer)
            except SchemaRegistryError as exc:
                if exc.error_code == 40403:
                    raise SerializationError(
                        f"unknown schema id {schema_id}{where}: {self.registry.url} does not know it"
                    ) from None
                raise
            self._writers[schema_id] = parsed
        return parsed

    def decode(self, data: bytes, schema_id: int | None = None, where: str = "") -> Any:
        """The value of ``data``: framed, or bare when ``schema_id`` (from a header) is given.
        ``where`` (e.g. " at topic/partition/offset") is added to error messages."""
        import io

        if schema_id is None:
            try:
                schema_id, payload = unframe(data)
            except SerializationError as exc:
                raise SerializationError(f"{exc}{where}") from None
        else:
            payload = memoryview(data)
        writer = self._writer(schema_id, where)
        try:
            return self._read(
                io.BytesIO(payload), writer, self._reader, return_named_type=self._named_types
            )
        except Exception as exc:  # fastavro raises many types on corrupt input
            raise SerializationError(
                f"cannot decode with schema id {schema_id}{where}: {exc}"
            ) from None

    def __call__(self, data: bytes) -> Any:
        return self.decode(data)

    def decode_record(self, record: Any) -> Any:
        """The value of a ``ConsumerRecord``, the id taken from its ``__value_schema_id`` header
        (``__key_schema_id`` for a key deserializer) when present, else from the frame."""
        where = f" at {record.topic}/{record.partition}/{record.offset}"
        data = record.key if self.header == "__key_schema_id" else record.value
        headers: Iterable[tuple[str, bytes | None]] = record.headers or ()
        for name, value in headers:
            if name == self.header and value is not None:
                try:
                    schema_id, _rest = unframe(value)
                except SerializationError as exc:
                    raise SerializationError(f"header {name}: {exc}{where}") from None
                return self.decode(data, schema_id, where)
        return self.decode(data, None, where)


class SchemaIdTranslator:
    """Rewrites the schema id in Confluent-framed values from a ``source`` registry's id to the
    ``target`` registry's id of the same schema, registering it there (under ``subject``) on
    first sight: what mirroring needs so that consumers of the target decode with the target's
    registry. Any schema type (the value after the 5 bytes is copied as is; Protobuf's message
    indexes follow the id and are copied too). Ids are cached per (source id, subject). Schemas
    with references are not translated (``SerializationError``)."""

    def __init__(
        self, source: str | SchemaRegistryClient, target: str | SchemaRegistryClient
    ) -> None:
        self.source = _client(source)
        self.target = _client(target)
        self._ids: dict[tuple[int, str], int] = {}

    def target_id(self, source_id: int, subject: str) -> int:
        key = (source_id, subject)
        found = self._ids.get(key)
        if found is None:
            schema = self.source.get_schema_full(source_id)
            if schema.get("references"):
                raise SerializationError(
                    f"schema id {source_id} has references: not translated to {self.target.url}"
                )
            body = {"schema": schema["schema"]}
            if schema.get("schemaType", "AVRO") != "AVRO":
                body["schemaType"] = schema["schemaType"]
            found = self._ids[key] = self.target.register_full(subject, body)
        return found

    def __call__(self, data: bytes, subject: str) -> bytes:
        source_id, payload = unframe(data)
        return frame(self.target_id(source_id, subject), bytes(payload))
