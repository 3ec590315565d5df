"""Authorizer cost per request with 10,000 ACLs: median and p99 of one decision, uncached (the
first request for a resource after a change) and cached (every later one).

    PYTHONPATH=src python bench/authorizer.py [--acls 10000] [--requests 20000]

The ACLs: per topic ``topic-<i>`` a literal ALLOW READ and WRITE for one user, one PREFIXED
ALLOW per hundred topics, a few DENYs and ``User:*`` wildcards; each request asks for one of
the topics (a Produce or Fetch checks one topic per partition batch).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.authorizer import AclAuthorizer
from odradek.security.principal import KafkaPrincipal


def build(n: int) -> AclAuthorizer:
    authz = AclAuthorizer()
    i = 0
    while len(authz) < n:
        user = f"User:user-{i % 500}"
        topic = ResourcePattern(ResourceType.TOPIC, f"topic-{i}")
        for op in (AclOperation.READ, AclOperation.WRITE):
            authz.add(AclBinding(topic, AccessControlEntry(user, "*", op, AclPermissionType.ALLOW)))
        if i % 100 == 0:
            prefix = ResourcePattern(ResourceType.TOPIC, f"topic-{i // 100}", PatternType.PREFIXED)
            authz.add(
                AclBinding(
                    prefix,
                    AccessControlEntry(
                        "User:*", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW
                    ),
                )
            )
        if i % 250 == 0:
            authz.add(
                AclBinding(
                    topic,
                    AccessControlEntry(user, "10.0.0.9", AclOperation.ALL, AclPermissionType.DENY),
                )
            )
        i += 1
    return authz


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--acls", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=20_000)
    args = ap.parse_args()
    authz = build(args.acls)
    topics = len(authz.patterns())
    rnd = random.Random(1)
    queries = []
    for _ in range(args.requests):
        i = rnd.randrange(args.acls // 2)
        who = KafkaPrincipal("User", f"user-{i % 500 if rnd.random() < 0.9 else 9999}")
        queries.append((who, "10.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, f"topic-{i}"))
    results = {}
    for label in ("uncached", "cached"):
        times = []
        for q in queries:
            if label == "uncached":
                authz._cache.clear()
            t0 = time.perf_counter_ns()
            authz.authorize(*q)
            times.append((time.perf_counter_ns() - t0) / 1000)
        results[label] = times
    print(f"{len(authz)} ACLs on {topics} patterns, {args.requests} requests")
    for label, times in results.items():
        print(
            f"{label:9s} median {statistics.median(times):6.2f} us  p99 {percentile(times, 0.99):6.2f} us"
        )


if __name__ == "__main__":
    main()
