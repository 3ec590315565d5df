"""`odradek cluster up --security` serves every broker's console on HTTPS with logins: the
consoles' own clients reach the SASL_SSL-only brokers with the brokers' credentials, the admin
logs in with the password ``up`` printed and sees the topics."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.zookeeper import zookeeper_available
from odradek.testing import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(110)]


def _odradek(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=timeout
    )


def test_cluster_up_security_consoles(tmp_path: Path) -> None:
    if not zookeeper_available():
        pytest.skip("Debian's zookeeper package (or java) is not installed")
    d = tmp_path / "secure"
    up = _odradek(
        "cluster", "up", "--security", "-n", "3", "--port", "0", "--http-port", "0", "-d", str(d)
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        password = re.search(r"^admin password \(shown once\): (\S+)$", up.stdout, re.M)
        assert password is not None, up.stdout
        consoles = re.findall(r"^broker \d+: \S+\tconsole (https://\S+)$", up.stdout, re.M)
        assert len(consoles) == 3, up.stdout
        assert "consoles: log in as admin" in up.stdout
        state = json.loads((d / "cluster.json").read_text())
        assert [b["console"] for b in state["brokers"]] == consoles
        ca = str(d / "security" / "ca.pem")

        conf = {
            "bootstrap.servers": state["bootstrap_servers"],
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": password[1],
            "ssl.ca.location": ca,
        }
        admin = AdminClient(conf)  # kept: a collected client cancels its futures
        for f in admin.create_topics([NewTopic("seen", 1, 3)]).values():
            f.result(30)

        for console in consoles:
            sess = requests.Session()
            sess.trust_env = False
            sess.verify = ca
            r = sess.get(console + "/api/topics", allow_redirects=False, timeout=10)
            assert r.status_code in (302, 303, 401), r.status_code  # a login first
            r = sess.post(
                console + "/login",
                data={"username": "admin", "password": password[1], "next": "/topics"},
                allow_redirects=False,
                timeout=10,
            )
            assert r.status_code == 303, r.text

            def listed(sess: requests.Session = sess, console: str = console) -> bool:
                r = sess.get(console + "/api/topics", timeout=10)
                assert r.status_code == 200, r.text
                return "seen" in {t["name"] for t in r.json()}

            wait_until(listed, 30, f"{console} lists the topic")
        # the controller's tools with the same client.properties
        elected = _odradek(
            "topics", "elect-leaders", "seen", "-b", state["bootstrap_servers"],
            "--command-config", str(d / "client.properties"),
        )
        assert elected.returncode == 0, elected.stderr
        assert elected.stdout.startswith("seen-0: "), elected.stdout
    finally:
        down = _odradek("cluster", "down", "-d", str(d), timeout=100)
    assert down.returncode == 0, down.stdout + down.stderr
