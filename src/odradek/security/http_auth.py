"""Who is asking, over HTTP: the broker's users and ACLs for its HTTP listeners (the console,
``/metrics``, the schema registry).

``HttpAuthenticator`` is what the broker hands those listeners (they never see the broker):

* ``await password(user, password)``: the user's stored SCRAM credential (SCRAM-SHA-512 first,
  then SCRAM-SHA-256) checked as RFC 5802's server checks a proof: ``SaltedPassword =
  Hi(password, salt, i)``, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` compared in
  constant time with the stored one. The password is never kept: a success is remembered (so
  that a client sending HTTP Basic on every request does not pay PBKDF2 each time) under an
  HMAC of user and password with a per-process secret, together with the StoredKey it matched,
  and is forgotten when the credential changes. An unknown user costs the same PBKDF2 as a
  known one, and both answer None: whether a user exists does not show.
* ``await basic(header)``: the same for an ``Authorization: Basic`` header.
* ``token(jwt)``: a bearer token checked by the OAUTHBEARER validator of the broker's listeners
  (unsecured JWTs or a JWKS, ``security/oauthbearer.py``), the principal from its ``sub``
  claim (or the configured claim), the expiry from ``exp``.
* ``authorize(principal, host, operation, resource type, name)``: the broker's authorizer
  (``super.users``, ``allow.everyone.if.no.acl.found``, DENY first, implied DESCRIBE).
* ``current(principal)``: False once a password session's user was removed or its password
  changed (the session's fingerprint no longer matches the stored credential).

``subject_topic(subject)``: the topic whose ACLs govern a schema registry subject, by
Confluent's ``TopicNameStrategy`` (``<topic>-key`` / ``<topic>-value``; any other subject is
its own name).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from odradek.security.acls import AclOperation, ResourceType
from odradek.security.authorizer import AclAuthorizer
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import MechanismServer
from odradek.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential

__all__ = [
    "CLUSTER_NAME",
    "HttpAuthenticator",
    "HttpPrincipal",
    "parse_basic",
    "subject_topic",
    "verify_scram_password",
]

CLUSTER_NAME = "kafka-cluster"
"""The name of the CLUSTER resource (Kafka's)."""
_PREFERRED = ("SCRAM-SHA-512", "SCRAM-SHA-256")
_REMEMBERED = 1024


def verify_scram_password(credential: ScramCredential, mechanism: str, password: str) -> bool:
    """Does ``password`` produce ``credential``'s StoredKey (RFC 5802, with its salt and
    iteration count)? Costs one PBKDF2 of ``credential.iterations`` rounds."""
    hash_name = MECHANISMS[mechanism]
    salted = hashlib.pbkdf2_hmac(
        hash_name, password.encode("utf-8"), credential.salt, credential.iterations
    )
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    return hmac.compare_digest(stored_key, credential.stored_key)


def parse_basic(header: str) -> tuple[str, str] | None:
    """``Basic base64(user:password)`` -> (user, password); None when it is not that."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, sep, password = text.partition(":")
    if not sep or not user:
        return None
    return user, password


def subject_topic(subject: str) -> str:
    """``orders-value`` -> ``orders``; ``orders-key`` -> ``orders``; ``com.acme.Event`` ->
    ``com.acme.Event`` (TopicNameStrategy, else the subject itself)."""
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


@dataclass(frozen=True, slots=True)
class HttpPrincipal:
    """An authenticated HTTP user: ``user`` (``alice``), how (``password``, ``token`` or
    ``internal``), when it stops being valid (epoch ms, None: never by itself) and, for a
    password, a fingerprint of the credential it matched."""

    user: str
    method: str
    expires_ms: int | None = None
    fingerprint: str = ""

    @property
    def principal(self) -> KafkaPrincipal:
        return KafkaPrincipal("User", self.user)

    def __str__(self) -> str:
        return f"User:{self.user}"


def _fingerprint(credential: ScramCredential) -> str:
    return hashlib.sha256(credential.stored_key).hexdigest()[:16]


class HttpAuthenticator:
    """See the module docstring. ``credential(mechanism, user)`` looks a SCRAM credential up;
    ``authorizer()`` returns the broker's authorizer (None: everything is allowed);
    ``token_server()`` makes an OAUTHBEARER mechanism server (None: no bearer tokens)."""

    def __init__(
        self,
        credential: Callable[[str, str], ScramCredential | None],
        authorizer: Callable[[], AclAuthorizer | None],
        token_server: Callable[[], MechanismServer] | None = None,
    ) -> None:
        self._credential = credential
        self._authorizer = authorizer
        self._token_server = token_server
        self._secret = secrets.token_bytes(32)
        self._remembered: OrderedDict[bytes, tuple[str, bytes]] = OrderedDict()
        self.internal_token = secrets.token_urlsafe(32)
        """A bearer token for the process's own calls (the console reading its broker's
        registry); never leaves the process."""
        self._dummy = ScramCredential(secrets.token_bytes(32), b"", b"", MIN_ITERATIONS)

    @property
    def tokens(self) -> bool:
        """Are bearer tokens accepted?"""
        return self._token_server is not None

    def _lookup(self, user: str) -> tuple[str, ScramCredential] | None:
        for mechanism in _PREFERRED:
            credential = self._credential(mechanism, user)
            if credential is not None:
                return mechanism, credential
        return None

    async def password(self, user: str, password: str) -> HttpPrincipal | None:
        """The principal when ``password`` is ``user``'s SCRAM password, else None."""
        found = self._lookup(user)
        key = hmac.new(self._secret, f"{user}\0{password}".encode(), "sha256").digest()
        if found is not None:
            mechanism, credential = found
            if self._remembered.get(key) == (mechanism, credential.stored_key):
                self._remembered.move_to_end(key)
                return HttpPrincipal(user, "password", None, _fingerprint(credential))
        else:
            mechanism, credential = "SCRAM-SHA-256", self._dummy
        loop = asyncio.get_running_loop()
        ok = await loop.run_in_executor(
            None, verify_scram_password, credential, mechanism, password
        )
        if not ok or found is None:
            return None
        self._remembered[key] = (mechanism, credential.stored_key)
        if len(self._remembered) > _REMEMBERED:
            self._remembered.popitem(last=False)
        return HttpPrincipal(user, "password", None, _fingerprint(credential))

    async def basic(self, header: str) -> HttpPrincipal | None:
        parsed = parse_basic(header)
        if parsed is None:
            return None
        return await self.password(*parsed)

    def token(self, token: str) -> HttpPrincipal | None:
        """The principal of a valid bearer token (None: refused, or no validator); its
        ``expires_ms`` is the token's ``exp``."""
        if token == self.internal_token:
            return HttpPrincipal("odradek-internal", "internal")
        if self._token_server is None or not token or any(c in token for c in "\x01 "):
            return None
        server = self._token_server()
        try:
            server.evaluate(b"n,,\x01auth=Bearer " + token.encode("ascii") + b"\x01\x01")
        except Exception:  # AuthenticationError, a token that is not ASCII
            return None
        user = server.username
        if not server.complete or not user:
            return None
        return HttpPrincipal(str(user), "token", getattr(server, "expires_ms", None))

    def current(self, who: HttpPrincipal) -> bool:
        """Does a session made for ``who`` still hold (same password credential)?"""
        if who.method != "password":
            return True
        found = self._lookup(who.user)
        return found is not None and _fingerprint(found[1]) == who.fingerprint

    def authorize(
        self,
        who: HttpPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if who.method == "internal":
            return True
        authorizer = self._authorizer()
        if authorizer is None:
            return True
        return authorizer.authorize(who.principal, host, operation, resource_type, name)
