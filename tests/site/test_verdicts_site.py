"""The verdicts page of the built site: first in the book, linked from the intro's first screen, and listing
every claims row of every page with the same words, each linking to that row's anchor on its page."""

import posixpath
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

SITE = Path(__file__).resolve().parents[2] / "_build" / "html"
VERDICTS = "book/verdicts.html"

pytestmark = pytest.mark.site


def _soup(page: str) -> BeautifulSoup:
    return BeautifulSoup((SITE / page).read_text(), "html.parser")


def _text(cell) -> str:
    return " ".join(cell.get_text(" ").split())


def _without_label(cell) -> str:
    """A claim cell's text without its leading label (the row's number, or the verdicts page's link)."""
    label = cell.find(class_="claim-n")
    return " ".join(_text(cell).removeprefix(_text(label)).split()) if label else _text(cell)


def _page_rows() -> dict[str, tuple[str, list[str]]]:
    """Every anchored claims row of every page but the verdicts page: anchor -> (page, its three cells)."""
    rows = {}
    for path in sorted(SITE.glob("book/**/*.html")):
        page = str(path.relative_to(SITE))
        if page == VERDICTS:
            continue
        for row in _soup(page).select("table.claims-table tr[id^=claim-]"):
            rows[row["id"]] = (page, [_without_label(c) if i == 0 else _text(c)
                                      for i, c in enumerate(row.find_all("td"))])
    return rows


def _verdicts_rows() -> dict[str, list[str]]:
    """The verdicts page's full rows (the details tables): the anchor they link to -> their three cells."""
    rows = {}
    for row in _soup(VERDICTS).select("table.claims-table:not(.claims-summary):not(.claims-glance) tbody tr"):
        cells = row.find_all("td")
        href = cells[0].find(class_="claim-n").find("a")["href"]
        rows[href] = [_without_label(cells[0]), _text(cells[1]), _text(cells[2])]
    return rows


def test_every_claims_row_of_every_page_is_on_the_verdicts_page_with_the_same_words():
    pages, listed = _page_rows(), _verdicts_rows()
    assert len(pages) >= 80  # the experiment, response and beyond pages' rows and the theory pages'
    for anchor, (page, cells) in pages.items():
        href = posixpath.relpath(page, posixpath.dirname(VERDICTS)) + "#" + anchor
        assert href in listed, f"{page}#{anchor} is not on the verdicts page"
        assert listed[href] == cells, f"{page}#{anchor}: the verdicts page words differ"
    assert len(listed) == len(pages)


@pytest.mark.parametrize("table", ["claims-glance", "claims-summary"])
def test_the_overview_and_the_summaries_link_to_every_row_once(table):
    anchors = {f"{page}#{anchor}" for anchor, (page, _) in _page_rows().items()}
    links = [a["href"] for a in _soup(VERDICTS).select(f"table.{table} a[href]")]
    found = {posixpath.normpath(posixpath.join(posixpath.dirname(VERDICTS), href)) for href in links}
    assert len(links) == len(anchors) and found == anchors


def test_the_verdicts_page_is_first_and_the_intro_links_to_it_and_the_headline_rows_on_its_first_screen(
        site_page):
    toc = [a["href"] for a in _soup("book/setup.html").select("nav.bd-links a.reference.internal")]
    assert toc[0].endswith("intro.html") and toc[1].endswith("verdicts.html")  # the root, then the chapters
    site_page.goto("book/intro.html")
    first_screen = [a for a in site_page.locator("article a").all() if a.bounding_box()
                    and a.bounding_box()["y"] < 900]
    hrefs = [a.get_attribute("href") for a in first_screen]
    assert any(h.startswith("verdicts.html") for h in hrefs)
    assert sum("#claim-" in h for h in hrefs) == 3  # the three headline findings, each linking to its row
    assert "What the build computes" not in site_page.locator("article").inner_text()[:1500]
