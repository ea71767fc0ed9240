"""Small things a reader of the site meets: the status page's words and run times, tables that render, the
store inventory of the reproduce page, author–year bibliography labels, the "open issue" button's text, the
favicon and no theme-mode console error. Each test failed on the previous site (see its docstring)."""

from __future__ import annotations

import html
import re
import urllib.parse
from pathlib import Path

import pytest

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
EMOJI = re.compile("[\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff]")
# A Markdown table that was not rendered: its separator row ("|---|", "|:--|", or "|—|" after the
# typographer turned "---" into an em dash) shows as text.
PIPE_TABLE = re.compile(r"\|\s*:?[-—–]+:?\s*\|")


def _broken_words(page, selector: str) -> list[str]:
    """The words inside the elements of ``selector`` that the layout breaks over two lines ("Stat us"); a
    line may end at a hyphen or slash ("self-" / "attention")."""
    return page.evaluate("""(selector) => {
        const broken = [];
        for (const element of document.querySelectorAll(selector)) {
            const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                for (const match of node.textContent.matchAll(/[^\\s\\/-]+/g)) {  // a break at - or / is one
                    const range = document.createRange();
                    range.setStart(node, match.index); range.setEnd(node, match.index + match[0].length);
                    const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
                    if (tops.size > 1) broken.push(match[0]);
                }
            }
        }
        return broken; }""", selector)


def test_status_page_says_in_words_how_each_page_ran_with_the_time_its_page_states(site_page, js_errors):
    """The status column showed ✅ (an empty box without an emoji font, in Chromium and the PDF), its header
    broke into "Stat us", and its run times were the notebooks' (theorem 1: 181 s) where the page's re-run
    block states what computing its results took (11 s)."""
    site_page.goto("book/status.html")
    table = site_page.locator("main table.book-status")
    assert table.count() == 1
    assert not EMOJI.search(table.inner_text())
    assert table.locator("thead th").all_inner_texts() == ["page", "this build", "result", "computation time"]
    assert _broken_words(site_page, "main table.book-status") == []
    rows = table.locator("tbody tr")
    times = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td")
        assert cells.nth(2).inner_text().strip() == "ran without error"
        assert cells.nth(1).inner_text().strip() in {"executed", "from the cache"}
        times[cells.nth(0).locator("a").get_attribute("href")] = " ".join(cells.nth(3).inner_text().split())
    agree = []
    for href, words in times.items():
        page = href.split("#")[0].split("book/")[-1]
        site_page.goto("book/" + page)
        body = " ".join(site_page.locator("main").inner_text().split())
        if "Its computation took" in body:  # a page that pastes its re-run block
            assert f"Its computation took {words}" in body, (page, words)
            agree.append(page)
    assert {"theory/theorem1.html", "response/reviewers.html", "data.html"} <= set(agree)
    assert js_errors == []


def test_no_page_shows_an_unrendered_markdown_table():
    """The large-models page's table showed as one paragraph, "| model | … | |—|—|—| …" (pasted
    inline, its "---" became em dashes)."""
    shown = {}
    for path in sorted((SITE / "book").rglob("*.html")):
        text = path.read_text(encoding="utf8")
        text = re.sub(r"<(pre|script|style)\b.*?</\1>", " ", text, flags=re.S)
        found = PIPE_TABLE.search(html.unescape(re.sub(r"<[^>]+>", " ", text)))
        if found:
            shown[path.relative_to(SITE).as_posix()] = found.group(0)
    assert len(list((SITE / "book").rglob("*.html"))) > 15
    assert shown == {}
    large = (SITE / "book" / "beyond" / "large_models.html").read_text(encoding="utf8")
    assert re.search(r"<th[^>]*>\s*(<p>)?\s*GPU memory", large)  # the commands table is a table


def test_reproduce_page_lists_the_store_page_by_page_sorted_and_collapsed(site_page):
    """The store inventory was one table of 105 rows, ten screens, in the store's key order."""
    site_page.goto("book/reproduce.html")
    blocks = site_page.locator("main details.store-inventory")
    stored = sorted(p.name for p in (ROOT / "results").iterdir() if p.is_dir() and any(p.glob("*.json")))
    assert [blocks.nth(i).locator("summary strong").inner_text() for i in range(blocks.count())] == stored
    assert not any(blocks.nth(i).evaluate("d => d.open") for i in range(blocks.count()))
    box = site_page.locator("main details.store-inventory").last.bounding_box()
    first = site_page.locator("main details.store-inventory").first.bounding_box()
    assert box["y"] + box["height"] - first["y"] < 900  # every page's line on one screen
    for i in range(blocks.count()):
        scales = blocks.nth(i).locator("tbody tr td:first-child").all_text_contents()  # closed: not rendered
        numbers = [tuple(int(n) for n in s.split("×")) for s in scales]
        assert numbers == sorted(numbers), stored[i]


def test_bibliography_labels_are_author_year_like_the_citations(site_page):
    """The bibliography was labelled [AM07], [WAW+24] while the text cites "Wu et al., 2024"."""
    site_page.goto("book/intro.html")
    cite = site_page.locator("main a[href*='bibliography.html#']").filter(has_text="2024").first
    target = cite.get_attribute("href").split("#")[1]
    assert " ".join(cite.inner_text().split()) == "Wu et al., 2024"
    site_page.goto("book/bibliography.html")
    labels = [" ".join(t.split()).strip("[]")
              for t in site_page.locator("main .citation .label").all_inner_texts()]
    assert len(labels) > 10
    assert all(re.fullmatch(r"[^,]+, \d{4}[a-z]?", label) for label in labels), labels
    entry = site_page.locator(f"main [id='{target}']")
    assert " ".join(entry.locator(".label").first.inner_text().split()).strip("[]") == "Wu et al., 2024"


def test_open_issue_button_asks_about_this_page(site_page):
    """It pre-filled "Your issue content here."."""
    site_page.goto("book/setup.html")
    href = site_page.locator("a[href*='/issues/new']").first.get_attribute("href")
    query = urllib.parse.parse_qs(urllib.parse.urlparse(href).query)
    assert "Your issue content here" not in query["body"][0]
    assert query["body"][0].startswith("Page: https://rankcollapse.github.io/companion/book/setup.html")
    assert query["title"][0] == 'On the page "1. Setup and notation"'


def test_favicon_is_served_and_no_theme_mode_error(site_page, js_errors):
    """The site had no favicon (a 404 for /favicon.ico) and every page logged "Got invalid theme mode"."""
    failed = []
    site_page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    messages = []
    site_page.on("console", lambda m: messages.append(m.text))
    site_page.goto("book/intro.html")
    icon = site_page.locator("link[rel='icon']").get_attribute("href")
    assert icon.endswith(".svg")
    response = site_page.request.get(site_page.url.rsplit("/", 1)[0] + "/" + icon)
    assert response.ok and b"<svg" in response.body()
    assert not [m for m in messages if "invalid theme mode" in m]
    assert site_page.evaluate("() => document.documentElement.dataset.mode") in {"auto", "light", "dark"}
    assert failed == [] and js_errors == []
