"""The book's PDF (``_ext/bookpdf.py``, ``_build/html/rankcollapse-companion.pdf``) is one a reader can use.

Read with pypdf: no link to the build's local server (all 782 links of the previous PDF went to
``http://127.0.0.1:<port>/``), every link to the published site names a file the site has, links inside the
book land on a place in the PDF, the figures' cite URLs are page URLs (they read
``…/#document-book/experiments/fig2#fig-fig2-mu``), bookmarks (there were none), page numbers in the
footer and in the contents, no blank page (there were 13), every figure on the page of its caption. In the
browser, printed: code wraps at the margin (it was cut off). Every figure PDF the site links embeds TrueType
fonts (they were Type 3, which conference checks reject).
"""

from __future__ import annotations

import html
import re
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from pdffonts import pdf_font_subtypes

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
import bookpdf  # noqa: E402

pytestmark = pytest.mark.site

SITE = ROOT / "_build" / "html"
PDF = SITE / bookpdf.PDF_NAME
FOOTER_PT = 16 / 25.4 * 72  # text below this height is the footer (bookpdf.MARGIN's bottom)
_FIGURE = re.compile(r'<figure\b[^>]*\bid="(fig-[\w-]+)"[^>]*>(.*?)</figure>', re.S)


@pytest.fixture(scope="module")
def pdf():
    from pypdf import PdfReader

    if not PDF.is_file():
        pytest.fail(f"the book's PDF is not printed: {PDF} is missing (run `python _ext/bookpdf.py`)")
    return PdfReader(PDF)


def links(reader) -> list[tuple[int, str | None, str | None]]:
    """Every link annotation: (page index, URI or None, destination name or None)."""
    found = []
    for index, page in enumerate(reader.pages):
        for annotation in page.get("/Annots") or []:
            annotation = annotation.get_object()
            if annotation.get("/Subtype") != "/Link":
                continue
            action = annotation.get("/A")
            action = action.get_object() if action is not None else {}
            uri = str(action["/URI"]) if "/URI" in action else None
            dest = annotation.get("/Dest", action.get("/D"))
            found.append((index, uri, None if dest is None else str(dest)))
    return found


@cache
def body_text(reader, index: int) -> str:
    """The text of page ``index`` above the footer, a line for each run of text."""
    parts = []

    def keep(text, cm, tm, font, size):
        if text.strip() and tm[5] * cm[3] + cm[5] > FOOTER_PT:
            parts.append(text)
    reader.pages[index].extract_text(visitor_text=keep)
    return "\n".join(parts)


def site_figures() -> list[tuple[str, str, str, int]]:
    """(page, label, caption number "Fig. 7.1", caption length) of every figure of the built site's pages."""
    found = []
    for path in sorted((SITE / "book").rglob("*.html")):
        page = path.relative_to(SITE).with_suffix("").as_posix()
        for label, inner in _FIGURE.findall(path.read_text(encoding="utf8")):
            number = re.search(r'class="caption-number">\s*(Fig\. [\d.]+)', inner)
            caption = html.unescape(re.sub(r"<[^>]+>", "", inner.split("<figcaption>")[-1]))
            if number:
                found.append((page, label, number.group(1), len(caption)))
    return found


def test_no_link_goes_to_the_build_server_and_site_links_name_files_the_site_has(pdf):
    uris = [uri for _, uri, _ in links(pdf) if uri is not None]
    assert len(uris) > 100
    assert not [u for u in uris if re.match(r"https?://(127\.0\.0\.1|localhost)", u)], "links to the build"
    site = bookpdf.published_site()
    assert site.startswith("https://") and "127.0.0.1" not in site
    to_site = [u for u in uris if u.startswith(site)]
    assert len(to_site) > 100  # every figure's downloads and its full-size image
    for uri in to_site:
        path, _, fragment = uri.removeprefix(site).partition("#")
        assert "#" not in fragment and not fragment.startswith("document-"), uri
        assert (SITE / path).is_file(), f"{uri}: the site has no {path}"


def test_links_inside_the_book_land_on_a_place_in_the_pdf(pdf):
    names = {name.lstrip("/") for name in pdf.named_destinations}
    internal = [dest for _, uri, dest in links(pdf) if uri is None]
    assert len(internal) > 100  # the contents, every cross-reference and citation
    assert all(dest is not None and dest.lstrip("/") in names for dest in internal)
    assert {f"document-{page}" for page in _toc_pages()} <= names  # every page is a destination


