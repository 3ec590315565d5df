"""Leader election rules (Kafka's ``controller/Election.scala``), pure functions.

Every rule walks the assignment in order, so the head of the assignment (the preferred replica)
wins whenever it is eligible. ``live`` means registered and not shutting down.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = [
    "leader_for_controlled_shutdown",
    "leader_for_offline",
    "leader_for_preferred_replica",
    "leader_for_reassign",
]


def leader_for_offline(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean_enabled: bool
) -> tuple[int | None, tuple[int, ...], bool]:
    """(leader or None, new ISR, whether the election was unclean).

    Clean: the first replica in assignment order that is live and in the ISR; the new ISR is the
    live part of the old one. Unclean (only when enabled, and no live ISR member): the first live
    replica, with ISR = [it]. None when nobody is eligible (the ISR is then left to the caller).
    """
    live_isr = tuple(r for r in isr if r in live)
    for r in assignment:
        if r in live and r in isr:
            return r, live_isr, False
    if unclean_enabled:
        for r in assignment:
            if r in live:
                return r, (r,), True
    return None, live_isr, False


def leader_for_reassign(target: Sequence[int], isr: Sequence[int], live: Collection[int]) -> int | None:
    """The first replica of the target replica set that is live and in the ISR."""
    return next((r for r in target if r in live and r in isr), None)


def leader_for_preferred_replica(assignment: Sequence[int], isr: Sequence[int], live: Collection[int]) -> int | None:
    """The preferred replica (head of the assignment) if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def leader_for_controlled_shutdown(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], shutting_down: Collection[int]
) -> tuple[int | None, tuple[int, ...]]:
    """(first live ISR replica not shutting down, ISR without the shutting-down brokers)."""
    new_isr = tuple(r for r in isr if r not in shutting_down)
    leader = next((r for r in assignment if r in live and r in new_isr and r not in shutting_down), None)
    return leader, new_isr
