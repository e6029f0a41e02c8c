"""Headless Chromium driven by Selenium, for the tests that open a page (marked ``docs``).

Chromium and its driver are Debian's (``chromium``, ``chromium-driver``), which ``.ci/run``
installs; Selenium comes with the ``docs`` extra.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def headless_chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A Selenium driver of headless Chromium with a window of ``width`` x ``height``; quit at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    assert chromium and driver_path, "Chromium and its driver are needed: apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
