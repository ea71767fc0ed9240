"""The built pages' text, read from the HTML (no browser): nothing unrendered, no Python repr, no missing
value.

A reader must never see MyST that did not render (``{ref}``, ``{glue:…}``, a ```` ```{ ```` fence), a
Python object's repr (``<IPython.core.display.Markdown object>``) or a value that is missing (``nan``,
``None``, ``<NA>``) or a tracker's issue number (a claim's source is the paper, the response or this book's
control) in prose, tables or captions. Code (``<code>``, ``<pre>``), scripts, styles and math are
left out: a command may say ``None`` and TeX is not prose.
"""

from __future__ import annotations

import html as html_module
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.site

SITE = Path(__import__("os").environ.get("RANKCOLLAPSE_SITE",
                                         Path(__file__).resolve().parents[2] / "_build" / "html"))
FORBIDDEN = {
    "an unrendered MyST role": re.compile(r"\{(ref|glue|glue:text|glue:md|glue:figure|numref|cite:[pt]"
                                          r"|prf:ref|eq|doc|func|mod)\}"),
    "an unrendered MyST directive": re.compile(r"```\{"),
    "unrendered math": re.compile(r"\\\(|\\\)|\$\\[a-zA-Z]+"),
    "a missing value": re.compile(r"(?<![\w.-])(nan|NaN|None|<NA>)(?![\w-])"),
    # a reader knows the paper, the response and the book's controls, never our tracker's issues
    "a tracker's issue": re.compile(r"\b[Ii]ssues? #?\d+"),
}


def page_text(html: str) -> str:
    """The prose, tables and captions of one built page (see the module docstring for what is left out)."""
    html = re.sub(r"<(code|pre|script|style|kbd|samp)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r'<span class="math[^"]*"[^>]*>.*?</span>', " ", html, flags=re.S)
    html = re.sub(r'<div class="math[^"]*"[^>]*>.*?</div>', " ", html, flags=re.S)
    html = re.sub(r'<div class="cell_input[^"]*"[^>]*>.*?</div>\s*</div>', " ", html, flags=re.S)
    match = re.search(r"<article\b.*?</article>", html, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", match.group(0) if match else html)
    return re.sub(r"\s+", " ", html_module.unescape(text))


# a Python object's repr, e.g. a Markdown never displayed
REPR = re.compile(r"<[\w.]+ object( at 0x[0-9a-f]+)?>")


def output_text(html: str) -> str:
    """Everything a page shows but its code cells' input: prose and every cell's output, ``<pre>``
    included."""
    html = re.sub(r'<div class="cell_input[^"]*"[^>]*>.*?</div>\s*</div>', " ", html, flags=re.S)
    return html_module.unescape(re.sub(r"<[^>]+>", " ", html))


def _pages() -> list[Path]:
    return sorted(SITE.rglob("*.html")) if SITE.is_dir() else []


def test_the_site_is_built():
    assert (SITE / "index.html").is_file(), f"build the book first: {SITE}/index.html is missing"


@pytest.mark.parametrize("page", [p for p in _pages()
                                  if p.parent.name != "_static" and "genindex" not in p.name
                                  and "search" not in p.name and "_sources" not in p.parts],
                         ids=lambda p: str(p.relative_to(SITE)))
def test_no_page_shows_unrendered_myst_reprs_or_missing_values(page):
    text = page_text(page.read_text(encoding="utf-8"))
    found = {what: sorted({m.group(0) for m in pattern.finditer(text)})
             for what, pattern in FORBIDDEN.items()}
    found["a Python repr"] = sorted({m.group(0)
                                     for m in REPR.finditer(output_text(page.read_text(encoding="utf-8")))})
    found = {what: hits for what, hits in found.items() if hits}
    context = {what: [text[max(0, m.start() - 60):m.end() + 40] for m in FORBIDDEN[what].finditer(text)][:2]
               for what in found if what in FORBIDDEN}
    assert not found, f"{page.relative_to(SITE)}: {found}; e.g. {context}"
