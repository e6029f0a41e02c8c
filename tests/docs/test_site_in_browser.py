"""The built docs site in a real browser: headless Chromium opens the index, a guide and a
reference page, and every internal link on them answers (``nox -s docs``, after the build).

The site is the one ``mkdocs build --strict`` wrote (``KSPARK_DOCS_SITE``, default
``build/site``), served over HTTP from a thread, opened in headless Chromium
(``tests.chromium``).
"""

from __future__ import annotations

import functools
import http.server
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

from tests.chromium import headless_chromium
from tests.stand_in import standing_in

pytestmark = pytest.mark.docs
SITE = Path(os.environ.get("KSPARK_DOCS_SITE", "build/site"))
PAGES = {
    "index.html": "kspark",
    "guides/getting-started/index.html": "Getting started",
    "reference/cli/index.html": "kspark",
}


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    assert (SITE / "index.html").is_file(), f"no built site in {SITE}: run mkdocs build --strict first (nox -s docs)"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    with standing_in(handler) as url:
        yield url + "/"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with headless_chromium() as driver:
        yield driver


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_page_renders_and_its_internal_links_answer(browser, site_url, page) -> None:
    from selenium.webdriver.common.by import By

    browser.get(urljoin(site_url, page))
    heading = browser.find_element(By.CSS_SELECTOR, "article h1").text
    assert PAGES[page].lower() in heading.lower() or PAGES[page].lower() in browser.title.lower(), (heading, browser.title)
    links = {urldefrag(a.get_attribute("href"))[0] for a in browser.find_elements(By.CSS_SELECTOR, "a[href]")}
    internal = sorted(link for link in links if urlparse(link).netloc == urlparse(site_url).netloc)
    assert len(internal) > 5, internal
    broken = []
    for link in internal:
        try:
            with urllib.request.urlopen(link, timeout=10) as answer:
                if answer.status != 200:
                    broken.append(f"{link}: {answer.status}")
        except urllib.error.HTTPError as exc:
            broken.append(f"{link}: {exc.code}")
    assert not broken, f"broken internal links on {page}: {broken}"
