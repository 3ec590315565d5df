"""Logins to the console, and what each user may see, when the broker has an authorizer.

The console is handed an ``HttpAuthenticator`` (``odradek.security.http_auth``: the broker's
SCRAM users, its OAUTHBEARER validator, its authorizer); it never sees the broker itself.

A request is authenticated by, in order:

1. the session cookie ``odradek_session`` (set by ``POST /login``): ``<payload>.<signature>``,
   both base64url; the payload is the JSON ``{"u": user, "m": "password"|"token", "e": expiry
   (epoch ms), "f": credential fingerprint}``, the signature its HMAC-SHA256 with a secret drawn
   when the console starts (so a restart ends every session). A session lasts
   ``http.session.timeout.ms`` (and never past a token's ``exp``); a password session also ends
   when the user's SCRAM credential is removed or changed. The cookie is ``HttpOnly``,
   ``SameSite=Strict``, ``Path=/``, and ``Secure`` on an HTTPS listener;
2. an ``Authorization: Basic`` header (a SCRAM user's name and password: for scripts and
   Prometheus' ``basic_auth``);
3. an ``Authorization: Bearer`` header (a token the broker's OAUTHBEARER validator accepts).

A ``Viewer`` is one authenticated user at one client address: it asks the authorizer, and
filters a ``ClusterSnapshot`` down to the topics and groups the user may DESCRIBE (a group's
partitions and assignments keep only such topics).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Iterable

from odradek.console.http import Request
from odradek.metrics.cluster import ClusterSnapshot, GroupView
from odradek.security.acls import AclOperation, ResourceType
from odradek.security.http_auth import (
    CLUSTER_NAME,
    HttpAuthenticator,
    HttpPrincipal,
    subject_topic,
)

__all__ = ["SESSION_COOKIE", "ConsoleAuth", "Viewer", "safe_next"]

SESSION_COOKIE = "odradek_session"
DEFAULT_SESSION_TIMEOUT_MS = 8 * 3600 * 1000
DEFAULT_SKIP_PATHS = ("/metrics", "/health")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def safe_next(target: str) -> str:
    """Where to go after logging in: a path of this console only (never ``//host``)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


class Viewer:
    """One authenticated user at one client address, and what they may see."""

    def __init__(self, auth: HttpAuthenticator, who: HttpPrincipal, host: str) -> None:
        self.auth = auth
        self.who = who
        self.host = host

    @property
    def user(self) -> str:
        return self.who.user

    def may(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.auth.authorize(self.who, self.host, operation, resource_type, name)

    def topic(self, name: str, operation: AclOperation = AclOperation.DESCRIBE) -> bool:
        return self.may(operation, ResourceType.TOPIC, name)

    def group(self, name: str, operation: AclOperation = AclOperation.DESCRIBE) -> bool:
        return self.may(operation, ResourceType.GROUP, name)

    def cluster(self, operation: AclOperation = AclOperation.DESCRIBE) -> bool:
        return self.may(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def subject(self, subject: str) -> bool:
        """May the user read the schema registry subject (READ on its topic)?"""
        return self.topic(subject_topic(subject), AclOperation.READ)

    def subjects(self, names: Iterable[str]) -> list[str]:
        return [s for s in names if self.subject(s)]

    def _group_view(self, g: GroupView) -> GroupView:
        members = [
            dataclasses.replace(m, assignment=[tp for tp in m.assignment if self.topic(tp[0])])
            for m in g.members
        ]
        return dataclasses.replace(
            g,
            members=members,
            partitions=[p for p in g.partitions if self.topic(p.topic)],
        )

    def snapshot(self, snap: ClusterSnapshot) -> ClusterSnapshot:
        """``snap`` with only the topics and groups the user may DESCRIBE."""
        return dataclasses.replace(
            snap,
            topics={n: t for n, t in snap.topics.items() if self.topic(n)},
            groups={n: self._group_view(g) for n, g in snap.groups.items() if self.group(n)},
            errors=list(snap.errors) if self.cluster() else [],
        )


class ConsoleAuth:
    """Sessions and request authentication for one console (see the module docstring).
    ``secure`` marks cookies ``Secure`` (an HTTPS listener); ``skip_paths`` are served without
    a login (``http.authentication.skip.paths``)."""

    def __init__(
        self,
        auth: HttpAuthenticator,
        *,
        now_ms: Callable[[], int],
        secure: bool = False,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        skip_paths: Iterable[str] = DEFAULT_SKIP_PATHS,
    ) -> None:
        self.auth = auth
        self.now_ms = now_ms
        self.secure = secure
        self.session_timeout_ms = session_timeout_ms
        self.skip_paths = frozenset(p.rstrip("/") or "/" for p in skip_paths if p.strip())
        self._secret = secrets.token_bytes(32)

    # -- the cookie -----------------------------------------------------------------------

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()

    def session_cookie(self, who: HttpPrincipal) -> str:
        """A ``Set-Cookie`` value for a new session of ``who``."""
        now = self.now_ms()
        expires = now + self.session_timeout_ms
        if who.expires_ms is not None:
            expires = min(expires, who.expires_ms)
        payload = json.dumps(
            {"u": who.user, "m": who.method, "e": expires, "f": who.fingerprint},
            separators=(",", ":"),
        ).encode()
        value = f"{_b64(payload)}.{_b64(self._sign(payload))}"
        max_age = max(0, (expires - now) // 1000)
        return self._cookie(value, max_age)

    def clear_cookie(self) -> str:
        return self._cookie("", 0)

    def _cookie(self, value: str, max_age: int) -> str:
        flags = f"; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict"
        return f"{SESSION_COOKIE}={value}{flags}" + ("; Secure" if self.secure else "")

    def read_session(self, value: str) -> HttpPrincipal | None:
        """The principal of a valid, unexpired, current session cookie value, else None."""
        payload_text, sep, sig_text = value.partition(".")
        if not sep:
            return None
        try:
            payload, sig = _unb64(payload_text), _unb64(sig_text)
        except (binascii.Error, ValueError):
            return None
        if not hmac.compare_digest(sig, self._sign(payload)):
            return None
        try:
            data = json.loads(payload)
            who = HttpPrincipal(str(data["u"]), str(data["m"]), int(data["e"]), str(data["f"]))
        except (ValueError, KeyError, TypeError):
            return None
        if who.expires_ms is not None and who.expires_ms <= self.now_ms():
            return None
        if who.method not in ("password", "token") or not self.auth.current(who):
            return None
        return who

    # -- requests -------------------------------------------------------------------------

    def skips(self, path: str) -> bool:
        return (path.rstrip("/") or "/") in self.skip_paths

    async def authenticate(self, req: Request) -> HttpPrincipal | None:
        """The request's user (cookie, then Basic, then Bearer), or None."""
        value = req.cookies().get(SESSION_COOKIE)
        if value:
            who = self.read_session(value)
            if who is not None:
                return who
        header = req.headers.get("authorization", "")
        scheme, _, credentials = header.strip().partition(" ")
        if scheme.lower() == "basic":
            return await self.auth.basic(header)
        if scheme.lower() == "bearer":
            who = self.auth.token(credentials.strip())
            if who is not None and who.method == "internal":
                return None  # the process's own token is for its own registry only
            if who is not None and who.expires_ms is not None and who.expires_ms <= self.now_ms():
                return None
            return who
        return None

    async def login(self, form: dict[str, str]) -> HttpPrincipal | None:
        """A login form's user: ``username`` + ``password``, or ``token``."""
        token = form.get("token", "").strip()
        if token:
            who = self.auth.token(token)
            return None if who is None or who.method == "internal" else who
        user = form.get("username", "").strip()
        if not user:
            return None
        return await self.auth.password(user, form.get("password", ""))

    def viewer(self, who: HttpPrincipal, host: str) -> Viewer:
        return Viewer(self.auth, who, host)
