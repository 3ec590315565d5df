"""Make docs/console.png: a broker with its console, a producer and a consumer group that first
falls behind and then catches up, and a headless-chromium screenshot of the group's page.

    .venv/bin/python bench/console_screenshot.py [--seconds 75] [--out docs/console.png]

Needs Debian's chromium and chromium-driver (make system-deps) and selenium (test extra).
Not a benchmark: a reproducible way to refresh the picture in docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from odradek.client import Admin, Consumer, NewTopic, Producer
from odradek.testing.process import BrokerProcess

TOPIC = "orders"
GROUP = "billing"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=75.0)
    ap.add_argument("--out", default="docs/console.png")
    args = ap.parse_args()
    settings = {"http.listeners": "http://127.0.0.1:0", "group.initial.rebalance.delay.ms": 0}
    with BrokerProcess(settings, log_level="info") as broker:
        url = broker.console_url()
        conf = {"bootstrap.servers": broker.bootstrap_servers}
        with Admin(conf) as admin:
            admin.create_topics([NewTopic(TOPIC, 3)])
        stop = threading.Event()
        start = time.monotonic()

        def produce() -> None:
            with Producer(conf) as producer:
                n = 0
                while not stop.is_set():
                    due = int((time.monotonic() - start) * 200)
                    while n < due:
                        order = {"order": n, "customer": f"c-{n % 97}", "amount": round(n * 1.7 % 300, 2)}
                        producer.send(TOPIC, json.dumps(order).encode(), key=b"c-%d" % (n % 97),
                                      headers=[("source", b"web")])
                        n += 1
                    time.sleep(0.01)
                producer.flush()

        def consume() -> None:
            cconf = dict(conf, **{"group.id": GROUP, "auto.offset.reset": "earliest",
                                  "client.id": "billing-1", "auto.commit.interval.ms": 1000})
            with Consumer(cconf, TOPIC) as consumer:
                done = 0
                while not stop.is_set():
                    elapsed = time.monotonic() - start
                    rate = 120 if elapsed < args.seconds * 0.55 else 450
                    if done < elapsed * rate:
                        done += len(consumer.poll(0.1, max_records=20))
                    else:
                        time.sleep(0.02)

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        try:
            time.sleep(args.seconds)
            with tempfile.TemporaryDirectory() as profile:
                options = Options()
                options.binary_location = "/usr/bin/chromium"
                for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                             "--no-first-run", "--disable-background-networking",
                             "--disable-component-update", "--disable-sync",
                             "--window-size=1200,1050", f"--user-data-dir={profile}"):
                    options.add_argument(flag)
                driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
                try:
                    driver.get(f"{url}/groups/{GROUP}")
                    WebDriverWait(driver, 20).until(ec.visibility_of_element_located((By.ID, "lag-table")))
                    WebDriverWait(driver, 20).until(
                        lambda d: d.find_element(By.ID, "chart").get_attribute("data-ready") == "1"
                    )
                    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                    driver.save_screenshot(args.out)
                finally:
                    driver.quit()
        finally:
            stop.set()
            for t in threads:
                t.join(30)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
