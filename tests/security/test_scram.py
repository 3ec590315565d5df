"""SCRAM-SHA-256/512 server against scramp's client (an independent implementation), the
credential format, PLAIN, JAAS parsing and the SASL state machine, without sockets."""

from __future__ import annotations

import base64

import pytest
from scramp import ScramClient, ScramMechanism

from odradek.security.jaas import JaasConfigError, parse_jaas
from odradek.security.plain import PlainServer
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    SaslServerAuthenticator,
    SaslState,
    ScramMechanismServer,
)
from odradek.security.scram import (
    AuthenticationError,
    ScramCredential,
    ScramServer,
    scram_credential,
)

MECHS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def _exchange(mech: str, cred: ScramCredential, user: str, password: str) -> None:
    server = ScramServer(mech, lambda u: cred if u == "alice" else None)
    client = ScramClient([mech], user, password)
    client.set_server_first(server.client_first(client.get_client_first().encode()).decode())
    final = server.client_final(client.get_client_final().encode())
    client.set_server_final(final.decode())  # scramp checks the server's signature


@pytest.mark.parametrize("mech", MECHS)
def test_scramp_client_authenticates(mech: str) -> None:
    _exchange(mech, scram_credential(mech, "pw", 4096), "alice", "pw")


@pytest.mark.parametrize("mech", MECHS)
def test_credential_matches_scramp(mech: str) -> None:
    """Same salt, password and iterations: scramp's stored and server keys are ours."""
    salt = b"0123456789abcdef"
    ours = scram_credential(mech, "secret", 8192, salt=salt)
    m = ScramMechanism(mech)
    _salt, stored_key, server_key, _iterations = m.make_auth_info("secret", 8192, salt)
    assert (ours.stored_key, ours.server_key, ours.iterations) == (stored_key, server_key, 8192)
    text = ours.to_config()
    assert text.startswith(f"salt={base64.b64encode(salt).decode()},stored_key=")
    assert text.endswith(",iterations=8192")
    assert ScramCredential.from_config(text) == ours


@pytest.mark.parametrize("mech", MECHS)
def test_wrong_password_and_unknown_user_fail_alike(mech: str) -> None:
    cred = scram_credential(mech, "pw", 4096)
    messages = []
    for user, password in (("alice", "nope"), ("mallory", "pw")):
        server = ScramServer(mech, lambda u: cred if u == "alice" else None)
        client = ScramClient([mech], user, password)
        first = server.client_first(client.get_client_first().encode()).decode()
        assert first.startswith("r=") and ",s=" in first and first.endswith(",i=4096")
        client.set_server_first(first)
        with pytest.raises(AuthenticationError) as err:
            server.client_final(client.get_client_final().encode())
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "invalid credentials" in messages[0]


def test_replayed_final_and_tampered_nonce_fail() -> None:
    mech = "SCRAM-SHA-256"
    cred = scram_credential(mech, "pw", 4096)
    server = ScramServer(mech, lambda u: cred)
    client = ScramClient([mech], "alice", "pw")
    client.set_server_first(server.client_first(client.get_client_first().encode()).decode())
    final = client.get_client_final().encode()
    # a second exchange with the first one's final message (a replay): another server nonce
    other = ScramServer(mech, lambda u: cred)
    other.client_first(b"n,,n=alice,r=" + final.split(b"r=")[1].split(b",")[0][:8])
    with pytest.raises(AuthenticationError):
        other.client_final(final)
    with pytest.raises(AuthenticationError):
        server.client_final(final.replace(b"r=", b"r=x"))


@pytest.mark.parametrize(
    "message", [b"", b"garbage", b"n,,r=abc", b"x,,n=a,r=b", b"n,,n=a=b,r=c", b"\xff\xfe"]
)
def test_garbage_client_first_is_an_authentication_error(message: bytes) -> None:
    server = ScramServer("SCRAM-SHA-512", lambda u: None)
    with pytest.raises(AuthenticationError):
        server.client_first(message)


def test_plain() -> None:
    users = {"alice": "pw"}
    assert PlainServer(users).evaluate(b"\x00alice\x00pw") == b""
    for bad in (b"\x00alice\x00nope", b"\x00bob\x00pw", b"alice\x00pw", b"bob\x00alice\x00pw"):
        with pytest.raises(AuthenticationError):
            PlainServer(users).evaluate(bad)


def test_jaas() -> None:
    entry = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="a\\"b" user_admin="x" user_alice=y;'
    )
    assert entry.control_flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": 'a"b',
        "user_admin": "x",
        "user_alice": "y",
    }
    for bad in ("", "Module required", "Module nope a=b;", "M required a=b; N required;"):
        with pytest.raises(JaasConfigError):
            parse_jaas(bad)


def _authenticator(**kw: int) -> SaslServerAuthenticator:
    cred = scram_credential("SCRAM-SHA-512", "pw", 4096)

    def new(mech: str) -> ScramMechanismServer | PlainServer:
        if mech == "PLAIN":
            return PlainServer({"alice": "pw"})
        return ScramMechanismServer(ScramServer(mech, lambda u: cred if u == "alice" else None))

    return SaslServerAuthenticator("SASL_SSL", ["PLAIN", "SCRAM-SHA-512"], new, **kw)


