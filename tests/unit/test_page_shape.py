"""Pages stay thin: no page has more code lines than prose lines (logic belongs in the package)."""

from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "book").rglob("*.md"))


def code_and_prose_lines(path: Path) -> tuple[int, int]:
    """Non-blank lines of code cells and of Markdown cells (front matter excluded)."""
    notebook = jupytext.read(path)
    count = lambda kind: sum(1 for c in notebook.cells if c.cell_type == kind  # noqa: E731
                             for line in c.source.splitlines() if line.strip())
    return count("code"), count("markdown")


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_no_page_has_more_code_than_prose(path):
    code, prose = code_and_prose_lines(path)
    assert code <= prose, f"{path.name}: {code} code lines > {prose} prose lines; move logic into src/rankcollapse"
