"""AlterUserScramCredentials (51, KIP-554): set (from the client's salt and salted password;
the password never travels) or delete SCRAM credentials, one result per user.

Checks, with Kafka's errors: an unknown mechanism UNSUPPORTED_SASL_MECHANISM (33);
iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL (93); an empty user name or salt or
salted password UNACCEPTABLE_CREDENTIAL; a user with two alterations of one mechanism
DUPLICATE_RESOURCE (92); deleting a credential that does not exist RESOURCE_NOT_FOUND (91).
A user with any error has none of its alterations applied.

Whether a deleted credential exists is decided by the credential store against the user's
config as stored now (in a cluster: the ZooKeeper znode, read for the conditional write, as
Kafka's ZooKeeper-mode ``AdminManager`` reads it), never against this broker's copy, which
may lag an upsert made through another broker a moment earlier. That check comes after the
request's own checks, so a user with both kinds of error gets the request's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.security.credentials import CredentialNotFoundError, ScramCredentials
from odradek.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
    )

__all__ = ["API", "handle"]

_BY_TYPE = {t: m for m, t in MECHANISM_TYPES.items()}
_NOT_FOUND = "Attempt to delete a user credential that does not exist"


async def handle(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    types = response_types(request)
    store = ctx.services.dynamic_config.store
    credentials = ScramCredentials(lambda: store)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    upserts: dict[str, dict[str, ScramCredential]] = {}
    deletions: dict[str, set[str]] = {}
    seen: set[tuple[str, int]] = set()
    order: list[str] = []

    def fail(user: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(user, (code, message))

    alterations: list[tuple[str, Any]] = [("delete", d) for d in request.deletions]
    alterations += [("upsert", u) for u in request.upsertions]
    for kind, item in alterations:
        user, mech_type = item.name, int(item.mechanism)
        if user not in order:
            order.append(user)
        mechanism = _BY_TYPE.get(mech_type)
        if not user:
            fail(user, ErrorCode.unacceptable_credential, "Username must not be empty")
            continue
        if mechanism is None:
            fail(user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
            continue
        if (user, mech_type) in seen:
            fail(
                user,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
            continue
        seen.add((user, mech_type))
        if kind == "delete":  # its existence is checked by the store, at the write
            deletions.setdefault(user, set()).add(mechanism)
            continue
        iterations = int(item.iterations)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            fail(
                user,
                ErrorCode.unacceptable_credential,
                f"Iterations {iterations} must be between {MIN_ITERATIONS} and "
                f"{MAX_ITERATIONS} for {mechanism}",
            )
            continue
        if not item.salt or not item.salted_password:
            fail(user, ErrorCode.unacceptable_credential, "Salt and password must be given")
            continue
        upserts.setdefault(user, {})[mechanism] = credential_from_salted(
            MECHANISMS[mechanism], bytes(item.salted_password), bytes(item.salt), iterations
        )
    results: list[tuple[str, ErrorCode, str | None]] = []
    for user in order:
        if user in errors:
            code, message = errors[user]
            results.append((user, code, message))
            continue
        try:
            await credentials.alter(user, upserts.get(user, {}), deletions.get(user, set()))
        except CredentialNotFoundError:
            results.append((user, ErrorCode.resource_not_found, _NOT_FOUND))
            continue
        except Exception as exc:
            results.append((user, ErrorCode.unknown_server_error, str(exc)))
            continue
        results.append((user, ErrorCode.none, None))
    return cast(
        "AlterUserScramCredentialsResponse",
        make(
            types.AlterUserScramCredentialsResponse,
            throttle_time=NO_THROTTLE,
            results=tuple(
                make(
                    types.AlterUserScramCredentialsResult,
                    user=user,
                    error_code=code,
                    error_message=message,
                )
                for user, code, message in results
            ),
        ),
    )


def _error(
    request: AlterUserScramCredentialsRequest, code: ErrorCode
) -> AlterUserScramCredentialsResponse:
    types = response_types(request)
    users = dict.fromkeys(
        [*(d.name for d in request.deletions), *(u.name for u in request.upsertions)]
    )
    response: AlterUserScramCredentialsResponse = make(
        types.AlterUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            make(types.AlterUserScramCredentialsResult, user=u, error_code=code, error_message=None)
            for u in users
        ),
    )
    return response


API = ApiSpec(
    key=51,
    name="AlterUserScramCredentials",
    min_version=0,
    max_version=0,
    handler=handle,
    error_response=_error,
)
