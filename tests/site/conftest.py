"""Browser fixtures: the built site (_build/html) served on 127.0.0.1, Debian's Chromium via playwright.

Every request to a host other than 127.0.0.1 is aborted (CDN MathJax, fonts), so the tests run offline
and fast. ``js_errors`` collects page errors and console errors, minus the known third-party noise below.
"""

from __future__ import annotations

import functools
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
CHROMIUM = Path("/usr/bin/chromium")

# Known third-party console noise, by name:
KNOWN_THIRD_PARTY_ERRORS = {
    # sphinx-thebe 0.3.1 under Sphinx 7.4 writes its inline script twice on every notebook page
    "sphinx-thebe duplicate THEBE_JS_URL": re.compile(r"Identifier 'THEBE_JS_URL' has already been declared"),
    # requests to CDNs are aborted on purpose (offline test), and the favicon is absent
    "blocked external resource": re.compile(r"Failed to load resource"),
    # pydata-sphinx-theme on a fresh browser profile
    "pydata-sphinx-theme theme mode": re.compile(r"Got invalid theme mode"),
}

pytestmark = pytest.mark.site


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="session")
def site_url():
    if not (SITE / "index.html").is_file():
        pytest.fail(f"the book is not built: {SITE}/index.html is missing (build it first, see README.md)")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )
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
    page.route(re.compile(r"^(?!http://127\.0\.0\.1)"), lambda route: route.abort())
    goto = page.goto
    page.goto = lambda relative, **kw: goto(site_url + relative.lstrip("/"), wait_until="load", **kw)
    yield page
    context.close()
