"""The whole book as one PDF, offline: Chromium prints the single-page HTML build after MathJax has rendered.

Run after the HTML build (``scripts/build_book.sh`` and ``scripts/test.sh`` do)::

    python _ext/bookpdf.py

It builds ``_build/singlehtml`` with Jupyter Book (pages come from the execution cache, so nothing is
re-run), serves it on 127.0.0.1, aborts every other request, waits for MathJax and every image and prints
it with Debian's Chromium to ``_build/html/rankcollapse-companion.pdf`` (atomically), where the intro page and
every page's download menu link it. The PDF is one a reader can use:

- every link works off line and on paper: one to a place in the book goes to that place in the PDF, every
  other one (downloads, figure files, the exported notebooks) to the published site (``html_baseurl``), never
  to the build's local server (:data:`LINKS_JS`);
- bookmarks (the PDF outline, from the headings) and page numbers in the footer and in the contents (a
  first printing finds each chapter's page, :func:`chapter_pages`; the contents get the numbers and the book
  is printed again, until the numbers hold);
- the print rules of ``_static/booksite.css`` keep figures with their captions and wrap code.

Also provides the local server and the Chromium launcher that the browser tests (``tests/site/conftest.py``)
use.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
logging.getLogger("pypdf").setLevel(logging.ERROR)  # Chromium's trailers "exceed defined trailer size": noise
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PDF_NAME = "rankcollapse-companion.pdf"  # linked from book/intro.md and every page's download menu
NOT_LOCAL = re.compile(r"^(?!http://127\.0\.0\.1)")
PRINTED_PAGE = "whole-book.html"  # the copy of the single page that is printed (see print_pdf)
MAX_PRINTINGS = 3  # the contents' page numbers settle after one re-print unless they change the pagination
# A heading on a page's last line may land on that page or the next by the glyphs of the contents' numbers (a
# 2-cycle seen on 2026-12-07: one subsection at 302 and 303 in turn): so many such entries print no number.
MAX_UNSETTLED = 3
MARGIN = {"top": "14mm", "bottom": "16mm", "left": "12mm", "right": "12mm"}  # A4_TEXT_PX; test_table_widths
FOOTER = ('<div style="font-size: 8px; width: 100%; margin: 0 12mm; display: flex; color: #555; '
          'font-family: sans-serif;"><span class="title" style="flex: 1;"></span>'
          '<span><span class="pageNumber"></span> / <span class="totalPages"></span></span></div>')


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


def published_site() -> str:
    """The published site's URL, ending in ``/``: ``html_baseurl`` of ``_config.yml`` (Jupyter Book's
    ``html: baseurl``), else the repository's GitHub Pages URL — the base of the figures' cite URLs too
    (:func:`rankcollapse.book.sphinx_figures.site_url`)."""
    import yaml

    from rankcollapse.book.sphinx_figures import site_url

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return site_url(SimpleNamespace(
        html_baseurl=(config.get("html") or {}).get("baseurl", ""),
        html_theme_options={"repository_url": (config.get("repository") or {}).get("url", "")}))


# The text area of an A4 page at 96 px per inch: 210 mm and 297 mm less the margins.
A4_TEXT_PX = (round((210 - 24) / 25.4 * 96), round((297 - 30) / 25.4 * 96))
TALL_FIGURES_JS = """(pageHeight) => {
  for (const figure of document.querySelectorAll('figure')) {
    figure.classList.toggle('pdf-taller-than-page', figure.getBoundingClientRect().height > pageHeight);
  }
}"""

# Every link of the single page, before printing. Sphinx writes the single page's links partly relative to
# the build's root (``book/intro.html#sec-setup``), partly to the page's own folder (``../_figures/x.png``),
# and the figures' gallery as ``../#document-<page>#<label>``: resolved against the printed copy they all
# point at the local server. A link whose last fragment names an element of the single page
# (``document-<page>`` for a page) becomes that fragment, which Chromium prints as a link inside the PDF; any
# other local link goes to the same path on the published site (figure files, downloads, notebooks; the root
# page for the single page itself). Returns how many links went each way.
LINKS_JS = """([site, singlePaths, rootPage]) => {
  const counts = {internal: 0, site: 0};
  for (const a of document.querySelectorAll('a[href]')) {
    const url = new URL(a.href);
    if (url.origin !== location.origin) continue;
    const fragment = url.hash.split('#').pop();
    if (fragment && document.getElementById(decodeURIComponent(fragment))) {
      a.setAttribute('href', '#' + fragment);
      counts.internal += 1;
    } else {
      const single = singlePaths.includes(url.pathname);
      a.setAttribute('href', site + (single ? rootPage : url.pathname.slice(1) + url.hash));
      counts.site += 1;
    }
  }
  return counts;
}"""

# The contents (sphinx-book-theme's print-only ``#jb-print-toc``) with each chapter's page number.
NUMBER_CONTENTS_JS = """(pages) => {
  let numbered = 0;
  for (const a of document.querySelectorAll('#jb-print-toc a[href^="#"]')) {
    const name = decodeURIComponent(a.getAttribute('href').slice(1));
    let span = a.querySelector('span.pdf-page-number');
    if (!(name in pages)) { if (span) span.remove(); continue; }
    if (!span) { span = document.createElement('span'); span.className = 'pdf-page-number'; a.append(span); }
    span.textContent = String(pages[name]);
    numbered += 1;
  }
  return numbered;
}"""


# The headings of the book in reading order, for the PDF's bookmarks: the root page's title and sections, then
# every page (``document-<page>``) under its part of the contents (``#jb-print-toc``'s captions), with its
# sections and subsections. Each heading is named by the id its section's link points at (a named destination
# of the PDF) and by its text as a reader sees it (math as text, no "#" link).
HEADINGS_JS = """() => {
  const partOf = {};
  let part = null;
  const toc = '#jb-print-toc .caption-text, #jb-print-toc a[href^="#document-"]';
  for (const el of document.querySelectorAll(toc)) {
    if (el.matches('.caption-text')) part = el.textContent.trim();
    else partOf[decodeURIComponent(el.getAttribute('href').slice(1))] = part;
  }
  const text = (h) => {
    const copy = h.cloneNode(true);
    copy.querySelectorAll('.headerlink').forEach(e => e.remove());
    copy.querySelectorAll('mjx-container').forEach(m => {
      const mml = m.querySelector('mjx-assistive-mml');
      m.replaceWith(mml ? mml.textContent : '');
    });
    return copy.textContent.replace(/\\s+/g, ' ').trim();
  };
  const headings = [];
  let page = null;
  for (const el of document.querySelectorAll('article.bd-article :is([id^="document-"], h1, h2, h3, h4)')) {
    if (el.id.startsWith('document-')) { page = el.id; continue; }
    const link = el.querySelector('a.headerlink');
    if (!link) continue;
    headings.push({level: Number(el.tagName[1]), title: text(el), id: link.getAttribute('href').slice(1),
                   part: page && partOf[page]});
  }
  return headings;
}"""


def add_outline(pdf: bytes, headings: list[dict]) -> bytes:
    """``pdf`` with bookmarks: a part of the contents ("Theory"), the pages in it, their sections and
    subsections, each at its heading (the named destination of its id); the root page's title and sections
    first. ``headings``: :data:`HEADINGS_JS` (``level`` 1-4, ``title``, ``id``, ``part``)."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import Fit

    reader = PdfReader(io.BytesIO(pdf))
    targets = {name.lstrip("/"): dest for name, dest in reader.named_destinations.items()}
    writer = PdfWriter(clone_from=reader)
    parents: dict[int, object] = {}  # the last bookmark of each depth
    part = None
    for heading in headings:
        dest = targets.get(heading["id"])
        if dest is None:
            continue
        page = reader.get_destination_page_number(dest)
        fit = Fit.xyz(dest.left, dest.top) if dest.typ == "/XYZ" else Fit.fit()
        depth = heading["level"] - 1  # the root page's title 0, its sections and every page 1, …
        if heading["part"] and heading["level"] == 2:
            if heading["part"] != part:
                part = heading["part"]
                parents[0] = writer.add_outline_item(title=part, page_number=page, fit=fit)
        elif heading["level"] <= 2:
            part = None
        parent = parents[max(d for d in parents if d < depth)] if any(d < depth for d in parents) else None
        parents = {d: item for d, item in parents.items() if d < depth}  # a later heading never nests deeper
        parents[depth] = writer.add_outline_item(title=heading["title"], page_number=page, parent=parent,
                                                 fit=fit)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def bookmarks(reader) -> list[tuple[int, str, int]]:
    """The outline of a PDF (a pypdf reader) in reading order: (depth from 0, title, page index)."""
    def walk(items, depth=0):
        for item in items:
            if isinstance(item, list):
                yield from walk(item, depth + 1)
            else:
                yield depth, item.title, reader.get_destination_page_number(item)
    return list(walk(reader.outline))


