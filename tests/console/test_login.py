"""The console over HTTPS with logins, against a real broker process with an authorizer: a real
HTTPS client (requests, verifying the test CA), SCRAM users' passwords, unsecured bearer
tokens, the session cookie, and what each user's ACLs let them see."""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType, ScramMechanism
from cryptography import x509
from tests.certs import Certs, make_certs

from odradek.testing import wait_until

from .secured import (
    PASSWORDS,
    TIMEOUT,
    Secured,
    allow,
    create_topics,
    running_secured_broker,
    set_password,
    unsecured_jwt,
)

ALICE_TOPIC, BOB_TOPIC, CAROL_TOPIC = "alice-orders", "bob-events", "carol-audit"
ALICE_GROUP, BOB_GROUP = "alice-group", "bob-group"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secured(certs: Certs) -> Iterator[Secured]:
    for s in running_secured_broker(certs):
        prepare(s)
        yield s


def prepare(s: Secured) -> None:
    """Topics, records, committed offsets and ACLs: alice may READ ``alice-*`` and her group,
    bob DESCRIBE his topic and group, carol (a token's subject) DESCRIBE hers."""
    create_topics(s, ALICE_TOPIC, BOB_TOPIC, CAROL_TOPIC)
    producer = Producer({"bootstrap.servers": s.bootstrap_servers})
    for topic in (ALICE_TOPIC, BOB_TOPIC):
        for i in range(5):
            producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(TIMEOUT) == 0
    admin = s.admin()
    for group, topic in ((ALICE_GROUP, ALICE_TOPIC), (BOB_GROUP, BOB_TOPIC)):
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 2)])]
        for f in admin.alter_consumer_group_offsets(request).values():
            f.result(TIMEOUT)
    prefixed = ResourcePatternType.PREFIXED
    allow(s, "alice", ResourceType.TOPIC, "alice-", AclOperation.READ, prefixed)
    allow(s, "alice", ResourceType.GROUP, ALICE_GROUP, AclOperation.READ)
    allow(s, "bob", ResourceType.TOPIC, BOB_TOPIC, AclOperation.DESCRIBE)
    allow(s, "bob", ResourceType.GROUP, BOB_GROUP, AclOperation.DESCRIBE)
    allow(s, "carol", ResourceType.TOPIC, CAROL_TOPIC, AclOperation.DESCRIBE)

    def shown() -> bool:
        r = requests.get(
            s.console + "/api/groups", auth=("admin", "admin-secret"), verify=ca(s), timeout=5
        )
        return {ALICE_GROUP, BOB_GROUP} <= {g["group_id"] for g in r.json()}

    wait_until(shown, 20, "the console's snapshot shows the groups")


def ca(s: Secured) -> str:
    return str(s.certs.ca_pem)


def session(s: Secured) -> requests.Session:
    sess = requests.Session()
    sess.trust_env = False  # else REQUESTS_CA_BUNDLE wins over .verify (a requests quirk)
    sess.verify = ca(s)
    return sess


def login(s: Secured, user: str, password: str) -> tuple[requests.Session, requests.Response]:
    sess = session(s)
    r = sess.post(
        s.console + "/login",
        data={"username": user, "password": password, "next": "/topics"},
        allow_redirects=False,
        timeout=TIMEOUT,
    )
    return sess, r


def topic_names(resp: requests.Response) -> set[str]:
    assert resp.status_code == 200, resp.text
    return {t["name"] for t in resp.json()}


def test_https_with_the_brokers_key_store(secured: Secured) -> None:
    """The listener speaks TLS with the broker's certificate: the test CA verifies it, the
    system's CAs do not, and plain HTTP on the port gets no HTTP answer."""
    r = requests.get(secured.console + "/health", verify=ca(secured), timeout=TIMEOUT)
    assert (r.status_code, r.text) == (200, "ready\n")
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(secured.console + "/health", timeout=TIMEOUT)
    plain = secured.console.replace("https://", "http://")
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(plain + "/health", timeout=TIMEOUT)


