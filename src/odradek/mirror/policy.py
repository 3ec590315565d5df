"""Replication policies: how MM2 names remote and internal topics (pure).

* ``DefaultReplicationPolicy``: a topic ``t`` of cluster ``A`` is ``A<sep>t`` on the target
  (``replication.policy.separator``, default "."); the source of a remote topic is the part
  before the first separator, so cycles are detected.
* ``IdentityReplicationPolicy``: topics keep their names (so cycles cannot be detected, as in
  MM2); heartbeats are still renamed ``A.heartbeats``.

Internal topics, as MM2 names them: ``heartbeats``, ``mm2-offset-syncs<sep><alias><sep>internal``
and ``<alias><sep>checkpoints<sep>internal``; a topic is internal when it starts with ``__`` or
``.`` or ends with ``.internal`` / ``-internal`` (MM2's ``isInternalTopic``).
"""

from __future__ import annotations

__all__ = ["DefaultReplicationPolicy", "IdentityReplicationPolicy", "ReplicationPolicy", "make_policy"]

HEARTBEATS_TOPIC = "heartbeats"


class ReplicationPolicy:
    """MM2's DefaultReplicationPolicy; the base of the identity policy."""

    def __init__(self, separator: str = ".") -> None:
        if not separator:
            raise ValueError("replication.policy.separator must not be empty")
        self.separator = separator

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The cluster alias a remote topic came from, or None for a local topic."""
        parts = topic.split(self.separator)
        return parts[0] if len(parts) >= 2 and parts[0] else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        up = self.upstream_topic(topic)
        return topic if up is None else self.original_topic(up)

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        s = self.separator
        return f"mm2-offset-syncs{s}{cluster_alias}{s}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        s = self.separator
        return f"{cluster_alias}{s}checkpoints{s}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS_TOPIC

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(f"{self.separator}checkpoints{self.separator}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(f"{self.separator}internal") and (topic.startswith("mm2") or self.is_checkpoints_topic(topic))

    def is_internal_topic(self, topic: str) -> bool:
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith("__")
            or topic.startswith(".")
            or topic.endswith(".internal")
            or topic.endswith("-internal")
        )

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """MirrorSourceConnector.isCycle: the topic (or one it came from) came from the target."""
        source = self.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        up = self.upstream_topic(topic)
        return up is not None and up != topic and self.is_cycle(up, target_alias)


DefaultReplicationPolicy = ReplicationPolicy


class IdentityReplicationPolicy(ReplicationPolicy):
    """Topics keep their names; only heartbeats are renamed (MM2's IdentityReplicationPolicy)."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeats(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        return super().topic_source(topic) if self._looks_like_heartbeats(topic) else None

    def upstream_topic(self, topic: str) -> str | None:
        return super().upstream_topic(topic) if self._looks_like_heartbeats(topic) else topic

    def original_topic(self, topic: str) -> str:
        return super().original_topic(topic) if self._looks_like_heartbeats(topic) else topic

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        return super().is_cycle(topic, target_alias) if self._looks_like_heartbeats(topic) else False

    def _looks_like_heartbeats(self, topic: str) -> bool:
        return topic == HEARTBEATS_TOPIC or topic.endswith(self.separator + HEARTBEATS_TOPIC)


_POLICIES: dict[str, type[ReplicationPolicy]] = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": ReplicationPolicy,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,
    "DefaultReplicationPolicy": ReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}


def make_policy(class_name: str, separator: str = ".") -> ReplicationPolicy:
    cls = _POLICIES.get(class_name.strip())
    if cls is None:
        raise ValueError(f"unknown replication.policy.class {class_name!r} (DefaultReplicationPolicy or IdentityReplicationPolicy)")
    return cls(separator)