def chapter_pages(pdf: bytes) -> dict[str, int]:
    """``{element id: page number (from 1)}`` of every named destination of a PDF Chromium printed: it
    names one for each element that a link inside the document points at (``document-<page>`` for a page)."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf))
    return {name.lstrip("/"): reader.get_destination_page_number(dest) + 1
            for name, dest in reader.named_destinations.items()}


def unsettled(numbered: dict[str, int | str], printed: dict[str, int]) -> list[str]:
    """The entries whose page in ``printed`` (:func:`chapter_pages` of a printing) is not the number the
    contents gave them in ``numbered`` ("" where they print none); one RuntimeError when any entry that prints
    a number moved by more than a page, or more than :data:`MAX_UNSETTLED` moved."""
    moved = [name for name, page in printed.items() if numbered.get(name) not in ("", page)]
    far = [name for name in moved if not isinstance(numbered.get(name), int)
           or abs(numbered[name] - printed[name]) > 1]
    if far or len(moved) > MAX_UNSETTLED:
        raise RuntimeError(f"the contents' page numbers did not settle in {MAX_PRINTINGS} printings: "
                           f"{len(moved)} entries moved ({', '.join(moved[:5])})")
    return moved


def _load(page, url: str, root_doc: str, timeout_ms: int) -> dict[str, int]:
    """Open the single page, let MathJax and every image finish, open every collapsed block, rewrite the
    links (:data:`LINKS_JS`); returns the link counts."""
    page.goto(url + PRINTED_PAGE, wait_until="load", timeout=timeout_ms)
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                           timeout=timeout_ms)
    page.evaluate("() => MathJax.startup.promise")
    # Lazy images (the gallery's thumbnails) load only when scrolled to: load every image now.
    page.evaluate("() => document.querySelectorAll('img[loading=lazy]')"
                  ".forEach(i => { i.loading = 'eager'; })")
    page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=timeout_ms)
    # Paper has no toggles: print every collapsed block (each figure's "Cite this figure") open.
    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
    # A figure is kept on one page with its caption (booksite.css), unless, laid out as on paper, it is
    # taller than a page: then Chromium left a blank page before it and split it anyway.
    page.emulate_media(media="print")
    page.set_viewport_size({"width": A4_TEXT_PX[0], "height": A4_TEXT_PX[1]})
    page.evaluate(TALL_FIGURES_JS, A4_TEXT_PX[1])
    single = ["/", "/index.html", f"/{PRINTED_PAGE}", f"/{root_doc}.html"]
    return page.evaluate(LINKS_JS, [published_site(), single, f"{root_doc}.html"])


def print_pdf(folder: Path, target: Path, timeout_ms: int = 120_000) -> dict[str, int]:
    """Print the single-page build in ``folder`` to ``target``, links, outline and page numbers included.

    Sphinx writes the single page at the root document's path (``book/intro.html``) but with links relative
    to the build's root, so it is printed from a copy at the root. Returns the PDF's page count
    (``pages``), its links inside the book (``internal``) and to the published site (``site``), its
    bookmarks and the number of printings it took.
    """
    import yaml
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader

    from rankcollapse.experiments.provenance import atomic_write

    root_doc = yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]
    (folder / PRINTED_PAGE).write_text((folder / f"{root_doc}.html").read_text(encoding="utf8"),
                                       encoding="utf8")
    options = dict(format="A4", print_background=True, margin=MARGIN, display_header_footer=True,
                   header_template="<div></div>", footer_template=FOOTER)
    with serve(folder) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.route(NOT_LOCAL, lambda route: route.abort())
        counts = _load(page, url, root_doc, timeout_ms)
        pdf, numbers, printings = page.pdf(**options), None, 1
        printed = chapter_pages(pdf)  # read once per printing: a 380-page PDF takes seconds to parse
        while printings < MAX_PRINTINGS and printed != numbers:
            numbers = printed
            page.evaluate(NUMBER_CONTENTS_JS, numbers)
            pdf, printings = page.pdf(**options), printings + 1
            printed = chapter_pages(pdf)
        if printed != numbers:  # a few headings on a page break: they print no number
            numbers = {**numbers, **dict.fromkeys(unsettled(numbers, printed), "")}
            page.evaluate(NUMBER_CONTENTS_JS, numbers)
            pdf, printings = page.pdf(**options), printings + 1
            if unsettled(numbers, chapter_pages(pdf)):
                raise RuntimeError(f"the contents' page numbers did not settle in {printings} printings")
        pdf = add_outline(pdf, page.evaluate(HEADINGS_JS))
        browser.close()
    atomic_write(target, lambda tmp: Path(tmp).write_bytes(pdf))
    reader = PdfReader(target)
    return {"pages": len(reader.pages), **counts, "bookmarks": len(bookmarks(reader)), "printings": printings}


def main() -> None:
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT), "--builder",
                    "singlehtml", "-q"], check=True)
    built = time.perf_counter()
    target = ROOT / "_build" / "html" / PDF_NAME
    done = print_pdf(ROOT / "_build" / "singlehtml", target)
    print(f"== PDF: {target} ({done['pages']} pages, {target.stat().st_size / 1e6:.1f} MB, links: "
          f"{done['internal']} inside the book, {done['site']} to the published site; "
          f"{done['bookmarks']} bookmarks; printed "
          f"{done['printings']} times); single-page HTML {built - start:.0f} s, printing "
          f"{time.perf_counter() - built:.0f} s")


if __name__ == "__main__":
    main()
