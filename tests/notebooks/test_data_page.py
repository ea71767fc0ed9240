"""The data page runs with another sequence length, and every drawn sample has exactly that many tokens."""

import pytest

from glue import read_glue

from rankcollapse.book.runner import execute_page

pytestmark = [pytest.mark.notebook, pytest.mark.models]


def test_data_page_at_32_tokens(repo_root, tmp_path, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "results"))  # counts computed, not loaded
    pytest.importorskip("transformers")
    glued = read_glue(execute_page(repo_root / "book" / "data.md",
                                   {"n_tokens": 32, "seed": 3, "model_specs": ["pkg:minilm"]},
                                   tmp_path / "data.ipynb"))
    assert glued["data_example_tokens"] == 32
    assert glued["data_n_articles"] == 10033
    # shorter samples: many more disjoint cuts than the 2,607 available at 128 tokens
    assert glued["data_first_disjoint"] > 2607
    assert glued["data_first_disjoint"] < glued["data_first_starts"]
    assert glued["data_need_overlap"] in ("need", "do not need") and 0 < glued["data_fraction_reaching"] < 1
    assert (tmp_path / "results" / "data").is_dir()
