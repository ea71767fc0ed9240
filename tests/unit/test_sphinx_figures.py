"""The figure extension's pure parts: caption text, the site URL, citations; the book's CITATION.cff."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from docutils import nodes

from rankcollapse import __version__
from rankcollapse.sphinx_figures import caption_text, figure_citation, parameter_text, site_url

ROOT = Path(__file__).resolve().parents[2]


def _config(**kw):
    base = dict(html_baseurl="", html_theme_options={"repository_url": "https://github.com/owner/book"},
                author="The team", project="The book", copyright="2026")
    return SimpleNamespace(**{**base, **kw})


def test_caption_text_keeps_math_source_and_optionally_delimits_it():
    caption = nodes.caption("", "", nodes.math("", r"\mu(X)"), nodes.Text("  against\nlayer "), nodes.emphasis("", "t"))
    assert caption_text(caption) == r"\mu(X) against layer t"
    assert caption_text(caption, math_delimiters=True) == r"\(\mu(X)\) against layer t"


def test_site_url_from_baseurl_or_github_pages():
    assert site_url(_config()) == "https://owner.github.io/book/"
    assert site_url(_config(html_baseurl="https://example.org/b")) == "https://example.org/b/"
    with pytest.raises(ValueError, match="html_baseurl"):
        site_url(_config(html_theme_options={}))


def test_parameter_text_is_sorted_and_compact():
    assert parameter_text({"seed": 0, "model": "m", "w": {"a": 1}}) == 'model=m, seed=0, w={"a":1}'


def test_figure_citation_names_version_commit_url_and_parameters():
    record = {"parameters": {"n_layers": 12}, "git_commit": "abc1234"}
    cite = figure_citation("fig-x-mu", "5.1", "Fig. 2", "https://owner.github.io/book/p.html#fig-x-mu",
                           record, _config(), "def5678")
    for text in cite.values():
        assert "abc1234" in text and __version__ in text and "#fig-x-mu" in text and "n_layers=12" in text
    assert cite["bibtex"].startswith("@misc{rankcollapse-fig-x-mu,") and cite["bibtex"].endswith("}")
    assert "Fig. 5.1: Fig. 2" in cite["plain"]


def test_citation_cff_matches_the_package():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors", "version", "date-released"} <= set(cff)
    assert str(cff["version"]) == __version__
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    paper = cff["references"][0]
    assert paper["title"] == "On the Role of Attention Masks and LayerNorm in Transformers" and paper["year"] == 2024
    book_config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cff["title"] == book_config["title"] and cff["repository-code"] == book_config["repository"]["url"]