def test_the_figures_cite_urls_are_their_pages_urls(pdf):
    text = re.sub(r"\s+", "", "".join(p.extract_text() for p in pdf.pages))
    assert "#document-" not in text
    site = bookpdf.published_site()
    figures = site_figures()
    assert len(figures) > 20
    for page, label, _, _ in figures:
        assert f"{site}{page}.html#{label}" in text, label


def test_bookmarks_hold_every_part_and_page_of_the_contents(pdf):
    outline = bookpdf.bookmarks(pdf)
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    parts = [part["caption"] for part in toc["parts"] if part.get("caption")]
    assert [title for depth, title, _ in outline if depth == 0 and title in parts] == parts
    chapters = [title for depth, title, _ in outline if depth == 1]
    assert len(chapters) >= len(_toc_pages()) and "1. Setup and notation" in chapters
    assert all(0 <= page < len(pdf.pages) for _, _, page in outline)
    assert not [title for _, title, _ in outline if "#" in title or re.search(r"(.{6,})\1", title)]


def test_pages_carry_their_number_and_the_contents_the_page_of_each_chapter(pdf):
    total = len(pdf.pages)
    for index in range(total):
        assert f"{index + 1} / {total}" in pdf.pages[index].extract_text(), f"page {index + 1}"
    contents = body_text(pdf, 0) + "\n" + body_text(pdf, 1)
    names = {name.lstrip("/"): dest for name, dest in pdf.named_destinations.items()}
    setup = pdf.get_destination_page_number(names["document-book/setup"]) + 1
    assert re.search(rf"1\. Setup and notation\s+{setup}(\s|$)", contents), contents[:400]
    bibliography = pdf.get_destination_page_number(names["document-book/bibliography"]) + 1
    assert re.search(rf"Bibliography\s+{bibliography}(\s|$)", contents)


def test_no_page_is_blank(pdf):
    blank = [index + 1 for index, page in enumerate(pdf.pages)
             if not body_text(pdf, index).strip() and not (page.get("/Resources") or {}).get("/XObject")]
    assert blank == []


def test_a_figure_that_fits_a_page_is_on_the_page_of_its_caption(pdf):
    """The image and the caption's number are on one page (Fig. 7.1's caption was on the page after its
    image, with a blank page before). A figure whose caption alone nearly fills a page may break."""
    names = {name.lstrip("/"): dest for name, dest in pdf.named_destinations.items()}
    checked = 0
    for _, label, number, caption_length in site_figures():
        if label not in names or caption_length > 1500:
            continue
        page = pdf.get_destination_page_number(names[label])
        assert number in " ".join(body_text(pdf, page).split()), f"{label}: {number} not on page {page + 1}"
        checked += 1
    assert checked > 20


def test_printed_code_wraps_at_the_margin(browser, site_url):
    """Paper cannot scroll: printed at A4's text width, no code block is wider than the column."""
    page = browser.new_page(viewport={"width": bookpdf.A4_TEXT_PX[0], "height": bookpdf.A4_TEXT_PX[1]})
    page.route(bookpdf.NOT_LOCAL, lambda route: route.abort())
    page.emulate_media(media="print")
    cut = {}
    for path in ("book/experiments/fig2.html", "book/reproduce.html"):
        page.goto(site_url + path, wait_until="load")
        cut[path] = page.evaluate("() => Array.from(document.querySelectorAll('div.highlight pre'))"
                                  ".filter(p => p.scrollWidth > p.clientWidth + 1).length")
        assert page.evaluate("() => document.querySelectorAll('div.highlight pre').length") > 0
    page.close()
    assert cut == {path: 0 for path in cut}


def _toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]


def test_every_figure_pdf_of_the_site_embeds_truetype_fonts():
    figures = sorted((SITE / "_figures").glob("fig-*.pdf"))
    assert len(figures) > 20
    subtypes = {path.name: set(pdf_font_subtypes(path).values()) for path in figures}
    assert {name: kinds for name, kinds in subtypes.items() if not kinds or "/Type3" in kinds} == {}
