"""Browser tests of every figure of the built site: legible at 1280 px, alt text from the caption, a click
opens the full-size PNG, downloads and a citation block under it; citation meta tags and the version in
the footer of every page; no page wider than a 390 px phone."""

import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from rankcollapse import __version__
from legibility import screen_text_px
from rankcollapse.book.plotting.common import MIN_TEXT_PX
from rankcollapse.book.sphinx_figures import CITED_PARAMETERS

SITE = Path(__file__).resolve().parents[2] / "_build" / "html"

pytestmark = pytest.mark.site

PAGES = sorted(str(p.relative_to(SITE)) for p in SITE.glob("book/**/*.html"))  # index.html only redirects
FIGURE_PAGES = [page for page in PAGES
                if 'class="figure-downloads"' in (SITE / page).read_text() and page != "book/gallery.html"]
DOWNLOADS = ("png", "svg", "pdf", "json", "csv")


def _soup(page: str) -> BeautifulSoup:
    return BeautifulSoup((SITE / page).read_text(), "html.parser")


def _words(text: str) -> str:
    """Caption text as the alt text holds it: math without its \\( \\) delimiters, one space between words."""
    return " ".join(re.sub(r"\\\(|\\\)", "", text).split())


def test_site_has_figures_and_a_gallery():
    assert len(FIGURE_PAGES) >= 5, FIGURE_PAGES
    gallery = _soup("book/gallery.html")
    cards = gallery.select("figure.gallery-figure")
    n_figures = sum(len(_soup(page).select("figure[id^=fig-]")) for page in PAGES
                    if page != "book/gallery.html")
    assert len(cards) == n_figures
    for card in cards:
        img, link = card.find("img"), card.find("a")
        assert (SITE / "book" / img["src"]).resolve().is_file() and img["alt"]
        assert re.fullmatch(r"[\w/.-]+\.html#fig-[\w-]+", link["href"])
    assert len(gallery.select("details.figure-cite")) == n_figures
    numbers = [tuple(map(int, card.find("strong").get_text().removeprefix("Fig. ").split(".")))
               for card in cards]
    assert numbers == sorted(numbers)  # in the order of the book


@pytest.mark.parametrize("page", FIGURE_PAGES)
def test_figures_have_alt_text_full_size_link_downloads_and_citation(page):
    soup = _soup(page)
    folder = (SITE / page).parent
    figures = soup.select("figure[id^=fig-]")
    assert figures
    for figure in figures:
        label = figure["id"]
        img = figure.find("img")
        caption = figure.find("figcaption").select_one(".caption-text")
        assert img["alt"] and img["alt"] == _words(caption.get_text()), label
        assert img.parent.name == "a" and img.parent["href"].endswith(f"_figures/{label}.png")
        assert (folder / img.parent["href"]).resolve().is_file()
        downloads = figure.find_next_sibling("div", class_="figure-downloads")
        assert downloads is not None and downloads["data-figure"] == label
        hrefs = [a["href"] for a in downloads.find_all("a")]
        assert [h.rsplit(".", 1)[1] for h in hrefs] == list(DOWNLOADS)
        assert all((folder / h).resolve().is_file() for h in hrefs)
        svg = (folder / hrefs[1]).resolve().read_text()
        assert "<text" in svg  # selectable text, not glyph outlines
        record = json.loads((folder / hrefs[3]).resolve().read_text())
        drawn = (folder / hrefs[4]).resolve().read_text().splitlines()  # the points it draws, one row each
        assert drawn[0].startswith("panel,panel_title,") and len(drawn) > 1, label
        cite = downloads.find_next_sibling("details", class_="figure-cite")
        assert cite["data-figure"] == label
        text = cite.get_text()
        assert __version__ in text and record["git_commit"] in text and f"#{label}" in text
        assert "@misc{rankcollapse-" + label in text
        # short: the run's scale, no parameter without a value; every parameter is in the JSON download
        cited = [key for key in CITED_PARAMETERS if record["parameters"].get(key) is not None]
        assert all(f"{key}=" in text for key in cited) and "JSON download" in text and "null" not in text
        note = cite.select_one(".figure-cite-bibtex").get_text().split("note = {", 1)[1]
        assert len(note) < 400, label  # it held every parameter: ~900 characters


