"""Pages stay thin: a computed page's code is its ``parameters`` cell and one call, ``report.present``; its
module returns what it shows and never glues or displays; no page has more code lines than prose lines."""

import ast
from pathlib import Path

import jupytext
import pytest

from rankcollapse.book.registry import PAGES as REGISTERED

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "book").rglob("*.md"))
PAGE_MODULES = ROOT / "src" / "rankcollapse" / "book" / "pages"
GLUE_MODULES = {"IPython", "myst_nb", "rankcollapse.book.report"}  # what only report.present may use
ONE_CALL = 'from rankcollapse.book import report\n\nreport.present("{name}", globals())'


def code_and_prose_lines(path: Path) -> tuple[int, int]:
    """Non-blank lines of code cells and of Markdown cells (front matter excluded)."""
    notebook = jupytext.read(path)
    count = lambda kind: sum(1 for c in notebook.cells if c.cell_type == kind  # noqa: E731
                             for line in c.source.splitlines() if line.strip())
    return count("code"), count("markdown")


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_no_page_has_more_code_than_prose(path):
    code, prose = code_and_prose_lines(path)
    assert code <= prose, (f"{path.name}: {code} code lines > {prose} prose lines; "
                           "move logic into src/rankcollapse")


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_a_computed_pages_code_is_its_parameters_cell_and_one_call(name):
    cells = [c for c in jupytext.read(REGISTERED[name].path(ROOT)).cells if c.cell_type == "code"]
    assert len(cells) == 2, f"{name}: {len(cells)} code cells; a page has its parameters cell and one call"
    assert "parameters" in cells[0].metadata.get("tags", []), (f"{name}: the first code cell is not "
                                                               "`parameters`")
    assert cells[1].source.strip() == ONE_CALL.format(name=name)
    assert cells[1].metadata.get("tags") == ["remove-cell"]


@pytest.mark.parametrize("path", sorted(PAGE_MODULES.glob("*.py")), ids=lambda p: p.name)
def test_page_modules_return_what_they_show_and_never_glue(path):
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    used = {m for m in imported if any(m == g or m.startswith(f"{g}.") for g in GLUE_MODULES)}
    assert not used, (f"{path.name} imports {sorted(used)}; "
                      "return values in a Shown, report.present glues them")
    names = {n.id for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}
    assert not {n for n in names if n.startswith("glue")}, f"{path.name} glues; return it in a Shown instead"
