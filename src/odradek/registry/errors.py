"""Confluent Schema Registry's REST errors: HTTP status, ``error_code`` and message text.

Every error body is exactly ``{"error_code":<int>,"message":<str>}`` (compact JSON, no other
field): Confluent's clients parse that shape and some break on extra fields. The codes and
message formats are Confluent's (``rest/exceptions/Errors.java`` and the ``Rest*Exception``
classes), so a client that matches on a message or code behaves as against Confluent.
"""

from __future__ import annotations

import json

__all__ = [
    "RegistryError",
    "error_body",
    "id_does_not_match",
    "incompatible_schema",
    "invalid_compatibility_level",
    "invalid_mode",
    "invalid_schema",
    "invalid_subject",
    "invalid_version",
    "operation_not_permitted",
    "reference_exists",
    "schema_not_found",
    "store_error",
    "subject_compatibility_not_configured",
    "subject_mode_not_configured",
    "subject_not_found",
    "subject_not_soft_deleted",
    "subject_soft_deleted",
    "timeout_error",
    "version_not_found",
    "version_not_soft_deleted",
    "version_soft_deleted",
]


def error_body(error_code: int, message: str) -> bytes:
    return json.dumps(
        {"error_code": error_code, "message": message}, separators=(",", ":"), ensure_ascii=False
    ).encode()


class RegistryError(Exception):
    """An error answered as ``status`` with body ``{"error_code","message"}``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> bytes:
        return error_body(self.error_code, self.message)


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(404, 40403, "Schema not found")
    return RegistryError(404, 40403, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: object) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: object) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted",
    )


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def incompatible_schema(message: str) -> RegistryError:
    return RegistryError(409, 40901, message)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(version: str) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level() -> RegistryError:
    return RegistryError(
        422,
        42203,
        "Invalid compatibility level. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive",
    )


def invalid_mode() -> RegistryError:
    return RegistryError(
        422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD."
    )


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(schema_key: str) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {schema_key}.")


def id_does_not_match(message: str) -> RegistryError:
    return RegistryError(422, 42207, message)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not a valid.")


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, message)


def timeout_error(message: str) -> RegistryError:
    return RegistryError(500, 50002, message)
