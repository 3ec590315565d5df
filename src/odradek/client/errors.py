"""Client exceptions.

Every error the broker reports carries Kafka's numeric error code (``KafkaError.code``) and
whether Kafka classifies it as retriable. Codes and names come from kio's ``ErrorCode``
(generated from Kafka's own error table).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "AuthenticationError",
    "BrokerNotAvailableError",
    "ConfigError",
    "ErrorCode",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "ProducerClosedError",
    "ProducerFencedError",
    "RebalanceInProgressError",
    "SaslAuthenticationError",
    "SslAuthenticationError",
    "TransactionAbortableError",
    "TransactionStateError",
    "UnsupportedVersionError",
    "raise_for_code",
]


class KafkaError(Exception):
    """An error from the client or the broker. ``code`` is Kafka's error code (-1 = unknown)."""

    def __init__(self, message: str = "", code: int = -1, *, retriable: bool | None = None) -> None:
        self.code = int(code)
        if retriable is None:
            try:
                retriable = ErrorCode(code).retriable
            except ValueError:
                retriable = False
        self.retriable = retriable
        super().__init__(message or self.name)

    @property
    def name(self) -> str:
        try:
            return ErrorCode(self.code).name.upper()
        except ValueError:
            return f"ERROR_{self.code}"

    def __str__(self) -> str:
        msg = super().__str__()
        return f"[{self.name}] {msg}" if self.code not in (-1, 0) else msg


class ConfigError(KafkaError, ValueError):
    """Unknown configuration key or invalid value (the message names the key)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, -1, retriable=False)


class KafkaConnectionError(KafkaError, ConnectionError):
    """A broker connection failed or closed with requests in flight (retriable)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, -1, retriable=True)


class BrokerNotAvailableError(KafkaConnectionError):
    """A request was routed to a broker id the metadata no longer lists (it left the cluster
    since the leader or coordinator was cached): retriable like a closed connection, after a
    metadata refresh or a new FindCoordinator (Kafka's BROKER_NOT_AVAILABLE, code 8)."""

    def __init__(self, message: str) -> None:
        KafkaError.__init__(self, message, int(ErrorCode.broker_not_available), retriable=True)


class AuthenticationError(KafkaError):
    """The broker did not accept this client's credentials (Kafka's
    ``AuthenticationException``): not retriable, raised to the caller at once instead of
    retrying until a timeout. Subclasses say whether TLS or SASL refused."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message, code, retriable=False)


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed (Kafka's ``SaslAuthenticationException``,
    SASL_AUTHENTICATION_FAILED = 58): a wrong password, an unknown user, a refused token, a
    mechanism the broker does not enable (UNSUPPORTED_SASL_MECHANISM = 33). The message is the
    broker's."""

    def __init__(self, message: str, code: int = int(ErrorCode.sasl_authentication_failed)) -> None:
        super().__init__(message, code)


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed (Kafka's ``SslAuthenticationException``): the broker's
    certificate does not verify against the trust store or its host name does not match, or
    the broker refused this client's certificate (or its absence, with
    ``ssl.client.auth=required``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, -1)  # Kafka has no error code for it: it never crosses the wire


class KafkaTimeoutError(KafkaError, TimeoutError):
    """A client-side deadline passed (request.timeout.ms, max.block.ms, delivery.timeout.ms)."""

    def __init__(self, message: str = "timed out") -> None:
        super().__init__(message, int(ErrorCode.request_timed_out), retriable=True)


class UnsupportedVersionError(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(message, int(ErrorCode.unsupported_version), retriable=False)


class ProducerClosedError(KafkaError):
    def __init__(self, message: str = "producer is closed") -> None:
        super().__init__(message, -1, retriable=False)


class ProducerFencedError(KafkaError):
    """Fatal: another producer instance initialised the same ``transactional.id`` (or the
    coordinator aborted this one's transaction on its timeout and bumped the epoch). The
    producer can do nothing more: close it."""

    fatal = True
    txn_requires_abort = False

    def __init__(self, message: str, code: int = int(ErrorCode.producer_fenced)) -> None:
        super().__init__(message, code, retriable=False)


class TransactionAbortableError(KafkaError):
    """The current transaction failed (a send or a transactional request failed): call
    ``abort_transaction()``, then begin a new transaction. ``__cause__`` holds the failure."""

    fatal = False
    txn_requires_abort = True

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message, code, retriable=False)


class TransactionStateError(KafkaError):
    """A transactional call made in the wrong state (e.g. ``send`` before
    ``begin_transaction()``, ``commit_transaction()`` with no transaction): a usage error."""

    fatal = False
    txn_requires_abort = False

    def __init__(self, message: str) -> None:
        super().__init__(message, -1, retriable=False)


class RebalanceInProgressError(KafkaError):
    def __init__(self, message: str = "rebalance in progress") -> None:
        super().__init__(message, int(ErrorCode.rebalance_in_progress), retriable=True)


def raise_for_code(code: int, message: str = "") -> None:
    """Raise ``KafkaError(code)`` unless ``code`` is 0 (NONE)."""
    if code:
        raise KafkaError(message, int(code))