def test_state_machine_v1() -> None:
    auth = _authenticator()
    assert auth.allows(18) and auth.allows(17) and not auth.allows(3) and not auth.allows(36)
    assert auth.handshake(1, "PLAIN") == (0, ("PLAIN", "SCRAM-SHA-512"))
    assert auth.state is SaslState.AUTHENTICATE and not auth.allows(18) and auth.allows(36)
    result = auth.authenticate(b"\x00alice\x00pw")
    assert result.error_code == 0 and auth.principal == KafkaPrincipal("User", "alice")
    assert auth.allows(3)
    assert auth.handshake(1, "PLAIN")[0] == ILLEGAL_SASL_STATE  # no re-authentication
    assert auth.authenticate(b"x").error_code == ILLEGAL_SASL_STATE


def test_state_machine_v0_raw_scram() -> None:
    auth = _authenticator()
    assert auth.handshake(0, "SCRAM-SHA-512")[0] == 0
    assert auth.raw_tokens and not auth.allows(36)
    client = ScramClient(["SCRAM-SHA-512"], "alice", "pw")
    client.set_server_first(auth.raw_token(client.get_client_first().encode()).decode())
    client.set_server_final(auth.raw_token(client.get_client_final().encode()).decode())
    assert auth.authenticated and str(auth.principal) == "User:alice"


def test_state_machine_failures() -> None:
    auth = _authenticator()
    assert auth.handshake(1, "GSSAPI")[0] == UNSUPPORTED_SASL_MECHANISM
    assert auth.state is SaslState.FAILED and not auth.allows(18)
    auth = _authenticator()
    auth.handshake(1, "PLAIN")
    result = auth.authenticate(b"\x00alice\x00wrong")
    assert result.error_code == SASL_AUTHENTICATION_FAILED
    assert result.error_message == "Authentication failed: Invalid username or password"
    assert auth.state is SaslState.FAILED
    auth = _authenticator(max_receive_size=100)
    auth.handshake(1, "PLAIN")
    assert auth.authenticate(b"\x00alice\x00" + b"p" * 200).error_code == SASL_AUTHENTICATION_FAILED


def test_reauthentication_keeps_the_principal() -> None:
    now = [0]
    auth = _authenticator(reauth_ms=1000, now_ms=lambda: now[0])
    auth.handshake(1, "PLAIN")
    assert auth.authenticate(b"\x00alice\x00pw").session_lifetime_ms == 1000
    now[0] = 2000
    assert auth.session_expired()
    assert auth.handshake(1, "PLAIN")[0] == 0
    assert auth.authenticate(b"\x00alice\x00pw").error_code == 0
    assert not auth.session_expired()


@pytest.mark.parametrize("mech", [*MECHS, "PLAIN"])
def test_broker_side_client_against_the_server(mech: str) -> None:
    from odradek.security.sasl_client import SaslClient

    auth = _authenticator()
    if mech == "SCRAM-SHA-256":  # the authenticator's listener serves PLAIN and SHA-512 only
        assert auth.handshake(1, mech)[0] == UNSUPPORTED_SASL_MECHANISM
        return
    assert auth.handshake(1, mech)[0] == 0
    client = SaslClient(mech, "alice", "pw")
    answer = auth.authenticate(client.first())
    assert answer.error_code == 0
    if mech != "PLAIN":
        final = auth.authenticate(client.respond(answer.auth_bytes))
        assert final.error_code == 0
        client.check_final(final.auth_bytes)
    assert str(auth.principal) == "User:alice"


def test_broker_side_scram_client_against_scramp_server() -> None:
    from scramp import ScramMechanism

    from odradek.security.sasl_client import SaslClient

    m = ScramMechanism("SCRAM-SHA-256")
    salt, stored, server_key, iterations = m.make_auth_info("pw", 4096)
    server = m.make_server(lambda _u: (salt, stored, server_key, iterations))
    client = SaslClient("SCRAM-SHA-256", "alice", "pw")
    server.set_client_first(client.first().decode())
    server.set_client_final(client.respond(server.get_server_first().encode()).decode())
    client.check_final(server.get_server_final().encode())


def _jwt(claims: dict[str, object], alg: str = "none") -> str:
    import json

    def part(d: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': alg})}.{part(claims)}."


def test_oauthbearer_unsecured_tokens() -> None:
    from odradek.security.oauthbearer import OAuthBearerUnsecuredServer

    now_ms = 1_700_000_000_000

    def message(token: str) -> bytes:
        return f"n,,\x01auth=Bearer {token}\x01\x01".encode()

    server = OAuthBearerUnsecuredServer({}, lambda: now_ms)
    assert server.evaluate(message(_jwt({"sub": "dave", "exp": now_ms / 1000 + 60}))) == b""
    assert server.complete and server.username == "dave" and server.expires_ms == now_ms + 60_000
    for claims, alg in (
        ({"sub": "dave", "exp": now_ms / 1000 - 1}, "none"),  # expired
        ({"sub": "dave"}, "none"),  # no exp
        ({"exp": now_ms / 1000 + 60}, "none"),  # no principal
        ({"sub": "dave", "exp": now_ms / 1000 + 60}, "HS256"),  # signed: not an unsecured token
    ):
        server = OAuthBearerUnsecuredServer({}, lambda: now_ms)
        assert server.evaluate(message(_jwt(claims, alg))) == b'{"status": "invalid_token"}'
        with pytest.raises(AuthenticationError):
            server.evaluate(b"\x01")  # the client's answer to the error challenge
    with pytest.raises(AuthenticationError):
        OAuthBearerUnsecuredServer({}, lambda: now_ms).evaluate(b"garbage")
