"""A driver for GroupMetadataManager: applies outcomes like GroupCoordinator does (append the
records to an in-memory 'log', replay them), with an explicit clock."""

from __future__ import annotations

import itertools
from typing import Any

from odradek.coordinator.group_manager import (
    GroupMetadataManager,
    JoinParams,
    OffsetCommitEntry,
    Outcome,
)
from odradek.coordinator.records import Record
from odradek.coordinator.state import Errors, GroupConfig, GroupState, JoinResult, SyncResult

RANGE = [("range", b"range-meta")]


class Harness:
    def __init__(self, **config: Any) -> None:
        defaults: dict[str, Any] = {"initial_rebalance_delay_ms": 100, "min_session_timeout_ms": 10}
        defaults.update(config)
        ids = itertools.count(1)
        self.m = GroupMetadataManager(
            GroupConfig(**defaults), new_member_id=lambda c: f"{c}-{next(ids)}"
        )
        self.now = 1_000_000
        self.log: list[Record] = []

    def apply(self, outcome: Outcome[Any]) -> Outcome[Any]:
        for r in outcome.records:
            self.log.append(r)
            self.m.replay(r)
        return outcome

    @staticmethod
    def result(outcome: Outcome[Any]) -> Any:
        if outcome.waiter is not None:
            return outcome.waiter.result if outcome.waiter.done else None
        return outcome.response

    def advance(self, ms: int) -> None:
        self.now += ms
        for r in self.m.tick(self.now):
            self.log.append(r)
            self.m.replay(r)

    # -- requests ----------------------------------------------------------------------------

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session: int = 10_000,
        rebalance: int = 30_000,
        client_id: str = "c",
        v4: bool = True,
        v9: bool = False,
        protocol_type: str = "consumer",
    ) -> Outcome[JoinResult]:
        p = JoinParams(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=protocols if protocols is not None else RANGE,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            client_id=client_id,
            client_host="/127.0.0.1",
            require_known_member_id=v4,
            supports_skip_assignment=v9,
        )
        return self.apply(self.m.join_group(p, self.now))

    def join_new(self, group: str = "g", **kw: Any) -> Outcome[JoinResult]:
        """Two-step join: MEMBER_ID_REQUIRED, then the join with the given id."""
        first = self.join(group, **kw)
        r = self.result(first)
        assert r.error is Errors.MEMBER_ID_REQUIRED, r
        return self.join(group, r.member_id, **kw)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: list[tuple[str, bytes]] | None = None,
        group: str = "g",
        instance: str | None = None,
    ) -> Outcome[SyncResult]:
        return self.apply(
            self.m.sync_group(
                group, generation, member_id, instance, None, None, assignments or [], self.now
            )
        )

    def heartbeat(
        self, member_id: str, generation: int, group: str = "g", instance: str | None = None
    ) -> Errors:
        return self.m.heartbeat(group, generation, member_id, instance, self.now)

    def leave(self, members: list[tuple[str, str | None]], group: str = "g") -> list[Errors]:
        return self.result(self.apply(self.m.leave_group(group, members, self.now)))

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        group: str = "g",
        generation: int = -1,
        member_id: str = "",
        metadata: str = "",
        instance: str | None = None,
    ) -> list[Errors]:
        entries = [OffsetCommitEntry(t, p, o, -1, metadata) for (t, p), o in offsets.items()]
        return self.result(
            self.apply(
                self.m.commit_offsets(group, generation, member_id, instance, entries, self.now)
            )
        )

    def stable_group(self, n: int, group: str = "g", **kw: Any) -> list[str]:
        """n members joined (generation 1) and synced by the leader: returns member ids (leader first)."""
        outs = [self.join_new(group, client_id=f"c{i}", **kw) for i in range(n)]
        for _ in range(20):
            if all(o.waiter is not None and o.waiter.done for o in outs):
                break
            self.advance(50)
        results = [self.result(o) for o in outs]
        assert all(r is not None and r.error is Errors.NONE for r in results), results
        leader = results[0].leader_id
        ids = [r.member_id for r in results]
        gen = results[0].generation_id
        followers = [self.sync(mid, gen, group=group) for mid in ids if mid != leader]
        self.sync(leader, gen, [(mid, f"assign-{mid}".encode()) for mid in ids], group=group)
        assert self.m.groups[group].state is GroupState.STABLE
        assert all(self.result(f).error is Errors.NONE for f in followers)
        return [leader] + [m for m in ids if m != leader]
