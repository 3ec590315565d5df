"""The registry's in-memory state, built only by replaying ``_schemas`` records in offset order.

Pure: ``apply(record)`` changes the state, nothing else does; the store replays the topic from
its start at boot and every record it reads afterwards (its own writes included), so every node
holds the same state at the same offset.

Invariants:

* ``subjects[s][v]`` is the latest SCHEMA value of key (s, v); a null value (permanent delete)
  removes it; DELETE_SUBJECT (s, v) marks every version <= v of s deleted (soft).
* ``schemas[id]`` is the schema text, type and references of id while at least one version of
  any subject holds it (``users[id]``); ids are global: one text (with its type and references)
  has one id in every subject.
* ``max_id`` is the highest id any replayed SCHEMA value carried, kept after permanent deletes,
  so ids are never handed out twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .records import (
    ConfigRecord,
    DeleteSubjectRecord,
    ModeRecord,
    NoopRecord,
    Record,
    Reference,
    SchemaRecord,
)

__all__ = ["RegistryState", "StoredSchema"]


@dataclass(frozen=True, slots=True)
class StoredSchema:
    schema: str
    schema_type: str
    references: tuple[Reference, ...]


@dataclass
class RegistryState:
    subjects: dict[str, dict[int, SchemaRecord]] = field(default_factory=dict)
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    users: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    """Compatibility level per subject (None: the global one)."""
    config_extras: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    """Other config fields kept per subject (``normalize``, and whatever Confluent wrote)."""
    modes: dict[str | None, str] = field(default_factory=dict)
    by_content: dict[StoredSchema, int] = field(default_factory=dict)
    """The inverse of ``schemas`` (the lowest id when an import gave one text several ids)."""
    max_id: int = 0
    applied: int = 0
    """The offset after the last applied record (the next one to read)."""

    def apply(self, record: Record) -> None:
        if isinstance(record, SchemaRecord):
            self._apply_schema(record)
        elif isinstance(record, DeleteSubjectRecord):
            versions = self.subjects.get(record.subject, {})
            for v, rec in list(versions.items()):
                if v <= record.version and not rec.deleted:
                    versions[v] = replace(rec, deleted=True)
        elif isinstance(record, ConfigRecord):
            if record.compatibility_level is None:
                self.configs.pop(record.subject, None)
            else:
                self.configs[record.subject] = record.compatibility_level
            if record.extra:
                self.config_extras[record.subject] = dict(record.extra)
            else:
                self.config_extras.pop(record.subject, None)
        elif isinstance(record, ModeRecord):
            if record.mode is None:
                self.modes.pop(record.subject, None)
            else:
                self.modes[record.subject] = record.mode
        elif isinstance(record, NoopRecord):
            pass

    def _apply_schema(self, record: SchemaRecord) -> None:
        versions = self.subjects.setdefault(record.subject, {})
        old = versions.get(record.version)
        if old is not None:
            self._release(old.id, record.subject, record.version)
        if record.tombstone:
            versions.pop(record.version, None)
            if not versions:
                del self.subjects[record.subject]
            return
        versions[record.version] = record
        self.max_id = max(self.max_id, record.id)
        self.users.setdefault(record.id, set()).add((record.subject, record.version))
        if record.id not in self.schemas:
            stored = StoredSchema(record.schema, record.schema_type, record.references)
            self.schemas[record.id] = stored
            if self.by_content.get(stored, record.id) >= record.id:
                self.by_content[stored] = record.id

    def _release(self, schema_id: int, subject: str, version: int) -> None:
        users = self.users.get(schema_id)
        if users is None:
            return
        users.discard((subject, version))
        if not users:
            del self.users[schema_id]
            stored = self.schemas.pop(schema_id, None)
            if stored is not None and self.by_content.get(stored) == schema_id:
                del self.by_content[stored]

    # -- queries -------------------------------------------------------------------------------

    def live_versions(self, subject: str) -> list[SchemaRecord]:
        """The subject's versions that are not soft-deleted, oldest first."""
        return [r for _v, r in sorted(self.subjects.get(subject, {}).items()) if not r.deleted]

    def all_versions(self, subject: str) -> list[SchemaRecord]:
        return [r for _v, r in sorted(self.subjects.get(subject, {}).items())]

    def find_id(
        self, schema: str, schema_type: str, references: tuple[Reference, ...]
    ) -> int | None:
        """The id of this exact schema (text, type, references) in any subject, else None."""
        return self.by_content.get(StoredSchema(schema, schema_type, references))

    def referenced_by(
        self, subject: str, version: int, *, other_subjects: bool = False
    ) -> list[int]:
        """Ids of live schemas whose references name (subject, version); with
        ``other_subjects`` only those in other subjects."""
        out: set[int] = set()
        for name, versions in self.subjects.items():
            if other_subjects and name == subject:
                continue
            for rec in versions.values():
                if not rec.deleted and any(
                    r.subject == subject and r.version == version for r in rec.references
                ):
                    out.add(rec.id)
        return sorted(out)
