"""odradek.coordinator: the group coordinator (Kafka's classic group protocol).

``GroupCoordinator(writer, settings, clock)`` (coordinator.py) does the I/O through a
``PartitionWriter`` (writer.py) the broker implements; ``GroupMetadataManager``
(group_manager.py) holds the groups and the pure handlers; state.py has the group state
machine; records.py the ``__consumer_offsets`` record formats.
"""

from odradek.coordinator.coordinator import OFFSETS_TOPIC, CoordinatorConfig, GroupCoordinator
from odradek.coordinator.group_manager import GroupMetadataManager, JoinParams, OffsetCommitEntry
from odradek.coordinator.state import Errors, GroupConfig, GroupState
from odradek.coordinator.writer import PartitionWriter

__all__ = [
    "OFFSETS_TOPIC",
    "CoordinatorConfig",
    "Errors",
    "GroupConfig",
    "GroupCoordinator",
    "GroupMetadataManager",
    "GroupState",
    "JoinParams",
    "OffsetCommitEntry",
    "PartitionWriter",
]
