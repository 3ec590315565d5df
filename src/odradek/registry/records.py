"""The records of the ``_schemas`` topic, in Confluent Schema Registry's key/value JSON.

A Confluent registry (or Karapace) pointed at the same cluster reads what odradek writes and the
other way round. Keys are compact JSON with Confluent's property order; a key or value field that
is null or empty is left out (Jackson's ``NON_EMPTY``):

=============== ====================================================== ==================================================
keytype         key                                                    value
=============== ====================================================== ==================================================
SCHEMA          ``{"keytype":"SCHEMA","subject":s,"version":v,"magic":1}`` ``{"subject","version","id","schemaType"?,"references"?,"schema","deleted"}``; null = permanently deleted
CONFIG          ``{"keytype":"CONFIG","subject":s?,"magic":0}``          ``{"subject"?,"normalize"?,"compatibilityLevel"?}``; null = config removed
MODE            ``{"keytype":"MODE","subject":s?,"magic":0}``            ``{"subject"?,"mode":M}``; null = mode removed
DELETE_SUBJECT  ``{"keytype":"DELETE_SUBJECT","subject":s,"magic":0}``  ``{"subject":s,"version":v}``: versions <= v soft-deleted
NOOP            ``{"keytype":"NOOP","magic":0}``                        none (a marker written to learn the end offset)
=============== ====================================================== ==================================================

A key without ``subject`` (CONFIG, MODE) is the global one. ``schemaType`` is left out for AVRO
(Confluent's default). Decoding is lenient like Confluent's (unknown fields are ignored) and
raises ``ValueError`` for a record that is not a registry record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ConfigRecord",
    "DeleteSubjectRecord",
    "ModeRecord",
    "NoopRecord",
    "Reference",
    "SchemaRecord",
    "decode",
    "dumps",
]


def dumps(obj: Any) -> bytes:
    """Compact JSON, as Jackson writes it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema reference: the ``name`` the referring schema uses, and the subject/version."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaRecord:
    subject: str
    version: int
    id: int = -1
    schema: str = ""
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False
    tombstone: bool = False  # a null value: the version was deleted permanently

    def key(self) -> bytes:
        return dumps(
            {"keytype": "SCHEMA", "subject": self.subject, "version": self.version, "magic": 1}
        )

    def value(self) -> bytes | None:
        if self.tombstone:
            return None
        v: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            v["schemaType"] = self.schema_type
        if self.references:
            v["references"] = [r.to_json() for r in self.references]
        v["schema"] = self.schema
        v["deleted"] = self.deleted
        return dumps(v)


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    subject: str | None
    compatibility_level: str | None
    extra: dict[str, Any] = field(default_factory=dict)
    """Other fields of the value (``normalize`` ...); no level and no extra: a tombstone."""

    def key(self) -> bytes:
        return dumps(_subject_key("CONFIG", self.subject))

    def value(self) -> bytes | None:
        if self.compatibility_level is None and not self.extra:
            return None
        v: dict[str, Any] = {} if self.subject is None else {"subject": self.subject}
        v.update(self.extra)
        if self.compatibility_level is not None:
            v["compatibilityLevel"] = self.compatibility_level
        return dumps(v)


@dataclass(frozen=True, slots=True)
class ModeRecord:
    subject: str | None
    mode: str | None  # None: removed (a tombstone)

    def key(self) -> bytes:
        return dumps(_subject_key("MODE", self.subject))

    def value(self) -> bytes | None:
        if self.mode is None:
            return None
        v: dict[str, Any] = {} if self.subject is None else {"subject": self.subject}
        v["mode"] = self.mode
        return dumps(v)


@dataclass(frozen=True, slots=True)
class DeleteSubjectRecord:
    subject: str
    version: int

    def key(self) -> bytes:
        return dumps(_subject_key("DELETE_SUBJECT", self.subject))

    def value(self) -> bytes | None:
        return dumps({"subject": self.subject, "version": self.version})


@dataclass(frozen=True, slots=True)
class NoopRecord:
    def key(self) -> bytes:
        return dumps({"keytype": "NOOP", "magic": 0})

    def value(self) -> bytes | None:
        return None


Record = SchemaRecord | ConfigRecord | ModeRecord | DeleteSubjectRecord | NoopRecord


def _subject_key(keytype: str, subject: str | None) -> dict[str, Any]:
    key: dict[str, Any] = {"keytype": keytype}
    if subject:
        key["subject"] = subject
    key["magic"] = 0
    return key


def _refs(raw: Any) -> tuple[Reference, ...]:
    if not raw:
        return ()
    return tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in raw)


def decode(key: bytes | None, value: bytes | None) -> Record:
    """One ``_schemas`` record; ``ValueError`` when the key is not a registry key."""
    if key is None:
        raise ValueError("record without a key")
    try:
        k = json.loads(key)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"key is not JSON: {exc}") from None
    if not isinstance(k, dict):
        raise ValueError("key is not a JSON object")
    keytype = k.get("keytype")
    v: dict[str, Any] | None = None
    if value is not None:
        parsed = json.loads(value)
        if isinstance(parsed, dict):
            v = parsed
    subject = k.get("subject") or None
    if keytype == "SCHEMA":
        if subject is None and v is not None:
            subject = v.get("subject")
        version = int(k["version"])
        if v is None:
            return SchemaRecord(str(subject or ""), version, tombstone=True)
        return SchemaRecord(
            str(v.get("subject", subject) or ""),
            int(v.get("version", version)),
            int(v["id"]),
            str(v.get("schema", "")),
            str(v.get("schemaType") or "AVRO"),
            _refs(v.get("references")),
            bool(v.get("deleted", False)),
        )
    if keytype == "CONFIG":
        if v is None:
            return ConfigRecord(subject, None)
        level = v.get("compatibilityLevel")
        extra = {k2: x for k2, x in v.items() if k2 not in ("subject", "compatibilityLevel")}
        return ConfigRecord(subject, str(level) if level else None, extra)
    if keytype == "MODE":
        mode = v.get("mode") if v is not None else None
        return ModeRecord(subject, str(mode) if mode else None)
    if keytype == "DELETE_SUBJECT":
        if v is None:
            raise ValueError("DELETE_SUBJECT without a value")
        return DeleteSubjectRecord(str(v.get("subject", subject)), int(v["version"]))
    if keytype == "NOOP":
        return NoopRecord()
    raise ValueError(f"unknown keytype {keytype!r}")
