"""The setup page runs under papermill with new parameters, and its glued numbers follow them."""

import pytest

from rankcollapse.book.plotting.common import MIN_TEXT_PX
from glue import read_glue

from rankcollapse.book.runner import execute_page

pytestmark = pytest.mark.notebook


def test_setup_page_at_small_parameters(repo_root, tmp_path, figure_dir, figure_text_px):
    out = execute_page(
        repo_root / "book" / "setup.md",
        {"n_tokens": 9, "window": 2, "table_n_tokens": [8, 9], "table_windows": [1, 2]},
        tmp_path / "setup.ipynb",
    )
    glued = read_glue(out)
    assert glued["setup_n_tokens"] == 9
    assert glued["setup_radius_uni"] == 4  # ceil(8 / 2)
    assert glued["setup_radius_sliding"] == 2  # ceil(4 / 2)
    assert glued["setup_radius_nmax_wmin"] == 8  # the table's largest N is now 9: ceil(8 / 1)
    assert (figure_dir / "fig-setup-masks.png").is_file()
    assert figure_text_px()["fig-setup-masks"] >= MIN_TEXT_PX


def test_page_without_parameters_cell_is_rejected(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("---\njupytext:\n  text_representation: {extension: .md, format_name: myst}\n"
                    "kernelspec: {display_name: Python 3, language: python, name: python3}\n---\n# T\n\n"
                    "```{code-cell} ipython3\nx = 1\n```\n")
    with pytest.raises(ValueError, match="no cell tagged 'parameters'"):
        execute_page(page, {}, tmp_path / "out.ipynb")
