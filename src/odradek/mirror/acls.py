"""Topic ACLs of a flow's source, as MirrorMaker 2 copies them to the target
(``sync.topic.acls.enabled``, every ``sync.topic.acls.interval.seconds``).

Pure: ``target_acl_bindings(flow, source_bindings)`` is what MM2's ``MirrorSourceConnector``
creates on the target from the source's ACLs (DescribeAcls with resource type TOPIC, any name,
any pattern type):

* only TOPIC resources with a LITERAL pattern (PREFIXED patterns are not copied);
* only topics the flow replicates (``topics`` / ``topics.exclude``, no cycles, no internal
  topics), named on the target by the replication policy (``A.orders`` for DefaultReplicationPolicy);
* ALLOW WRITE is never copied: only the mirror writes remote topics;
* ALLOW ALL becomes ALLOW READ; every other entry (DENY included) is copied as it is.

One difference from MM2: the literal wildcard topic ``*`` is copied only when the policy keeps
names (IdentityReplicationPolicy); MM2 turns it into a literal ACL on a topic named ``A.*``,
which matches nothing.

The target's ACLs are only ever added to, as MM2 does: an ACL removed on the source stays on the
target.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.client.aio.admin import AclBinding, AclBindingFilter

from .config import FlowConfig

__all__ = ["ANY_TOPIC_ACL", "target_acl_bindings"]

TOPIC = 2
LITERAL = 3
ALL = 2
READ = 3
WRITE = 4
ALLOW = 3
WILDCARD = "*"

ANY_TOPIC_ACL = AclBindingFilter(resource_type=TOPIC)
"""MM2's filter for the source's ACLs: topic resources, any name, any pattern type, any entry."""


def should_replicate_acl(b: AclBinding) -> bool:
    """MM2's shouldReplicateAcl: everything but ALLOW WRITE."""
    return not (b.permission_type == ALLOW and b.operation == WRITE)


def target_acl_bindings(flow: FlowConfig, source_bindings: Iterable[AclBinding]) -> list[AclBinding]:
    """The bindings to create on the flow's target for ``source_bindings`` (module doc), each
    once, in the order first seen."""
    out: dict[AclBinding, None] = {}
    for b in source_bindings:
        if b.resource_type != TOPIC or b.pattern_type != LITERAL or not should_replicate_acl(b):
            continue
        if not flow.should_replicate_topic(b.resource_name):
            continue
        remote = flow.policy.format_remote_topic(flow.source, b.resource_name)
        if b.resource_name == WILDCARD and remote != WILDCARD:
            continue
        operation = READ if (b.permission_type == ALLOW and b.operation == ALL) else b.operation
        out[b._replace(resource_name=remote, operation=operation)] = None
    return list(out)
