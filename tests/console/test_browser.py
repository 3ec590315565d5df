"""The console in a real browser: Debian's chromium + chromium-driver, driven by Selenium.

Opens the home page, a topic page and a group page, checks that the names and the lag figures
are visible after the pages' scripts (htmx, uPlot) ran, browses a message by offset, and saves
a screenshot of each page into the test's temporary folder.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.client import Admin, Producer, TopicPartition
from odradek.testing import wait_until

from .browser import headless_chromium, needs_chromium
from .harness import ConsoleBroker

pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = [pytest.mark.timeout(120), needs_chromium]

TOPIC = "browser-topic"
GROUP = "browser-group"


@pytest.fixture(scope="module")
def state(console_broker: ConsoleBroker) -> ConsoleBroker:
    conf = {"bootstrap.servers": console_broker.bootstrap_servers}
    with Admin(conf) as admin:
        admin.create_topics([TOPIC])
    with Producer(conf) as producer:
        for i in range(100):
            producer.send(TOPIC, b'{"order": %d, "item": "widget"}' % i, key=b"order-%d" % i)
        producer.flush()
    with Admin(conf) as admin:
        admin.alter_group_offsets(GROUP, {TopicPartition(TOPIC, 0): 40})

    # a page renders a cluster snapshot up to 1 s old (the console's metrics_max_age_s), and
    # the console takes its first one as the broker starts: wait until its snapshots show
    # what was just made, as a user's next page would, before the pages are loaded
    def shown() -> bool:
        with urllib.request.urlopen(console_broker.url + "/api/topics", timeout=5) as r:
            topics = r.read()
        with urllib.request.urlopen(console_broker.url + "/api/groups", timeout=5) as r:
            groups = r.read()
        return TOPIC.encode() in topics and GROUP.encode() in groups

    wait_until(shown, 15, "the console's snapshot shows the new topic and group")
    return console_broker


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    yield from headless_chromium(tmp_path_factory.mktemp("chromium-profile"))


def wait(drv: object, seconds: float = 20) -> WebDriverWait:
    return WebDriverWait(drv, seconds)


def test_home_page(state: ConsoleBroker, driver: object, tmp_path: Path) -> None:
    driver.get(state.url + "/")
    table = wait(driver).until(ec.visibility_of_element_located((By.ID, "topics")))
    wait(driver).until(lambda d: TOPIC in d.find_element(By.ID, "topics").text)
    assert GROUP in driver.find_element(By.ID, "groups").text
    assert "127.0.0.1" in driver.find_element(By.ID, "brokers").text
    assert table.is_displayed()
    driver.save_screenshot(str(tmp_path / "home.png"))
    assert (tmp_path / "home.png").stat().st_size > 5000


def test_topic_page_and_message_by_offset(state: ConsoleBroker, driver: object, tmp_path: Path) -> None:
    driver.get(f"{state.url}/topics/{TOPIC}")
    assert wait(driver).until(ec.visibility_of_element_located((By.ID, "topic-name"))).text == TOPIC
    partitions = driver.find_element(By.ID, "partitions").text
    assert "100" in partitions  # end offset
    assert "Offline" in partitions  # the offline-replicas column (empty: one broker, no failed dir)
    offset = driver.find_element(By.ID, "browse-offset")
    offset.clear()
    offset.send_keys("42")
    driver.find_element(By.ID, "browse-go").click()  # htmx fetches the records fragment
    wait(driver).until(ec.visibility_of_element_located((By.ID, "records")))
    rows = driver.find_elements(By.CSS_SELECTOR, "#records tr.record")
    assert rows, "no records shown"
    first = rows[0].text
    assert first.startswith("42") and "order-42" in first and '"order": 42' in first
    driver.save_screenshot(str(tmp_path / "topic.png"))


def test_group_page_shows_lag(state: ConsoleBroker, driver: object, tmp_path: Path) -> None:
    driver.get(f"{state.url}/groups/{GROUP}")
    assert wait(driver).until(ec.visibility_of_element_located((By.ID, "group-name"))).text == GROUP
    # the lag table arrives through htmx after the page loaded
    lag_table = wait(driver).until(ec.visibility_of_element_located((By.ID, "lag-table")))
    assert driver.find_element(By.ID, "total-lag").text == "60"
    cells = [c.text for c in lag_table.find_elements(By.CSS_SELECTOR, "td")]
    assert TOPIC in cells and "40" in cells and "100" in cells and "60" in cells
    seconds = driver.find_element(By.ID, "lag-seconds").text
    assert seconds.endswith(("ms", "s", "min", "h")) and seconds != "?"
    # the uPlot chart was drawn from /api/groups/<g>/history
    wait(driver).until(
        lambda d: d.find_element(By.ID, "chart").get_attribute("data-ready") == "1"
    )
    assert driver.find_elements(By.CSS_SELECTOR, "#chart canvas")
    driver.save_screenshot(str(tmp_path / "group.png"))


def test_group_actions_ask_for_confirmation(state: ConsoleBroker, driver: object, tmp_path: Path) -> None:
    """Reset offsets and delete: nothing happens when the confirmation is dismissed; accepted,
    the action runs and its result is shown on the page."""
    group = "browser-actions"
    conf = {"bootstrap.servers": state.bootstrap_servers}
    with Admin(conf) as admin:
        admin.alter_group_offsets(group, {TopicPartition(TOPIC, 0): 10})

    def committed() -> int | None:
        with Admin(conf) as admin:
            om = admin.list_group_offsets(group).get(TopicPartition(TOPIC, 0))
        return None if om is None else om.offset

    driver.get(f"{state.url}/groups/{group}")
    wait(driver).until(ec.visibility_of_element_located((By.ID, "group-name")))
    to = driver.find_element(By.CSS_SELECTOR, "form[hx-post$='/reset'] input[name='to']")
    to.clear()
    to.send_keys("latest")
    reset = driver.find_element(By.CSS_SELECTOR, "form[hx-post$='/reset'] button")
    reset.click()
    alert = wait(driver).until(ec.alert_is_present())
    assert "Reset the committed offsets of group browser-actions" in alert.text
    alert.dismiss()
    assert driver.find_element(By.ID, "actions-result").text == ""
    assert committed() == 10
    reset.click()
    wait(driver).until(ec.alert_is_present()).accept()
    wait(driver).until(lambda d: "committed 1 offset" in d.find_element(By.ID, "actions-result").text)
    assert committed() == 100
    driver.save_screenshot(str(tmp_path / "group-reset.png"))
    driver.find_element(By.CSS_SELECTOR, "form[hx-post$='/delete'] button").click()
    alert = wait(driver).until(ec.alert_is_present())
    assert "Delete group browser-actions" in alert.text
    alert.accept()
    wait(driver).until(lambda d: "deleted group" in d.find_element(By.ID, "actions-result").text)
    with Admin(conf) as admin:
        assert group not in {gid for gid, _t, _s in admin.list_groups()}
