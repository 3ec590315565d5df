"""A Jepsen-style checker for a replicated log: what the producer was told against what is there.

``Ack(partition, offset, value)`` is an acknowledged record (acks=all: the broker said it is
committed at ``offset``). ``check(acks, log)`` compares them with every partition read back from
the beginning (``log``: partition -> [(offset, value)] in offset order) and reports

* ``lost``: acknowledged values that are not in their partition at all;
* ``moved``: acknowledged values found, but not at the offset they were acknowledged with;
* ``duplicated``: values that appear more than once in a partition;
* ``reordered``: pairs of acknowledged values of one partition whose order in the log differs
  from the order of their acknowledged offsets.

A checker that never fails proves nothing: tests/cluster/test_checker.py shows each kind of
fault is reported.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Ack", "CheckResult", "check"]


class Ack(NamedTuple):
    partition: int
    offset: int
    value: bytes


@dataclass
class CheckResult:
    acked: int = 0
    read: int = 0
    lost: list[Ack] = field(default_factory=list)
    moved: list[tuple[Ack, int]] = field(default_factory=list)
    duplicated: list[tuple[int, bytes, int]] = field(default_factory=list)
    reordered: list[tuple[int, bytes, bytes]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.moved or self.duplicated or self.reordered)

    def summary(self) -> str:
        return (
            f"acked {self.acked}, read {self.read}: lost {len(self.lost)}, moved {len(self.moved)}, "
            f"duplicated {len(self.duplicated)}, reordered {len(self.reordered)}"
            + (
                ""
                if self.ok
                else f"; first lost {self.lost[:3]}, moved {self.moved[:3]}, "
                f"duplicated {self.duplicated[:3]}, reordered {self.reordered[:3]}"
            )
        )


def check(acks: Sequence[Ack], log: Mapping[int, Sequence[tuple[int, bytes]]]) -> CheckResult:
    result = CheckResult(acked=len(acks), read=sum(len(v) for v in log.values()))
    position: dict[int, dict[bytes, int]] = {}
    for partition, records in log.items():
        where: dict[bytes, int] = {}
        counts = Counter(value for _, value in records)
        for value, n in counts.items():
            if n > 1:
                result.duplicated.append((partition, value, n))
        for offset, value in records:
            where.setdefault(value, offset)
        position[partition] = where
    by_partition: dict[int, list[Ack]] = {}
    for ack in acks:
        found = position.get(ack.partition, {}).get(ack.value)
        if found is None:
            result.lost.append(ack)
            continue
        if found != ack.offset:
            result.moved.append((ack, found))
        by_partition.setdefault(ack.partition, []).append(ack)
    for partition, present in by_partition.items():
        present.sort(key=lambda a: a.offset)
        where = position[partition]
        for a, b in itertools.pairwise(present):
            if where[a.value] > where[b.value]:
                result.reordered.append((partition, a.value, b.value))
    return result
