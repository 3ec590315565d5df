"""Logging in to the console over HTTPS in a real browser (Debian's chromium, Selenium): the
login form, the session cookie carried by the pages' own htmx requests, a user's filtered view,
logging out.

Chromium is started with ``--ignore-certificate-errors`` (its headless profile has no place for
the test CA); the TLS itself is checked with a verifying client in test_login.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, ResourceType
from tests.certs import Certs, make_certs

from .browser import headless_chromium, needs_chromium
from .secured import PASSWORDS, TIMEOUT, Secured, allow, create_topics, running_secured_broker

pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = [pytest.mark.timeout(120), needs_chromium]

MINE, THEIRS = "alice-browser", "bob-browser"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    certs: Certs = make_certs(tmp_path_factory.mktemp("certs"))
    for s in running_secured_broker(certs):
        create_topics(s, MINE, THEIRS)
        producer = Producer({"bootstrap.servers": s.bootstrap_servers})
        for i in range(10):
            producer.produce(MINE, f'{{"n": {i}}}'.encode(), key=f"k-{i}".encode())
        assert producer.flush(TIMEOUT) == 0
        allow(s, "alice", ResourceType.TOPIC, MINE, AclOperation.READ)
        allow(s, "bob", ResourceType.TOPIC, THEIRS, AclOperation.READ)
        yield s


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    yield from headless_chromium(tmp_path_factory.mktemp("chromium-profile"), "--ignore-certificate-errors")


def wait(drv: object, seconds: float = 20) -> WebDriverWait:
    return WebDriverWait(drv, seconds)


def test_login_browse_and_logout(secured: Secured, driver: object, tmp_path: Path) -> None:
    base = secured.console
    driver.get(f"{base}/topics/{MINE}")
    # no session: the login form, which returns to the page asked for
    wait(driver).until(ec.visibility_of_element_located((By.NAME, "username")))
    assert "/login?next=" in driver.current_url
    driver.find_element(By.NAME, "username").send_keys("alice")
    driver.find_element(By.NAME, "password").send_keys("wrong")
    driver.find_element(By.CSS_SELECTOR, "#login-password button").click()
    alert = wait(driver).until(ec.visibility_of_element_located((By.CSS_SELECTOR, "[role=alert]")))
    assert alert.text == "Login failed."
    driver.find_element(By.NAME, "username").send_keys("alice")
    driver.find_element(By.NAME, "password").send_keys(PASSWORDS["alice"])
    driver.find_element(By.CSS_SELECTOR, "#login-password button").click()
    name = wait(driver).until(ec.visibility_of_element_located((By.ID, "topic-name")))
    assert name.text == MINE and driver.current_url == f"{base}/topics/{MINE}"
    cookie = driver.get_cookie("odradek_session")
    assert cookie is not None and cookie["httpOnly"] and cookie["secure"]
    assert cookie["sameSite"] == "Strict"
    # the message browser's htmx request carries the session
    offset = driver.find_element(By.ID, "browse-offset")
    offset.clear()
    offset.send_keys("3")
    driver.find_element(By.ID, "browse-go").click()
    wait(driver).until(ec.visibility_of_element_located((By.ID, "records")))
    rows = driver.find_elements(By.CSS_SELECTOR, "#records tr.record")
    assert rows and rows[0].text.startswith("3") and "k-3" in rows[0].text
    # alice's topics page lists hers only
    driver.get(f"{base}/topics")
    wait(driver).until(lambda d: MINE in d.find_element(By.TAG_NAME, "main").text)
    assert THEIRS not in driver.find_element(By.TAG_NAME, "main").text
    assert "alice" in driver.find_element(By.TAG_NAME, "header").text
    driver.save_screenshot(str(tmp_path / "topics-as-alice.png"))
    # logging out ends the session
    driver.find_element(By.CSS_SELECTOR, "header form button").click()
    wait(driver).until(ec.visibility_of_element_located((By.NAME, "username")))
    assert driver.get_cookie("odradek_session") is None
    driver.get(f"{base}/topics")
    wait(driver).until(ec.visibility_of_element_located((By.NAME, "username")))
