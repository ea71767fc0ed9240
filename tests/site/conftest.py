"""Browser fixtures: the built site (_build/html) served on 127.0.0.1, Debian's Chromium via playwright.

Every request to a host other than 127.0.0.1 is aborted (fonts; MathJax is served by the site itself), so
the tests run offline and fast. ``js_errors`` collects page errors and console errors, minus the known
third-party noise below.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
from bookpdf import NOT_LOCAL, launch_chromium, serve  # noqa: E402  (the PDF printer's server and Chromium)

SITE = ROOT / "_build" / "html"

# Known third-party console noise, by name:
KNOWN_THIRD_PARTY_ERRORS = {
    # requests to CDNs are aborted on purpose (offline test)
    "blocked external resource": re.compile(r"Failed to load resource"),
}

pytestmark = pytest.mark.site


@pytest.fixture(scope="session")
def site_url():
    if not (SITE / "index.html").is_file():
        pytest.fail(f"the book is not built: {SITE}/index.html is missing (build it first, see README.md)")
    with serve(SITE) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        try:
            browser = launch_chromium(p)
        except FileNotFoundError as error:
            pytest.fail(str(error))
        yield browser
        browser.close()


@pytest.fixture
def js_errors() -> list[str]:
    """Page errors and console errors seen by ``site_page``, known third-party noise removed."""
    return []


@pytest.fixture
def site_page(browser, site_url, js_errors):
    """A fresh page whose ``goto`` takes URLs relative to the site root."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()

    def record(text: str) -> None:
        if not any(pattern.search(text) for pattern in KNOWN_THIRD_PARTY_ERRORS.values()):
            js_errors.append(text)

    page.on("pageerror", lambda exc: record(str(exc)))
    page.on("console", lambda msg: record(msg.text) if msg.type == "error" else None)
    page.route(NOT_LOCAL, lambda route: route.abort())
    goto = page.goto
    page.goto = lambda relative, **kw: goto(site_url + relative.lstrip("/"), wait_until="load", **kw)
    yield page
    context.close()
