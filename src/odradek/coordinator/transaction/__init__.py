"""odradek.coordinator.transaction: the transaction coordinator's pure core (KIP-98, KIP-447,
KIP-890 part 1).

state.py has the transaction state machine and ``TransactionMetadata``; records.py the
``__transaction_state`` record formats; manager.py ``TransactionStateManager``, whose handlers
return (records, response, markers to write). The I/O around it (appending through the
coordinator's ``PartitionWriter``, WriteTxnMarkers to partition leaders, timers) is the broker
integration's: docs/transactions.md.
"""

from odradek.coordinator.transaction.manager import (
    InitProducerIdResult,
    MarkerWrite,
    Outcome,
    TransactionStateManager,
    TxnMarker,
    fenced_error,
)
from odradek.coordinator.transaction.records import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogRecord,
    TransactionLogValue,
)
from odradek.coordinator.transaction.state import (
    Errors,
    TransactionConfig,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
)

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "Errors",
    "InitProducerIdResult",
    "MarkerWrite",
    "Outcome",
    "TransactionConfig",
    "TransactionLogRecord",
    "TransactionLogValue",
    "TransactionMetadata",
    "TransactionResult",
    "TransactionState",
    "TransactionStateManager",
    "TxnMarker",
    "fenced_error",
]
