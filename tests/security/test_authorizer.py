"""The authorizer against a direct reading of Kafka's rules, over generated ACL sets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    pascal_name,
)
from odradek.security.authorizer import AclAuthorizer, AuthorizerConfig
from odradek.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
OPS = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]
REAL_OPS = [op for op in OPS if op != AclOperation.ALL]
NAMES = ["t", "to", "top", "topic", "*", "other"]

principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
bindings = st.builds(
    lambda rt, name, pt, p, h, op, perm: AclBinding(
        ResourcePattern(rt, name, pt), AccessControlEntry(p, h, op, perm)
    ),
    st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
    st.sampled_from(NAMES),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principals,
    hosts,
    st.sampled_from(OPS),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)


def reference(
    acls: list[AclBinding],
    principal: str,
    host: str,
    op: AclOperation,
    rtype: ResourceType,
    name: str,
    allow_everyone: bool,
) -> bool:
    """Kafka's rules read literally, over the whole list."""

    def applies(b: AclBinding) -> bool:
        p = b.pattern
        if p.resource_type != rtype:
            return False
        if p.pattern_type == PatternType.LITERAL:
            return p.name in (name, "*")
        return name.startswith(p.name)

    matching = [b.entry for b in acls if applies(b)]
    if not matching:
        return allow_everyone
    mine = [e for e in matching if e.principal in (principal, "User:*") and e.host in (host, "*")]
    if any(
        e.permission_type == AclPermissionType.DENY and e.operation in (op, AclOperation.ALL)
        for e in mine
    ):
        return False
    implied = {op, AclOperation.ALL}
    if op == AclOperation.DESCRIBE:
        implied |= {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    if op == AclOperation.DESCRIBE_CONFIGS:
        implied |= {AclOperation.ALTER_CONFIGS}
    return any(
        e.permission_type == AclPermissionType.ALLOW and e.operation in implied for e in mine
    )


@settings(max_examples=300, deadline=None)
@given(
    acls=st.lists(bindings, max_size=12),
    who=st.sampled_from([ALICE, BOB]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=st.sampled_from(REAL_OPS),
    rtype=st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
    name=st.sampled_from(["topic", "top", "other", "x"]),
    allow_everyone=st.booleans(),
)
def test_decisions_match_kafkas_rules(
    acls: list[AclBinding],
    who: KafkaPrincipal,
    host: str,
    op: AclOperation,
    rtype: ResourceType,
    name: str,
    allow_everyone: bool,
) -> None:
    authz = AclAuthorizer(
        AuthorizerConfig("kafka.security.authorizer.AclAuthorizer", frozenset(), allow_everyone)
    )
    for b in acls:
        authz.add(b)
    want = reference(acls, str(who), host, op, rtype, name, allow_everyone)
    assert authz.authorize(who, host, op, rtype, name) is want
    assert authz.authorize(who, host, op, rtype, name) is want  # from the cache


@settings(max_examples=150, deadline=None)
@given(acls=st.lists(bindings, min_size=1, max_size=10), data=st.data())
def test_cache_follows_changes(acls: list[AclBinding], data: st.DataObject) -> None:
    """Every decision after a removal is the one a fresh authorizer would make."""
    authz = AclAuthorizer()
    for b in acls:
        authz.add(b)
    queries = [(ALICE, "10.0.0.1", op, ResourceType.TOPIC, "topic") for op in REAL_OPS]
    for q in queries:
        authz.authorize(*q)
    gone = data.draw(st.sampled_from(acls))
    authz.remove(gone)
    fresh = AclAuthorizer()
    for b in acls:
        if b != gone:
            fresh.add(b)
    for q in queries:
        assert authz.authorize(*q) is fresh.authorize(*q)


def allow(op: AclOperation, name: str = "topic", principal: str = "User:alice") -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name),
        AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW),
    )