def test_metrics_and_health_stay_open(secured: Secured) -> None:
    r = requests.get(secured.console + "/metrics", verify=ca(secured), timeout=TIMEOUT)
    assert r.status_code == 200 and "kafka_topic_partitions" in r.text


def test_unauthenticated_requests_are_refused(secured: Secured) -> None:
    sess = session(secured)
    r = sess.get(secured.console + "/api/topics", timeout=TIMEOUT)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Basic ")
    assert BOB_TOPIC not in r.text
    r = sess.get(secured.console + "/topics", allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 303
    assert r.headers["location"] == "/login?next=%2Ftopics"
    r = sess.get(secured.console + "/login?next=%2Ftopics", timeout=TIMEOUT)
    assert r.status_code == 200 and 'name="password"' in r.text and 'name="token"' in r.text
    # actions too: the HX-Request header is not a login
    r = sess.post(
        secured.console + f"/groups/{BOB_GROUP}/delete",
        headers={"HX-Request": "true"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 401


def test_wrong_password_and_unknown_user_look_the_same(secured: Secured) -> None:
    _sess, wrong = login(secured, "alice", "not-her-password")
    _sess, unknown = login(secured, "mallory", "whatever")
    for r in (wrong, unknown):
        assert r.status_code == 401
        assert "set-cookie" not in r.headers
        assert "Login failed." in r.text
    assert wrong.text == unknown.text
    r = requests.get(
        secured.console + "/api/topics",
        auth=("alice", "not-her-password"),
        verify=ca(secured),
        timeout=TIMEOUT,
    )
    assert r.status_code == 401


def test_login_sets_a_strict_http_only_secure_cookie(secured: Secured) -> None:
    sess, r = login(secured, "alice", PASSWORDS["alice"])
    assert r.status_code == 303 and r.headers["location"] == "/topics"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("odradek_session=")
    for flag in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/", "Max-Age=28800"):
        assert flag in cookie, cookie
    assert PASSWORDS["alice"] not in cookie
    page = sess.get(secured.console + "/topics", timeout=TIMEOUT)
    assert page.status_code == 200 and "alice" in page.text


def test_each_user_sees_only_what_the_acls_allow(secured: Secured) -> None:
    sess, _r = login(secured, "alice", PASSWORDS["alice"])
    base = secured.console
    assert topic_names(sess.get(base + "/api/topics", timeout=TIMEOUT)) == {ALICE_TOPIC}
    groups = sess.get(base + "/api/groups", timeout=TIMEOUT).json()
    assert [g["group_id"] for g in groups] == [ALICE_GROUP]
    page = sess.get(base + "/topics", timeout=TIMEOUT).text
    assert ALICE_TOPIC in page and BOB_TOPIC not in page and CAROL_TOPIC not in page
    for path in (f"/topics/{BOB_TOPIC}", f"/groups/{BOB_GROUP}", f"/api/topics/{BOB_TOPIC}"):
        r = sess.get(base + path, timeout=TIMEOUT)
        assert r.status_code == 404 and BOB_TOPIC not in r.text.replace(f"no topic {BOB_TOPIC}", ""), path
    # READ on her topic: the message browser shows its records; others' are not found
    r = sess.get(base + f"/api/topics/{ALICE_TOPIC}/messages?offset=0", timeout=TIMEOUT)
    assert r.status_code == 200 and [m["value"] for m in r.json()][:2] == [
        "alice-orders-0",
        "alice-orders-1",
    ]
    r = sess.get(base + f"/api/topics/{BOB_TOPIC}/messages?offset=0", timeout=TIMEOUT)
    assert r.status_code == 404 and "bob-events-0" not in r.text
    # bob may DESCRIBE his topic but not READ it; HTTP Basic works as well as the cookie
    bob = ("bob", PASSWORDS["bob"])
    r = requests.get(base + "/api/topics", auth=bob, verify=ca(secured), timeout=TIMEOUT)
    assert topic_names(r) == {BOB_TOPIC}
    r = requests.get(
        base + f"/api/topics/{BOB_TOPIC}/messages?offset=0",
        auth=bob,
        verify=ca(secured),
        timeout=TIMEOUT,
    )
    assert r.status_code == 403 and "bob-events-0" not in r.text
    # without DESCRIBE on the cluster: no Mirroring page
    r = requests.get(base + "/mirroring", auth=bob, verify=ca(secured), timeout=TIMEOUT)
    assert r.status_code == 403
    # a super user sees everything
    r = requests.get(
        base + "/api/topics", auth=("admin", "admin-secret"), verify=ca(secured), timeout=TIMEOUT
    )
    assert {ALICE_TOPIC, BOB_TOPIC, CAROL_TOPIC} <= topic_names(r)


def test_group_actions_need_their_acls(secured: Secured) -> None:
    sess, _r = login(secured, "bob", PASSWORDS["bob"])
    hx = {"HX-Request": "true"}
    r = sess.post(secured.console + f"/groups/{BOB_GROUP}/delete", headers=hx, timeout=TIMEOUT)
    assert r.status_code == 403 and "may not delete" in r.text
    r = sess.post(
        secured.console + f"/groups/{BOB_GROUP}/reset",
        data={"topic": BOB_TOPIC, "to": "earliest"},
        headers=hx,
        timeout=TIMEOUT,
    )
    assert r.status_code == 403 and "may not reset" in r.text


def test_bearer_token_header_and_token_login(secured: Secured) -> None:
    token = unsecured_jwt("carol", time.time() + 600)
    r = requests.get(
        secured.console + "/api/topics",
        headers={"Authorization": f"Bearer {token}"},
        verify=ca(secured),
        timeout=TIMEOUT,
    )
    assert topic_names(r) == {CAROL_TOPIC}
    expired = unsecured_jwt("carol", time.time() - 60)
    r = requests.get(
        secured.console + "/api/topics",
        headers={"Authorization": f"Bearer {expired}"},
        verify=ca(secured),
        timeout=TIMEOUT,
    )
    assert r.status_code == 401
    sess = session(secured)
    r = sess.post(
        secured.console + "/login",
        data={"token": token, "next": "/api/topics"},
        allow_redirects=False,
        timeout=TIMEOUT,
    )
    assert r.status_code == 303
    assert topic_names(sess.get(secured.console + "/api/topics", timeout=TIMEOUT)) == {CAROL_TOPIC}


def test_a_session_ends_with_its_token(secured: Secured) -> None:
    """A token's session cookie expires with the token (``exp``), however long
    ``http.session.timeout.ms`` is."""
    exp = time.time() + 3
    sess = session(secured)
    r = sess.post(
        secured.console + "/login",
        data={"token": unsecured_jwt("carol", exp)},
        allow_redirects=False,
        timeout=TIMEOUT,
    )
    assert r.status_code == 303
    max_age = int(re.search(r"Max-Age=(\d+)", r.headers["set-cookie"]).group(1))  # type: ignore[union-attr]
    assert max_age <= 3
    cookie = sess.cookies.get("odradek_session")
    assert cookie
    assert sess.get(secured.console + "/api/topics", timeout=TIMEOUT).status_code == 200

    def refused() -> bool:
        # the cookie sent as is, as a client that ignores Max-Age would
        r = requests.get(
            secured.console + "/api/topics",
            cookies={"odradek_session": cookie},
            verify=ca(secured),
            timeout=TIMEOUT,
        )
        return r.status_code == 401

    wait_until(refused, 10, "the session refused once the token expired")
    assert time.time() >= exp - 1


def test_a_tampered_cookie_is_refused(secured: Secured) -> None:
    sess, _r = login(secured, "alice", PASSWORDS["alice"])
    value = sess.cookies.get("odradek_session")
    assert value
    payload, sig = value.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data["u"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    r = requests.get(
        secured.console + "/api/topics",
        cookies={"odradek_session": f"{forged}.{sig}"},
        verify=ca(secured),
        timeout=TIMEOUT,
    )
    assert r.status_code == 401


def test_a_changed_password_ends_the_session(secured: Secured) -> None:
    set_password(secured, "dave", "dave-1", ScramMechanism.SCRAM_SHA_256)
    sess, r = login(secured, "dave", "dave-1")
    assert r.status_code == 303
    assert sess.get(secured.console + "/api/topics", timeout=TIMEOUT).status_code == 200
    set_password(secured, "dave", "dave-2", ScramMechanism.SCRAM_SHA_256)
    assert sess.get(secured.console + "/api/topics", timeout=TIMEOUT).status_code == 401
    _sess, r = login(secured, "dave", "dave-2")
    assert r.status_code == 303


def test_logout_clears_the_cookie(secured: Secured) -> None:
    sess, _r = login(secured, "alice", PASSWORDS["alice"])
    r = sess.post(secured.console + "/logout", allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 303 and "Max-Age=0" in r.headers["set-cookie"]
    assert sess.get(secured.console + "/api/topics", timeout=TIMEOUT).status_code == 401


def test_login_redirects_only_inside_the_console(secured: Secured) -> None:
    sess = session(secured)
    r = sess.post(
        secured.console + "/login",
        data={"username": "alice", "password": PASSWORDS["alice"], "next": "//evil.example/"},
        allow_redirects=False,
        timeout=TIMEOUT,
    )
    assert r.status_code == 303 and r.headers["location"] == "/"


def test_schemas_page_reads_the_brokers_own_registry_and_filters_subjects(
    secured: Secured,
) -> None:
    """The console reads its broker's registry (HTTPS, authenticated with the process's own
    token) and lists only the subjects whose topic the user may READ."""
    schema = json.dumps({"type": "string"})
    for subject in (f"{ALICE_TOPIC}-value", f"{BOB_TOPIC}-value"):
        r = requests.post(
            secured.registry + f"/subjects/{subject}/versions",
            json={"schema": schema},
            auth=("admin", "admin-secret"),
            verify=ca(secured),
            timeout=TIMEOUT,
        )
        assert r.status_code == 200, r.text
    sess, _r = login(secured, "alice", PASSWORDS["alice"])
    page = sess.get(secured.console + "/schemas", timeout=TIMEOUT)
    assert page.status_code == 200, page.text
    assert f"{ALICE_TOPIC}-value" in page.text and f"{BOB_TOPIC}-value" not in page.text
    r = sess.get(secured.console + f"/schemas/{BOB_TOPIC}-value", timeout=TIMEOUT)
    assert r.status_code == 404
    r = sess.get(secured.console + f"/schemas/{ALICE_TOPIC}-value", timeout=TIMEOUT)
    assert r.status_code == 200


def test_the_certificate_reloads_when_its_file_changes(secured: Secured, tmp_path: Path) -> None:
    """A renewed key store file is served at the next handshake, no restart (as on the Kafka
    listeners)."""
    def served_serial() -> int:
        ctx = ssl.create_default_context(cafile=str(secured.certs.ca_pem))
        host, port = secured.console.removeprefix("https://").rsplit(":", 1)
        with (
            socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock,
            ctx.wrap_socket(sock, server_hostname=host) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number

    before = served_serial()
    fresh = secured.certs.ca.issue_cert("127.0.0.1", "localhost")
    keystore = secured.certs.server_keystore
    staged = tmp_path / "keystore.pem"
    fresh.private_key_and_cert_chain_pem.write_to_path(str(staged))
    staged.replace(keystore)  # atomic, as a certificate manager renews it
    wait_until(lambda: served_serial() != before, 10, "the renewed certificate served")