def test_every_figure_text_is_at_least_9px_at_1280(site_page, repo_root):
    """On-screen font size of each figure's smallest text = recorded pt x inline dpi / 72 x shown / natural
    width."""
    measured, too_small = {}, {}
    for page in FIGURE_PAGES:
        site_page.goto(page)
        for figure in site_page.locator("figure[id^=fig-]").all():
            label = figure.get_attribute("id")
            img = figure.locator("img")
            img.scroll_into_view_if_needed()
            img.element_handle().wait_for_element_state("visible")
            site_page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=img.element_handle())
            width, natural = img.evaluate("i => [i.getBoundingClientRect().width, i.naturalWidth]")
            href = site_page.locator(f"div.figure-downloads[data-figure='{label}'] "
                                     "a[href$='.json']").get_attribute("href")
            record = site_page.request.get(site_page.url.rsplit("/", 1)[0] + "/" + href).json()
            info = record["legibility"]
            measured[label] = round(screen_text_px(info["min_font_pt"], info["inline_dpi"], natural, width),
                                    1)
            if measured[label] < MIN_TEXT_PX:
                too_small[label] = measured[label]
        if page == "book/experiments/fig2.html":
            site_page.screenshot(path=str(repo_root / "_build" / "screenshot-fig2-1280.png"), full_page=True)
    print("smallest on-screen text (px) per figure:", measured)
    assert not too_small, f"figures whose smallest text is below {MIN_TEXT_PX} px at 1280 px: {too_small}"


def test_every_page_has_citation_meta_tags_and_version_in_footer():
    for page in PAGES:
        soup = _soup(page)
        meta = {tag["name"]: tag["content"]
                for tag in soup.find_all("meta", attrs={"name": re.compile("^citation_")})}
        assert {"citation_title", "citation_author", "citation_publication_date", "citation_public_url",
                "citation_inbook_title"} <= set(meta), page
        assert (meta["citation_public_url"].startswith("https://")
                and meta["citation_public_url"].endswith(".html"))
        footer = soup.select_one(".book-version")
        assert footer is not None and f"Version {__version__}" in footer.get_text(), page
        assert re.search(r"commit [0-9a-f]{7,}", footer.get_text()), page


def test_intro_shows_the_papers_bibtex():
    text = _soup("book/intro.html").get_text()
    assert "@inproceedings{wu2024role," in text and "14774--14809" in text


def test_no_page_overflows_a_phone(browser, site_url):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.route(re.compile(r"^(?!http://127\.0\.0\.1)"), lambda route: route.abort())
    wide = {}
    for name in PAGES:
        page.goto(site_url + name, wait_until="load")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > 390:
            wide[name] = width
    context.close()
    assert not wide, f"pages wider than 390 px: {wide}"


CONTRAST_JS = """el => {
  const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : \
((v + 0.055) / 1.055) ** 2.4; });
                     return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  let bg = el, colour = getComputedStyle(el.querySelector('.caption-text') || el).color;
  while (bg && getComputedStyle(bg).backgroundColor.match(/rgba\\(.*, 0\\)|transparent/)) \
bg = bg.parentElement;
  const [a, b] = [lum(rgb(colour)), lum(rgb(getComputedStyle(bg || document.body).backgroundColor))];
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


def test_captions_meet_wcag_aa_contrast(site_page):
    site_page.goto("book/experiments/fig2.html")
    ratio = site_page.locator("figure[id^=fig-] figcaption").first.evaluate(CONTRAST_JS)
    assert ratio >= 4.5, f"caption contrast {ratio:.2f}:1 is below WCAG AA (4.5:1)"


# The dimensions a figure draws, which its CSV must name as columns (Fig. 2's named no weights, its panels by
# index only)
_NAMED = {"fig-fig2-mu": {"weights", "mask", "norm"}, "fig-fig3-mu": {"weights", "mask", "temperature"},
          "fig-fig2-controls": {"weights", "mask", "norm"},
          "fig-skip-connections-mu": {"weights", "mask", "norm", "skip"},
          "fig-fig4-geometry": {"weights", "mask", "norm"}, "fig-theorem2-random": {"W_V"}}


def test_every_exported_figure_keeps_one_colour_per_mask_and_its_csv_stands_alone():
    """Read back every figure's data download: each mask in one colour across the book (the Theorem 1 page
    used three colour maps for its masks, Fig. 3 mask colours for temperatures), every other series grey, each
    norm in its line style, every dimension drawn a column, no field over two lines."""
    import csv

    import pandas as pd
    from palette_rule import one_colour_per_mask, problems

    paths = sorted((SITE / "_figures").glob("fig-*.csv"))
    assert len(paths) > 40
    tables = {path.stem: pd.read_csv(path) for path in paths}
    found = [problem for stem, table in tables.items() for problem in problems(table, stem)]
    assert not found, "\n".join(found[:20])
    assert {mask: colours for mask, colours in one_colour_per_mask(tables).items() if len(colours) > 1} == {}
    for stem, dims in _NAMED.items():
        assert dims <= set(tables[stem].columns), f"{stem}: no column for {dims - set(tables[stem].columns)}"
    broken = [path.name for path in paths
              if any("\n" in field for row in csv.reader(path.open(newline="")) for field in row)]
    assert broken == []