def test_deny_wins_and_implications() -> None:
    authz = AclAuthorizer()
    authz.add(allow(AclOperation.READ))
    assert authz.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "topic")
    assert authz.authorize(ALICE, "h", AclOperation.DESCRIBE, ResourceType.TOPIC, "topic")
    assert not authz.authorize(ALICE, "h", AclOperation.WRITE, ResourceType.TOPIC, "topic")
    assert not authz.authorize(BOB, "h", AclOperation.READ, ResourceType.TOPIC, "topic")
    authz.add(
        AclBinding(
            ResourcePattern(ResourceType.TOPIC, "to", PatternType.PREFIXED),
            AccessControlEntry("User:*", "h", AclOperation.ALL, AclPermissionType.DENY),
        )
    )
    assert not authz.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "topic")
    assert authz.authorize(ALICE, "other", AclOperation.READ, ResourceType.TOPIC, "topic")


def test_deny_does_not_imply_describe() -> None:
    authz = AclAuthorizer()
    authz.add(allow(AclOperation.DESCRIBE))
    authz.add(
        AclBinding(
            ResourcePattern(ResourceType.TOPIC, "topic"),
            AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.DENY),
        )
    )
    assert authz.authorize(ALICE, "h", AclOperation.DESCRIBE, ResourceType.TOPIC, "topic")


def test_super_users_and_no_acl() -> None:
    cfg = AuthorizerConfig.from_values(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin; User:Bob",
        }
    )
    assert cfg.super_users == {"User:admin", "User:Bob"}
    authz = AclAuthorizer(cfg)
    admin = KafkaPrincipal("User", "admin")
    assert authz.authorize(admin, "h", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    assert not authz.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "t")


def test_unknown_class_name_refused() -> None:
    try:
        AuthorizerConfig.from_values({"authorizer.class.name": "com.example.Mine"})
    except ValueError as exc:
        assert "not supported" in str(exc)
    else:
        raise AssertionError("accepted an unknown authorizer")
    assert not AuthorizerConfig.from_values({}).enabled


def test_filters_match_as_kafkas() -> None:
    lit = ResourcePattern(ResourceType.TOPIC, "topic")
    star = ResourcePattern(ResourceType.TOPIC, "*")
    pre = ResourcePattern(ResourceType.TOPIC, "to", PatternType.PREFIXED)
    match = ResourcePatternFilter(ResourceType.TOPIC, "topic", PatternType.MATCH)
    assert match.matches(lit) and match.matches(star) and match.matches(pre)
    anyf = ResourcePatternFilter(ResourceType.ANY, "topic", PatternType.ANY)
    assert anyf.matches(lit) and not anyf.matches(star) and not anyf.matches(pre)
    assert ResourcePatternFilter(pattern_type=PatternType.PREFIXED).matches(pre)
    assert not ResourcePatternFilter(pattern_type=PatternType.PREFIXED).matches(lit)
    assert AclBindingFilter().matches(allow(AclOperation.READ))


def test_by_resource_type() -> None:
    authz = AclAuthorizer()
    assert not authz.authorize_by_resource_type(ALICE, "h", AclOperation.WRITE, ResourceType.TOPIC)
    authz.add(allow(AclOperation.WRITE, "a"))
    assert authz.authorize_by_resource_type(ALICE, "h", AclOperation.WRITE, ResourceType.TOPIC)
    authz.add(
        AclBinding(
            ResourcePattern(ResourceType.TOPIC, "*"),
            AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.DENY),
        )
    )
    assert not authz.authorize_by_resource_type(ALICE, "h", AclOperation.WRITE, ResourceType.TOPIC)


def test_names() -> None:
    assert pascal_name(AclOperation.CLUSTER_ACTION) == "ClusterAction"
    assert pascal_name(ResourceType.TRANSACTIONAL_ID) == "TransactionalId"
    assert [int(v) for v in (ResourceType.USER, AclOperation.DESCRIBE_TOKENS)] == [7, 14]
