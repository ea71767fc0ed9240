"""Tables and figures fit: at 1280 px no table or figure is wider than the text column and no part of a table
hides in a scrolling box; at a 390 px phone no cell of a Markdown table (the claims tables) is cut off
(a computed table may scroll inside its own box there); printed on A4 as the book's PDF is, no table is
cut off either. Measured in Chromium from the laid-out page, not from the CSS."""

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


def _findings(browser, site_url, width: int, print_media: bool = False) -> dict[str, list[str]]:
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
        hidden = page.evaluate(_MEASURE, "print" if print_media else "desk" if width >= 1000 else "phone")
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
