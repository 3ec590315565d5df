"""SCRAM credentials kept as Kafka keeps them: in the ``users`` config entity of each user
(ZooKeeper ``/config/users/<user>`` in cluster mode, with Kafka's change notifications; the
broker's config-entities file in single-node mode), key = mechanism name, value =
``ScramCredential.to_config()``. The broker's ``ConfigEntityStore`` does the storing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol

from odradek.security.scram import MECHANISMS, ScramCredential

__all__ = ["USERS", "CredentialNotFoundError", "EntityStore", "ScramCredentials"]

USERS = "users"


class EntityStore(Protocol):
    def entities(self, entity_type: str) -> dict[str, dict[str, str]]: ...

    def entity_config(self, entity_type: str, name: str) -> dict[str, str]: ...

    def change_entity_config(
        self, entity_type: str, name: str, configs: Mapping[str, str]
    ) -> Awaitable[None]: ...

    def alter_entity_config(
        self,
        entity_type: str,
        name: str,
        sets: Mapping[str, str],
        removes: Iterable[str] = (),
        check: Callable[[Mapping[str, str]], None] | None = None,
    ) -> Awaitable[dict[str, str]]: ...


class CredentialNotFoundError(KeyError):
    """A deletion named a mechanism the user has no credential for, in the store as it is now
    (Kafka's RESOURCE_NOT_FOUND); nothing of the user's alteration was written."""


class ScramCredentials:
    """Read and change SCRAM credentials through the config-entity store handed in (a
    callable, since the store exists only once the broker has started)."""

    def __init__(self, store: Callable[[], EntityStore | None]) -> None:
        self._store = store

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        store = self._store()
        if store is None:
            return None
        text = store.entity_config(USERS, user).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.from_config(text)
        except ValueError:
            return None

    def describe(self) -> dict[str, dict[str, int]]:
        """user -> {mechanism: iterations} for every user with a SCRAM credential."""
        store = self._store()
        out: dict[str, dict[str, int]] = {}
        if store is None:
            return out
        for user, configs in store.entities(USERS).items():
            for mechanism in MECHANISMS:
                text = configs.get(mechanism)
                if text is None:
                    continue
                try:
                    out.setdefault(user, {})[mechanism] = ScramCredential.from_config(
                        text
                    ).iterations
                except ValueError:
                    continue
        return out

    async def alter(
        self, user: str, upserts: Mapping[str, ScramCredential], deletions: set[str]
    ) -> None:
        """Set the credentials of ``upserts`` and remove the mechanisms of ``deletions`` for
        one user; the user's other configs (quotas, which another broker may have written a
        moment ago) are kept: the store changes these keys in the entity as it is stored now,
        never in a copy. Every mechanism of ``deletions`` must have a credential in the entity
        as stored now (in ZooKeeper, not this broker's copy, which may lag a write made through
        another broker), checked against the version the write replaces, as Kafka's ZooKeeper
        ``AdminManager.alterUserScramCredentials`` reads the user's config for the check:
        ``CredentialNotFoundError`` otherwise, with nothing written."""
        store = self._store()
        if store is None:
            raise RuntimeError("no credential store")
        sets = {mechanism: credential.to_config() for mechanism, credential in upserts.items()}
        removes = sorted(deletions)

        def check(configs: Mapping[str, str]) -> None:
            missing = [mechanism for mechanism in removes if mechanism not in configs]
            if missing:
                raise CredentialNotFoundError(user, missing)

        await store.alter_entity_config(USERS, user, sets, removes, check)
