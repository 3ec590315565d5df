"""odradek.coordinator: the group coordinator (Kafka's classic group protocol).

``GroupCoordinator(broker)`` (coordinator.py) does the I/O; ``GroupMetadataManager``
(group_manager.py) holds the groups and the pure handlers; state.py has the group state
machine; records.py the ``__consumer_offsets`` record formats.
"""

from odradek.coordinator.coordinator import OFFSETS_TOPIC, GroupCoordinator
from odradek.coordinator.group_manager import GroupMetadataManager, JoinParams, OffsetCommitEntry
from odradek.coordinator.state import Errors, GroupConfig, GroupState

__all__ = [
    "OFFSETS_TOPIC",
    "Errors",
    "GroupConfig",
    "GroupCoordinator",
    "GroupMetadataManager",
    "GroupState",
    "JoinParams",
    "OffsetCommitEntry",
]
