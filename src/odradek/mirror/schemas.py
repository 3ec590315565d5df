"""Schema-aware mirroring: Confluent-framed keys and values get the target registry's id.

A record's key or value is *Confluent-framed* when it is at least 5 bytes long and its first byte
is the magic 0; bytes 1-4 are then the schema id (big-endian int32) in the source cluster's
registry. ``SchemaIdRewriter`` maps each source id to the id of the same schema in the target's
registry and rewrites those 4 bytes; the rest of the bytes (the Avro body, Protobuf message
indexes) is copied unchanged. The header-carried ids ``__value_schema_id`` / ``__key_schema_id``
(magic 0 + id) are rewritten the same way.

Mapping a source id (``resolve``), once per id for the life of the process (ids never change
meaning): ``GET /schemas/ids/{id}/versions`` on the source names every (subject, version) the
schema is registered under; the schema of each is registered under the *same subject* on the
target, its references first (each referenced (subject, version) registered on the target the
same way, recursively, and the reference rewritten to the target's version of it). A schema
registered under no live subject is registered under the record's ``TopicNameStrategy`` subject
(``<source topic>-value`` / ``-key``).

Failures:

* a source id the source registry does not know (40403) is ``UnknownSchemaId``: the flow logs it
  with topic/partition/offset, counts it and copies that key/value unchanged (never dropped);
* any other registry failure (unreachable, 5xx, a schema the target refuses as incompatible)
  raises ``SchemaRegistryError`` before anything of the batch is written: the flow holds the
  batch back (rewinds to it) and tries again after a backoff, so no record is copied with an
  untranslated id.

Registry calls are blocking (``SchemaRegistryClient``'s urllib): ``prepare`` runs them in a
thread, once per new id, so the copy loop only does dictionary lookups.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Iterable
from typing import Any

from odradek.client.avro import SchemaRegistryClient, SchemaRegistryError

__all__ = ["HEADER_IDS", "SchemaIdRewriter", "UnknownSchemaId", "framed_id"]

MAGIC = 0
HEADER_IDS = ("__value_schema_id", "__key_schema_id")
_UNKNOWN_SCHEMA = 40403
_UNKNOWN_SUBJECT = 40401
_UNKNOWN_VERSION = 40402


class UnknownSchemaId(LookupError):
    """A framed id the source registry does not know."""

    def __init__(self, schema_id: int, url: str) -> None:
        super().__init__(f"schema id {schema_id} is not in the source registry {url}")
        self.schema_id = schema_id


def framed_id(data: bytes | None) -> int | None:
    """The schema id of Confluent-framed bytes, else None."""
    if data is None or len(data) < 5 or data[0] != MAGIC:
        return None
    return int.from_bytes(data[1:5], "big", signed=True)


def _reframe(data: bytes, schema_id: int) -> bytes:
    return bytes((MAGIC,)) + schema_id.to_bytes(4, "big", signed=True) + bytes(data[5:])


class SchemaIdRewriter:
    """Maps source schema ids to target ids (registering on the target) and rewrites framing.

    Invariant: ``_ids`` only holds ids whose schema (and references) is registered on the
    target under every subject it has on the source; ``_unknown`` the ids last found missing on
    the source (looked up again by the next ``prepare`` that meets them: a source registry that
    is catching up may know them later)."""

    def __init__(self, source: str | SchemaRegistryClient, target: str | SchemaRegistryClient) -> None:
        self.source = source if isinstance(source, SchemaRegistryClient) else SchemaRegistryClient(source)
        self.target = target if isinstance(target, SchemaRegistryClient) else SchemaRegistryClient(target)
        self._ids: dict[int, int] = {}
        self._unknown: set[int] = set()
        self._versions: dict[tuple[str, int], tuple[int, int]] = {}  # (subject, source version) -> (target id, version)
        self.translated = 0  # keys/values rewritten
        self.registered = 0  # source ids registered on the target

    # -- the copy loop's side: no I/O ----------------------------------------------------------
    def ids_of(self, records: Iterable[Any]) -> dict[int, str]:
        """The framed ids of ``records`` (keys, values, id headers) not yet mapped, each with a
        fallback subject (TopicNameStrategy of the first record that carries it)."""
        out: dict[int, str] = {}
        for r in records:
            for data, kind in ((r.value, "value"), (r.key, "key")):
                sid = framed_id(data)
                if sid is not None and sid not in self._ids and sid not in out:
                    out[sid] = f"{r.topic}-{kind}"
            for name, hv in r.headers or ():
                sid = framed_id(hv) if name in HEADER_IDS else None
                if sid is not None and sid not in self._ids and sid not in out:
                    out[sid] = f"{r.topic}-{'key' if name == '__key_schema_id' else 'value'}"
        return out

    def rewrite(self, data: bytes | None) -> bytes | None:
        """``data`` with the target's id; unchanged when not framed. ``UnknownSchemaId`` for an
        id ``prepare`` found missing on the source."""
        sid = framed_id(data)
        if sid is None or data is None:
            return data
        target = self._ids.get(sid)
        if target is None:
            raise UnknownSchemaId(sid, self.source.url)
        self.translated += 1
        return data if target == sid else _reframe(data, target)

    def rewrite_headers(self, headers: list[tuple[str, bytes | None]] | None) -> list[tuple[str, bytes | None]] | None:
        if not headers or not any(name in HEADER_IDS for name, _ in headers):
            return headers
        return [(name, self.rewrite(v) if name in HEADER_IDS else v) for name, v in headers]

    # -- registry side ---------------------------------------------------------------------------
    async def prepare(self, wanted: dict[int, str]) -> None:
        """Map every id of ``wanted`` (id -> fallback subject), in a thread. Ids unknown to the
        source are left unmapped (``rewrite`` raises ``UnknownSchemaId`` for them)."""
        if wanted:
            await asyncio.to_thread(self._prepare, wanted)

    def _prepare(self, wanted: dict[int, str]) -> None:
        for sid, subject in wanted.items():
            try:
                self._ids[sid] = self.resolve(sid, subject)
                self._unknown.discard(sid)
            except UnknownSchemaId:
                self._unknown.add(sid)

    def resolve(self, source_id: int, fallback_subject: str) -> int:
        """The target's id of source schema ``source_id``, registering it (blocking)."""
        try:
            pairs = self.source._call("GET", f"/schemas/ids/{source_id}/versions")
        except SchemaRegistryError as exc:
            if exc.error_code == _UNKNOWN_SCHEMA or exc.status == 404:
                raise UnknownSchemaId(source_id, self.source.url) from None
            raise
        target_id: int | None = None
        for pair in pairs:
            target_id = self._register_version(str(pair["subject"]), int(pair["version"]))[0]
        if target_id is None:  # registered under no live subject: the topic's subject
            body = self.source.get_schema_full(source_id)
            target_id = self.target.register_full(fallback_subject, self._target_body(body))
        self.registered += 1
        return target_id

    def _register_version(self, subject: str, version: int) -> tuple[int, int]:
        """(target id, target version) of source ``subject`` version ``version``."""
        quoted = urllib.parse.quote(subject, safe="")
        found = self._versions.get((subject, version))
        if found is None:
            answer = self.source._call("GET", f"/subjects/{quoted}/versions/{version}")
            body = self._target_body(answer)
            target_id = self.target.register_full(subject, body)
            looked = self.target._call("POST", f"/subjects/{quoted}", body)
            found = self._versions[(subject, version)] = (target_id, int(looked["version"]))
        return found

    def _target_body(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A registration body for the target: the schema, its type, and its references with
        each referenced version registered on the target first (the target's version number)."""
        body: dict[str, Any] = {"schema": answer["schema"]}
        if answer.get("schemaType", "AVRO") != "AVRO":
            body["schemaType"] = answer["schemaType"]
        refs = []
        for ref in answer.get("references") or ():
            _id, version = self._register_version(str(ref["subject"]), int(ref["version"]))
            refs.append({"name": ref["name"], "subject": ref["subject"], "version": version})
        if refs:
            body["references"] = refs
        return body
