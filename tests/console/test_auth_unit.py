"""The pieces of HTTP logins without a broker: password checks against credentials made by
scramp (an independent SCRAM implementation), Basic headers, the subject -> topic mapping, the
session cookie with an injected clock, and what a viewer is shown of a snapshot."""

from __future__ import annotations

import asyncio
import base64

import pytest
from scramp import ScramMechanism

from odradek.console.auth import SESSION_COOKIE, ConsoleAuth, safe_next
from odradek.console.http import Request
from odradek.metrics.cluster import (
    ClusterSnapshot,
    GroupPartitionView,
    GroupView,
    MemberView,
    TopicView,
)
from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.authorizer import AclAuthorizer, AuthorizerConfig
from odradek.security.http_auth import (
    HttpAuthenticator,
    HttpPrincipal,
    parse_basic,
    subject_topic,
    verify_scram_password,
)
from odradek.security.scram import ScramCredential

MECHS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def scramp_credential(mech: str, password: str, iterations: int = 4096) -> ScramCredential:
    salt, stored_key, server_key, iterations = ScramMechanism(mech).make_auth_info(
        password, iterations, b"0123456789abcdef"
    )
    return ScramCredential(salt, stored_key, server_key, iterations)


@pytest.mark.parametrize("mech", MECHS)
def test_password_checked_against_a_credential_scramp_made(mech: str) -> None:
    credential = scramp_credential(mech, "s3cret", 8192)
    assert verify_scram_password(credential, mech, "s3cret")
    assert not verify_scram_password(credential, mech, "s3cret ")
    assert not verify_scram_password(credential, mech, "")


def test_basic_header() -> None:
    value = base64.b64encode(b"alice:pa:ss").decode()
    assert parse_basic(f"Basic {value}") == ("alice", "pa:ss")
    assert parse_basic(f"basic {value}") == ("alice", "pa:ss")
    assert parse_basic("Bearer abc") is None
    assert parse_basic("Basic !!!") is None
    assert parse_basic("Basic " + base64.b64encode(b"no-colon").decode()) is None


def test_subject_topic_by_topic_name_strategy() -> None:
    assert subject_topic("orders-value") == "orders"
    assert subject_topic("orders-key") == "orders"
    assert subject_topic("com.acme.Event") == "com.acme.Event"
    assert subject_topic("-value") == "-value"


def test_safe_next() -> None:
    assert safe_next("/topics?x=1") == "/topics?x=1"
    for bad in ("//evil.example/", "https://evil.example/", "/\\evil", "topics"):
        assert safe_next(bad) == "/"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def authenticator(
    credentials: dict[str, ScramCredential], authorizer: AclAuthorizer | None = None
) -> HttpAuthenticator:
    def lookup(mech: str, user: str) -> ScramCredential | None:
        c = credentials.get(user)
        return c if c is not None and mech == "SCRAM-SHA-256" else None

    return HttpAuthenticator(lookup, lambda: authorizer)


def cookie_value(set_cookie: str) -> str:
    return set_cookie.split(";", 1)[0].removeprefix(f"{SESSION_COOKIE}=")


def request_with(cookie: str) -> Request:
    return Request("GET", "/", {}, {"cookie": f"other=1; {SESSION_COOKIE}={cookie}"})


def test_session_cookie_expires_and_is_bound_to_the_credential() -> None:
    creds = {"alice": scramp_credential("SCRAM-SHA-256", "pw")}
    clock = Clock()
    auth = ConsoleAuth(authenticator(creds), now_ms=clock, session_timeout_ms=60_000)

    who = asyncio.run(auth.auth.password("alice", "pw"))
    assert who is not None and str(who) == "User:alice"
    assert asyncio.run(auth.auth.password("alice", "wrong")) is None
    assert asyncio.run(auth.auth.password("nobody", "pw")) is None
    set_cookie = auth.session_cookie(who)
    assert "Max-Age=60" in set_cookie and "Secure" not in set_cookie
    value = cookie_value(set_cookie)
    assert asyncio.run(auth.authenticate(request_with(value))) == HttpPrincipal(
        "alice", "password", 1_060_000, who.fingerprint
    )
    clock.ms += 59_999
    assert auth.read_session(value) is not None
    clock.ms += 1
    assert auth.read_session(value) is None  # expired
    clock.ms -= 10_000
    creds["alice"] = scramp_credential("SCRAM-SHA-256", "new")
    assert auth.read_session(value) is None  # the password changed
    # another console (another secret) does not take it
    other = ConsoleAuth(authenticator(creds), now_ms=clock)
    assert other.read_session(value) is None


def test_token_sessions_end_with_the_token() -> None:
    clock = Clock()
    auth = ConsoleAuth(authenticator({}), now_ms=clock, secure=True)
    who = HttpPrincipal("carol", "token", clock.ms + 5_000)
    set_cookie = auth.session_cookie(who)
    assert "Max-Age=5;" in set_cookie and set_cookie.endswith("; Secure")
    value = cookie_value(set_cookie)
    assert auth.read_session(value) is not None
    clock.ms += 5_000
    assert auth.read_session(value) is None


def test_a_viewer_sees_only_described_topics_and_groups() -> None:
    authorizer = AclAuthorizer(AuthorizerConfig("kafka.security.authorizer.AclAuthorizer"))

    def allow(rtype: ResourceType, name: str, op: AclOperation) -> None:
        entry = AccessControlEntry("User:alice", "*", op, AclPermissionType.ALLOW)
        authorizer.add(AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL), entry))

    allow(ResourceType.TOPIC, "mine", AclOperation.READ)
    allow(ResourceType.GROUP, "g", AclOperation.DESCRIBE)
    auth = ConsoleAuth(authenticator({}, authorizer), now_ms=Clock())
    viewer = auth.viewer(HttpPrincipal("alice", "password"), "127.0.0.1")

    def topic(name: str) -> TopicView:
        return TopicView(name, False, [])

    def gp(t: str) -> GroupPartitionView:
        return GroupPartitionView(t, 0, 1, 2, 1, None)

    member = MemberView("m", "c", "/127.0.0.1", None, [("mine", 0), ("theirs", 0)])
    group = GroupView("g", "Stable", "consumer", "range", [member], [gp("mine"), gp("theirs")])
    snap = ClusterSnapshot(
        0,
        "id",
        0,
        [],
        {"mine": topic("mine"), "theirs": topic("theirs")},
        {"g": group, "h": GroupView("h", "Empty", "consumer", "", [], [])},
        errors=["theirs: something"],
    )
    seen = viewer.snapshot(snap)
    assert list(seen.topics) == ["mine"] and list(seen.groups) == ["g"]
    assert [p.topic for p in seen.groups["g"].partitions] == ["mine"]
    assert seen.groups["g"].members[0].assignment == [("mine", 0)]
    assert seen.errors == []
    assert len(snap.topics) == 2 and len(group.partitions) == 2  # the shared snapshot is intact
    assert viewer.subject("mine-value") and not viewer.subject("theirs-value")
