"""Every figure's "Cite this figure" BibTeX on the built site compiles with a real BibTeX and LaTeX (the
entries as the site shows them, read from every page's citation blocks: the gallery repeats them)."""

import html
import os
import re
from pathlib import Path

import pytest

from latex import compile_bibtex, needs_latex

SITE = Path(os.environ.get("RANKCOLLAPSE_SITE", Path(__file__).resolve().parents[2] / "_build" / "html"))

pytestmark = pytest.mark.site


def site_bibtex(site: Path) -> dict[str, str]:
    """Every figure's BibTeX entry on the site, by its key."""
    entries = {}
    for page in sorted(site.glob("book/**/*.html")):
        for block in re.findall(r'<pre class="figure-cite-bibtex">(.*?)</pre>',
                                page.read_text(encoding="utf-8"), re.S):
            entry = html.unescape(block)
            entries[re.match(r"@misc\{([^,]+),", entry)[1]] = entry
    return entries


@needs_latex
def test_every_figure_bibtex_on_the_site_compiles(tmp_path):
    entries = site_bibtex(SITE)
    assert len(entries) >= 20, f"expected every figure's entry, found {len(entries)} in {SITE}"
    compile_bibtex(list(entries.values()), tmp_path)
