"""odradek.mirror: MirrorMaker 2-compatible replication between Kafka-compatible clusters.

Configured with MM2's ``mm2.properties`` (``odradek.mirror.config``); writes MM2's internal
topics in MM2's layouts (``odradek.mirror.records``); names topics by MM2's replication
policies (``odradek.mirror.policy``); runs flows on ``odradek.client.aio`` (``odradek.mirror.flow``).
"""

from __future__ import annotations

from .config import FlowConfig, MirrorConfig, MirrorConfigError, load_config, parse_properties
from .policy import DefaultReplicationPolicy, IdentityReplicationPolicy, ReplicationPolicy
from .records import Checkpoint, Heartbeat, OffsetSync

__all__ = [
    "Checkpoint",
    "DefaultReplicationPolicy",
    "FlowConfig",
    "Heartbeat",
    "IdentityReplicationPolicy",
    "MirrorConfig",
    "MirrorConfigError",
    "OffsetSync",
    "ReplicationPolicy",
    "load_config",
    "parse_properties",
]
