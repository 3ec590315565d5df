"""What the console's real-browser tests share: Debian's chromium and chromium-driver (found on
the PATH, ``None`` where missing), the skip marker for their absence, and a headless Chromium
driven by Selenium (imported only when a driver is started)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (make system-deps)",
)


def headless_chromium(profile: Path, *flags: str) -> Iterator[object]:
    """A fixture's body: yields a Selenium driver of a headless Chromium, 1280x1000, with its
    user data in ``profile``, no background networking, component updates, sync or QUIC, and
    ``flags`` added; pages time out after 30 s; the browser quits when the fixture ends."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    assert CHROMIUM is not None and CHROMEDRIVER is not None
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        *flags,
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    drv.set_page_load_timeout(30)
    try:
        yield drv
    finally:
        drv.quit()
