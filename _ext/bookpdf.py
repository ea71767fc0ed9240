"""The whole book as one PDF, offline: Chromium prints the single-page HTML build after MathJax has rendered.

Run after the HTML build (``scripts/build_book.sh`` and ``scripts/test.sh`` do)::

    python _ext/bookpdf.py

It builds ``_build/singlehtml`` with Jupyter Book (pages come from the execution cache, so nothing is
re-run), serves it on 127.0.0.1, aborts every other request, waits for MathJax and every image, prints
it with Debian's Chromium and writes ``_build/html/rankcollapse-companion.pdf`` atomically, where the intro
page and every page's download menu link it. Also provides the local server and the Chromium launcher that the
browser tests (``tests/site/conftest.py``) use.
"""

from __future__ import annotations

import contextlib
import functools
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PDF_NAME = "rankcollapse-companion.pdf"  # linked from book/intro.md and every page's download menu
NOT_LOCAL = re.compile(r"^(?!http://127\.0\.0\.1)")


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 (a free port) while the block runs; yields the root URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def launch_chromium(playwright):
    """Debian's Chromium, headless, with no background network traffic."""
    if not CHROMIUM.exists():
        raise FileNotFoundError(f"Debian's chromium is not installed at {CHROMIUM} "
                                f"(apt-get install chromium)")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)


def print_pdf(folder: Path, target: Path, timeout_ms: int = 120_000) -> int:
    """Print the single-page build in ``folder`` to ``target`` once MathJax and all images are done.

    Sphinx writes the single page at the root document's path (``book/intro.html``) but with links relative
    to the build's root, so it is printed from a copy at the root. Returns the PDF's page count.
    """
    import yaml
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader

    from rankcollapse.experiments.provenance import atomic_write

    root_doc = yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]
    (folder / "whole-book.html").write_text((folder / f"{root_doc}.html").read_text(encoding="utf8"),
                                            encoding="utf8")
    with serve(folder) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.route(NOT_LOCAL, lambda route: route.abort())
        page.goto(url + "whole-book.html", wait_until="load", timeout=timeout_ms)
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                               timeout=timeout_ms)
        page.evaluate("() => MathJax.startup.promise")
        # Lazy images (the gallery's thumbnails) load only when scrolled to: load every image now.
        page.evaluate("() => document.querySelectorAll('img[loading=lazy]')"
                      ".forEach(i => { i.loading = 'eager'; })")
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=timeout_ms)
        # Paper has no toggles: print every collapsed block (each figure's "Cite this figure") open.
        page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
        atomic_write(target, lambda tmp: page.pdf(path=tmp, format="A4", print_background=True, margin={
            "top": "15mm", "bottom": "15mm", "left": "12mm", "right": "12mm"}))
        browser.close()
    return len(PdfReader(target).pages)


def main() -> None:
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT), "--builder",
                    "singlehtml", "-q"], check=True)
    built = time.perf_counter()
    target = ROOT / "_build" / "html" / PDF_NAME
    pages = print_pdf(ROOT / "_build" / "singlehtml", target)
    print(f"== PDF: {target} ({pages} pages, {target.stat().st_size / 1e6:.1f} MB); single-page HTML "
          f"{built - start:.0f} s, printing {time.perf_counter() - built:.0f} s")


if __name__ == "__main__":
    main()
