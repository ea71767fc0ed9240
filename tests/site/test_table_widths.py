"""Tables and figures fit: at 1280 px no table or figure is wider than the text column and no part of a table
hides in a scrolling box; at a 390 px phone no cell of a Markdown table (the claims tables) is cut off
(a computed table may scroll inside its own box there); printed on A4 as the book's PDF is, no table is
cut off either. No word or number in a claims table or a Markdown table breaks inside ("co m pl et e"), at
1280 px, 390 px or in print, and no code cell hides a line's end. Measured in Chromium from the laid-out
page, not from the CSS."""

from pathlib import Path

import pytest

SITE = Path(__file__).resolve().parents[2] / "_build" / "html"
PAGES = sorted(str(p.relative_to(SITE)) for p in SITE.glob("book/**/*.html"))
A4_CSS_PX = 703  # 210 mm less bookpdf's 12 mm margins, at 96 px per inch

pytestmark = pytest.mark.site

# What a reader cannot see, as a list of findings. ``mode``: "desk" (1280 px: every table and figure within
# the column, nothing to scroll to), "phone" (a computed table may scroll in its box), "print" (nothing
# scrolls).
_MEASURE = """mode => {
  const desk = mode === "desk";
  const article = document.querySelector("article.bd-article");
  const col = article.getBoundingClientRect();
  const found = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + " " + \
el.textContent.trim().slice(0, 40);
  for (const el of article.querySelectorAll("table, figure, img")) {
    const r = el.getBoundingClientRect();
    if (mode !== "phone" && (r.right > col.right + 1 || r.left < col.left - 1))
      found.push(`${name(el)}: ${Math.round(r.width)} px wide, the column ${Math.round(col.width)} px`);
    for (let box = el.parentElement; box && box !== article; box = box.parentElement) {
      const style = getComputedStyle(box);
      if ((mode !== "phone" || style.overflowX === "hidden") && style.overflowX !== "visible"
          && box.scrollWidth > box.clientWidth + 1) {
        found.push(`${name(el)}: ${box.scrollWidth - box.clientWidth} px hidden in a scrolling box`); break;
      }
    }
  }
  for (const table of article.querySelectorAll("table.table")) {  // Markdown tables: every cell whole
    const box = table.parentElement.getBoundingClientRect();
    for (const cell of table.querySelectorAll("td, th")) {
      const r = cell.getBoundingClientRect();
      if (cell.scrollWidth > cell.clientWidth + 1 || r.right > Math.min(box.right, col.right) + 1)
        found.push(`cell "${cell.textContent.trim().slice(0, 30)}" cut off at \
${Math.round(Math.min(box.right, col.right))} px`);
    }
  }
  return found;
}"""


# Words broken inside: every whitespace-free token of a claims table's or a Markdown table's text whose
# glyphs lie on more than one line (the status page's table aside: Jupyter Book writes it); and code cells
# whose lines run past their box (cut, or hidden in a scrolling box).
_BROKEN = """() => {
  const tables = location.pathname.endsWith("status.html") ? "table.claims-table" : "table.table";
  const article = document.querySelector("article.bd-article");
  const found = [];
  const text = el => el.innerText.replace(/\\s+/g, " ").trim().slice(0, 30);
  for (const table of article.querySelectorAll(tables)) {
    const walker = document.createTreeWalker(table, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const rects = [...range.getClientRects()].filter(r => r.width > 0);
        if (rects.length < 2) continue;
        const tops = rects.map(r => r.top), height = Math.min(...rects.map(r => r.height));
        if (Math.max(...tops) - Math.min(...tops) > height / 2)
          found.push(`"${m[0]}" broken over ${rects.length} lines in "${text(table)}"`);
      }
    }
  }
  for (const pre of article.querySelectorAll("div.highlight pre"))
    if (pre.scrollWidth > pre.clientWidth + 1)
      found.push(`code "${text(pre)}": ${pre.scrollWidth - pre.clientWidth} px past its box`);
  return found;
}"""


def _findings(browser, site_url, width: int, print_media: bool = False, measure: str = _MEASURE
              ) -> dict[str, list[str]]:
    from bookpdf import NOT_LOCAL

    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.route(NOT_LOCAL, lambda route: route.abort())
    if print_media:
        page.emulate_media(media="print")
    found = {}
    for relative in PAGES:
        page.goto(site_url + relative, wait_until="load")
        if print_media:  # as bookpdf prints: every collapsed block open
            page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
        mode = "print" if print_media else "desk" if width >= 1000 else "phone"
        hidden = page.evaluate(measure, mode) if measure is _MEASURE else page.evaluate(measure)
        if hidden:
            found[relative] = hidden[:4]
    context.close()
    return found


def test_tables_and_figures_fit_the_column_at_1280_px(browser, site_url):
    """The mask-design table's last column and the RMSNorm table's "late rate" were out of sight at
    1280 px."""
    assert not _findings(browser, site_url, 1280)


def test_no_markdown_table_cell_is_cut_off_on_a_phone(browser, site_url):
    """At 390 px the claims tables showed "hol" of "holds" and "par" of "partly" at the edge of their box."""
    assert not _findings(browser, site_url, 390)


def test_no_table_is_cut_off_on_a_printed_page(browser, site_url):
    """Paper does not scroll: a table wider than an A4 page lost its last columns in the PDF."""
    assert not _findings(browser, site_url, A4_CSS_PX, print_media=True)


@pytest.mark.parametrize("width, print_media", [(1280, False), (390, False), (A4_CSS_PX, True)],
                         ids=["1280px", "390px", "print"])
def test_no_word_or_number_in_a_table_breaks_inside_and_no_code_line_is_cut(browser, site_url, width,
                                                                             print_media):
    """The claims tables broke mask names and values letter by letter at 1280 px ("co m pl et e", "rat e
    0.0 00 34"), the setup page's names table broke identifiers ("temperatur e"), and the parameters cells cut
    their comments at the column's edge."""
    assert not _findings(browser, site_url, width, print_media, _BROKEN)
