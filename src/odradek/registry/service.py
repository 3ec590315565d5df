"""The registry's operations, with Confluent's semantics and errors; the routers call these.

Reads look at the store's state as it is on this node; writes take the store's lock, decide
from the state, write one or more ``_schemas`` records and return once they are applied.

Rules (Confluent's):

* Registering a schema equal to a live version of the subject returns that version's id and
  writes nothing. Otherwise the schema must pass the subject's compatibility level (subject
  config, else global config, else BACKWARD) against the live versions; it takes the id of the
  same schema (text, type, references) anywhere in the registry, else ``max_id + 1``; its version
  is one above the highest version the subject has ever kept (soft-deleted ones included).
* Soft delete marks versions deleted (still served by id and with ``?deleted=true``); a
  permanent delete needs a soft delete first and removes the versions; a version that a live
  schema references cannot be deleted (42206).
* Modes: READWRITE, READONLY (writes refused with 42205), READONLY_OVERRIDE, IMPORT (registering
  must name the id; entering IMPORT needs an empty registry or ``force``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import errors
from .compatibility import DEFAULT_LEVEL, LEVELS, ParsedSchema, check
from .records import ConfigRecord, DeleteSubjectRecord, ModeRecord, Reference, SchemaRecord
from .schemas import SCHEMA_TYPES, parse
from .state import RegistryState, StoredSchema
from .store import SchemaStore

__all__ = ["MODES", "SchemaRegistry"]

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"
MAX_VERSION = 2**31 - 1


def _schema_type(body: Mapping[str, Any]) -> str:
    t = body.get("schemaType") or "AVRO"
    if not isinstance(t, str):
        raise errors.invalid_schema(f"Invalid schema type {t}")
    return t.upper()


def _references(body: Mapping[str, Any]) -> tuple[Reference, ...]:
    raw = body.get("references") or []
    try:
        return tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in raw)
    except (KeyError, TypeError, ValueError):
        raise errors.invalid_schema("Invalid schema references " + str(raw)) from None


class SchemaRegistry:
    def __init__(self, store: SchemaStore) -> None:
        self.store = store
        self._parsed: dict[tuple[str, str, tuple[Reference, ...]], ParsedSchema] = {}

    @property
    def state(self) -> RegistryState:
        return self.store.state

    # -- parsing -------------------------------------------------------------------------------

    def _resolve(
        self, references: tuple[Reference, ...], seen: frozenset[tuple[str, int]] = frozenset()
    ) -> list[str]:
        """The texts of the referenced schemas, dependencies first."""
        out: list[str] = []
        for ref in references:
            if (ref.subject, ref.version) in seen:
                continue
            versions = self.state.subjects.get(ref.subject, {})
            rec = (
                versions.get(ref.version)
                if ref.version != -1
                else (versions[max(versions)] if versions else None)
            )
            if rec is None:
                raise errors.invalid_schema(
                    f"Invalid schema references, details: reference {ref.name} "
                    f"(subject {ref.subject}, version {ref.version}) not found"
                )
            out += self._resolve(rec.references, seen | {(ref.subject, ref.version)})
            out.append(rec.schema)
        return out

    def parse(self, schema_type: str, text: str, references: tuple[Reference, ...]) -> ParsedSchema:
        key = (schema_type, text, references)
        parsed = self._parsed.get(key)
        if parsed is None:
            if schema_type not in SCHEMA_TYPES:
                raise errors.invalid_schema(f"Invalid schema type {schema_type}")
            try:
                parsed = parse(schema_type, text, self._resolve(references))
            except ValueError as exc:
                raise errors.invalid_schema(str(exc)) from None
            if len(self._parsed) > 10_000:
                self._parsed.clear()
            self._parsed[key] = parsed
        return parsed

    def _parse_record(self, rec: SchemaRecord) -> ParsedSchema:
        return self.parse(rec.schema_type, rec.schema, rec.references)

    def _parse_body(
        self, body: Mapping[str, Any], normalize: bool
    ) -> tuple[str, str, tuple[Reference, ...], ParsedSchema]:
        text = body.get("schema")
        if not isinstance(text, str) or not text:
            raise errors.invalid_schema("Empty schema")
        schema_type = _schema_type(body)
        refs = _references(body)
        parsed = self.parse(schema_type, text, refs)
        stored = parsed.normalized() if normalize else parsed.canonical
        return stored, schema_type, refs, parsed

    # -- schemas -------------------------------------------------------------------------------

    def schema_by_id(self, schema_id: int) -> StoredSchema:
        stored = self.state.schemas.get(schema_id)
        if stored is None:
            raise errors.schema_not_found(schema_id)
        return stored

    def subject_versions_by_id(self, schema_id: int, deleted: bool) -> list[tuple[str, int]]:
        self.schema_by_id(schema_id)
        out = []
        for subject, version in sorted(self.state.users.get(schema_id, ())):
            rec = self.state.subjects[subject][version]
            if deleted or not rec.deleted:
                out.append((subject, version))
        return out

    def list_schemas(self, prefix: str, deleted: bool, latest_only: bool) -> list[SchemaRecord]:
        out: list[SchemaRecord] = []
        for subject in sorted(self.state.subjects):
            if not subject.startswith(prefix):
                continue
            versions = (
                self.state.all_versions(subject) if deleted else self.state.live_versions(subject)
            )
            out += versions[-1:] if latest_only else versions
        return out

    # -- subjects ------------------------------------------------------------------------------

    def list_subjects(self, prefix: str, deleted: bool, deleted_only: bool) -> list[str]:
        out = []
        for subject, versions in sorted(self.state.subjects.items()):
            if not subject.startswith(prefix):
                continue
            live = any(not r.deleted for r in versions.values())
            if deleted_only:
                if not live:
                    out.append(subject)
            elif live or deleted:
                out.append(subject)
        return out

    def _check_subject(self, subject: str, deleted: bool) -> list[SchemaRecord]:
        versions = (
            self.state.all_versions(subject) if deleted else self.state.live_versions(subject)
        )
        if not versions:
            raise errors.subject_not_found(subject)
        return versions

    def list_versions(self, subject: str, deleted: bool, deleted_only: bool) -> list[int]:
        versions = self._check_subject(subject, deleted or deleted_only)
        if deleted_only:
            return [r.version for r in versions if r.deleted]
        return [r.version for r in versions]

    @staticmethod
    def parse_version(version: str) -> int:
        """-1 for ``latest`` (and "-1"), else the number; 42202 when neither."""
        if version == "latest":
            return -1
        try:
            n = int(version)
        except ValueError:
            raise errors.invalid_version(version) from None
        if n == -1:
            return -1
        if n < 1 or n > MAX_VERSION:
            raise errors.invalid_version(version)
        return n

    def get_version(self, subject: str, version: str, deleted: bool = False) -> SchemaRecord:
        n = self.parse_version(version)
        versions = self._check_subject(subject, deleted)
        if n == -1:
            return versions[-1]
        for rec in versions:
            if rec.version == n:
                return rec
        raise errors.version_not_found(n)

    async def register(self, subject: str, body: Mapping[str, Any], normalize: bool) -> int:
        if not isinstance(body, Mapping):
            raise errors.invalid_schema("Invalid schema")
        normalize = normalize or self.normalize_in_scope(subject)
        async with self.store.lock:
            await self.store.catch_up()
            mode = self.mode_in_scope(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise errors.operation_not_permitted(
                    f"Subject {subject} in context . is in read-only mode"
                )
            wanted_id = body.get("id")
            wanted_version = body.get("version")
            if wanted_id is not None and wanted_id >= 0 and mode != "IMPORT":
                raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
            stored, schema_type, refs, parsed = self._parse_body(body, normalize)
            live = self.state.live_versions(subject)
            for rec in live:
                if (
                    rec.schema_type == schema_type
                    and rec.references == refs
                    and (
                        rec.schema == stored
                        or (normalize and self._parse_record(rec).normalized() == stored)
                    )
                ):
                    if wanted_id is not None and wanted_id >= 0 and wanted_id != rec.id:
                        raise errors.id_does_not_match(
                            f"Schema already registered with id {rec.id} instead of input id {wanted_id}"
                        )
                    return rec.id
            if mode != "IMPORT":
                level = self.compatibility_in_scope(subject)
                previous = [(r.version, self._parse_record(r)) for r in reversed(live)]
                messages = check(level, parsed, previous)
                if messages:
                    raise errors.incompatible_schema(
                        "Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}", details: [{", ".join(messages)}]'
                    )
            existing = self.state.find_id(stored, schema_type, refs)
            if wanted_id is not None and wanted_id >= 0:
                other = self.state.schemas.get(int(wanted_id))
                if other is not None and other != StoredSchema(stored, schema_type, refs):
                    raise errors.id_does_not_match(
                        f"Overwrite new schema with id {wanted_id} is not permitted."
                    )
                schema_id = int(wanted_id)
            else:
                schema_id = existing if existing is not None else self.state.max_id + 1
            kept = self.state.subjects.get(subject, {})
            if wanted_version is not None and int(wanted_version) > 0:
                version = int(wanted_version)
            else:
                version = max(kept, default=0) + 1
            await self.store.write(
                SchemaRecord(subject, version, schema_id, stored, schema_type, refs, False)
            )
            return schema_id

    def lookup(
        self, subject: str, body: Mapping[str, Any], normalize: bool, deleted: bool
    ) -> SchemaRecord:
        if not isinstance(body, Mapping):
            raise errors.invalid_schema("Invalid schema")
        normalize = normalize or self.normalize_in_scope(subject)
        versions = (
            self.state.all_versions(subject) if deleted else self.state.live_versions(subject)
        )
        if not versions:
            raise errors.subject_not_found(subject)
        stored, schema_type, refs, parsed = self._parse_body(body, normalize)
        for rec in reversed(versions):
            if rec.schema_type != schema_type or rec.references != refs:
                continue
            if rec.schema == stored or rec.schema == parsed.canonical:
                return rec
            if normalize and self._parse_record(rec).normalized() == stored:
                return rec
        raise errors.schema_not_found()

    def _check_writable(self, subject: str | None) -> None:
        """42205 in READONLY mode (the global subject prints as ``null``, as in Java)."""
        if self.mode_in_scope(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(
                f"Subject {'null' if subject is None else subject} in context . is in read-only mode"
            )

    def _check_not_referenced(self, rec: SchemaRecord, other_subjects: bool = False) -> None:
        if self.state.referenced_by(rec.subject, rec.version, other_subjects=other_subjects):
            raise errors.reference_exists(
                f"{{magic=1,keytype=SCHEMA,subject={rec.subject},version={rec.version}}}"
            )

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self.store.lock:
            await self.store.catch_up()
            self._check_writable(subject)
            kept = self.state.all_versions(subject)
            if not kept:
                raise errors.subject_not_found(subject)
            live = [r for r in kept if not r.deleted]
            if permanent:
                if live:
                    raise errors.subject_not_soft_deleted(subject)
                for rec in kept:
                    self._check_not_referenced(rec, other_subjects=True)
                # newest first, as Confluent (references within the subject point backwards)
                for rec in reversed(kept):
                    await self.store.write(SchemaRecord(subject, rec.version, tombstone=True))
                # the subject's own mode and config go with it
                if subject in self.state.modes:
                    await self.store.write(ModeRecord(subject, None))
                if subject in self.state.configs or subject in self.state.config_extras:
                    await self.store.write(ConfigRecord(subject, None))
                return [r.version for r in kept]
            if not live:
                raise errors.subject_soft_deleted(subject)
            for rec in live:
                self._check_not_referenced(rec, other_subjects=True)
            await self.store.write(DeleteSubjectRecord(subject, live[-1].version))
            return [r.version for r in live]

    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        n = self.parse_version(version)
        async with self.store.lock:
            await self.store.catch_up()
            kept = self.state.all_versions(subject)
            if not kept:
                raise errors.subject_not_found(subject)
            if n == -1:  # the latest live version; with permanent, soft-deleted ones count
                pool = kept if permanent else [r for r in kept if not r.deleted]
                if not pool:
                    raise errors.subject_not_found(subject)
                n = pool[-1].version
            rec = next((r for r in kept if r.version == n), None)
            if rec is None:
                raise errors.version_not_found(n)
            self._check_writable(subject)  # after the checks of the version, as Confluent
            if permanent:
                if not rec.deleted:
                    raise errors.version_not_soft_deleted(subject, n)
                self._check_not_referenced(rec)
                await self.store.write(SchemaRecord(subject, n, tombstone=True))
            else:
                if rec.deleted:
                    raise errors.version_soft_deleted(subject, n)
                self._check_not_referenced(rec)
                await self.store.write(
                    SchemaRecord(
                        subject, n, rec.id, rec.schema, rec.schema_type, rec.references, True
                    )
                )
            return n

    def referenced_by(self, subject: str, version: str) -> list[int]:
        rec = self.get_version(subject, version)
        return self.state.referenced_by(subject, rec.version)

    def test_compatibility(
        self, subject: str, version: str | None, body: Mapping[str, Any], normalize: bool
    ) -> list[str]:
        """[] when compatible, else Confluent's messages. ``version`` None: against the versions
        the level names; else against that one version."""
        if not isinstance(body, Mapping):
            raise errors.invalid_schema("Invalid schema")
        _stored, _t, _refs, parsed = self._parse_body(body, normalize)
        level = self.compatibility_in_scope(subject)
        if version is None:
            live = self.state.live_versions(subject)
            previous = [(r.version, self._parse_record(r)) for r in reversed(live)]
            return check(level, parsed, previous)
        n = self.parse_version(version)
        if n == -1 and not self.state.live_versions(subject):
            return []
        rec = self.get_version(subject, version)
        return check(
            level.removesuffix("_TRANSITIVE"), parsed, [(rec.version, self._parse_record(rec))]
        )

    # -- config and mode -----------------------------------------------------------------------

    def compatibility_in_scope(self, subject: str | None) -> str:
        configs = self.state.configs
        if subject is not None and subject in configs:
            return configs[subject]
        return configs.get(None, DEFAULT_LEVEL)

    def normalize_in_scope(self, subject: str | None) -> bool:
        """The ``normalize`` config (Confluent's): registrations and lookups normalize as if
        ``?normalize=true`` were given."""
        extras = self.state.config_extras
        for scope in (subject, None):
            if scope in extras and "normalize" in extras[scope]:
                return bool(extras[scope]["normalize"])
        return False

    def _config_json(self, subject: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        extra = self.state.config_extras.get(subject, {})
        if "normalize" in extra:
            out["normalize"] = extra["normalize"]
        level = self.state.configs.get(subject)
        if level is not None:
            out["compatibilityLevel"] = level
        return out

    def get_config(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        """Confluent's ``Config``: ``{"compatibilityLevel": L}`` (and ``normalize`` when set)."""
        if subject is None or (subject not in self.state.configs and default_to_global):
            out = self._config_json(None)
            out.setdefault("compatibilityLevel", DEFAULT_LEVEL)
            return out
        if subject not in self.state.configs and subject not in self.state.config_extras:
            raise errors.subject_compatibility_not_configured(subject)
        return self._config_json(subject)

    async def set_config(self, subject: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT: ``compatibility`` and/or ``normalize``; merged over the config there is (as
        Confluent's ConfigValue.update); answers the new config as ``{"compatibility", ...}``."""
        if not isinstance(body, Mapping):
            raise errors.invalid_compatibility_level()
        level = body.get("compatibility")
        normalize = body.get("normalize")
        if level is None and normalize is None:
            raise errors.invalid_compatibility_level()
        if level is not None and (not isinstance(level, str) or level.upper() not in LEVELS):
            raise errors.invalid_compatibility_level()
        async with self.store.lock:
            await self.store.catch_up()
            self._check_writable(subject)
            new_level = level.upper() if isinstance(level, str) else self.state.configs.get(subject)
            extra = dict(self.state.config_extras.get(subject, {}))
            if normalize is not None:
                extra["normalize"] = bool(normalize)
            await self.store.write(ConfigRecord(subject, new_level, extra))
        out: dict[str, Any] = {}
        if new_level is not None:
            out["compatibility"] = new_level
        if "normalize" in extra:
            out["normalize"] = extra["normalize"]
        return out

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        async with self.store.lock:
            await self.store.catch_up()
            self._check_writable(subject)
            if subject is None:
                previous = self.get_config(None, True)
            else:
                if subject not in self.state.subjects:
                    raise errors.subject_not_found(subject)
                previous = self.get_config(subject, False)
            await self.store.write(ConfigRecord(subject, None))
            return previous

    def mode_in_scope(self, subject: str | None) -> str:
        """The subject's mode, else the global one; a global READONLY_OVERRIDE wins over
        subject modes."""
        modes = self.state.modes
        if modes.get(None) == "READONLY_OVERRIDE":
            return "READONLY_OVERRIDE"
        if subject is not None and subject in modes:
            return modes[subject]
        return modes.get(None, DEFAULT_MODE)

    def get_mode(self, subject: str | None, default_to_global: bool) -> str:
        if subject is None:
            return self.mode_in_scope(None)
        mode = self.state.modes.get(subject)
        if mode is None:
            if default_to_global:
                return self.mode_in_scope(None)
            raise errors.subject_mode_not_configured(subject)
        return mode

    async def set_mode(self, subject: str | None, body: Mapping[str, Any], force: bool) -> str:
        mode = body.get("mode") if isinstance(body, Mapping) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode()
        mode = mode.upper()
        async with self.store.lock:
            await self.store.catch_up()
            if mode == "IMPORT" and not force:
                subjects = (
                    self.list_subjects("", False, False)
                    if subject is None
                    else ([subject] if self.state.live_versions(subject) else [])
                )
                if subjects:
                    raise errors.operation_not_permitted(
                        "Cannot import since found existing subjects"
                    )
            await self.store.write(ModeRecord(subject, mode))
        return mode

    async def delete_mode(self, subject: str | None) -> str:
        async with self.store.lock:
            await self.store.catch_up()
            previous = (
                self.get_mode(subject, False) if subject is not None else self.mode_in_scope(None)
            )
            await self.store.write(ModeRecord(subject, None))
            return previous
