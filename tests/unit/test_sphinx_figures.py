"""The figure extension's pure parts: caption text, the site URL, citations; the book's CITATION.cff."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from docutils import nodes

from rankcollapse import __version__
from latex import compile_bibtex, needs_latex
from rankcollapse.book.sphinx_figures import caption_text, figure_citation, parameter_text, site_url

ROOT = Path(__file__).resolve().parents[2]


def _config(**kw):
    base = dict(html_baseurl="", html_theme_options={"repository_url": "https://github.com/owner/book"},
                author="The team", project="Project name not set", html_title="The book", copyright="2026")
    return SimpleNamespace(**{**base, **kw})


def test_caption_text_keeps_math_source_and_marks_it_for_mathjax_in_html():
    caption = nodes.caption("", "", nodes.math("", r"\mu(X)"), nodes.Text("  against\nlayer "),
                            nodes.emphasis("", "t"))
    assert caption_text(caption) == r"\mu(X) against layer t"
    assert caption_text(caption, math_html=True) == (
        # MathJax reads class math
        r'<span class="math notranslate nohighlight">\(\mu(X)\)</span> against layer t')


def test_site_url_from_baseurl_or_github_pages():
    assert site_url(_config()) == "https://owner.github.io/book/"
    assert site_url(_config(html_baseurl="https://example.org/b")) == "https://example.org/b/"
    with pytest.raises(ValueError, match="html_baseurl"):
        site_url(_config(html_theme_options={}))


def test_parameter_text_is_sorted_and_compact():
    assert parameter_text({"seed": 0, "model": "m", "w": {"a": "±1"}}) == 'model=m, seed=0, w={"a":"±1"}'


def test_figure_citation_names_version_commit_url_and_parameters():
    record = {"parameters": {"n_layers": 12}, "git_commit": "abc1234"}
    cite = figure_citation("fig-x-mu", "5.1", "Fig. 2", "https://owner.github.io/book/p.html#fig-x-mu",
                           record, _config(), "def5678")
    for text in cite.values():
        assert "abc1234" in text and __version__ in text and "#fig-x-mu" in text
    assert "n_layers=12" in cite["plain"] and r"n\_layers=12" in cite["bibtex"]  # BibTeX's fields are LaTeX
    assert cite["bibtex"].startswith("@misc{rankcollapse-fig-x-mu,") and cite["bibtex"].endswith("}")
    assert "Fig. 5.1: Fig. 2" in cite["plain"] and "In The book," in cite["plain"]


def test_a_cite_note_is_short_names_the_run_and_holds_no_null():
    """The note held every parameter (~900 characters), ``temperatures=[null]`` among them."""
    record = {"git_commit": "abc1234", "data": [{"result": "results/fig2/84d73a032d5630f6.csv.gz",
                                                 "computed_at_commit": "35be2223a296888e"}],
              "parameters": {"model": "pkg:minilm", "n_layers": 12, "n_samples": 8, "n_tokens": 32, "seed": 0,
                             "dtype": "float64", "temperatures": [None], "window": None,
                             "masks": ["complete", "causal", "sliding_window", "causal_sliding_window"],
                             "weights": {"initialized": "initialized: U(±1/√d), seed 0"},
                             "full_transformer": False}}
    cite = figure_citation("fig-fig2-mu", "7.1", "Figure 2",
                           "https://owner.github.io/book/p.html#fig-fig2-mu", record, _config(), "def5678")
    note = cite["bibtex"].split("note = {", 1)[1]
    assert len(cite["plain"]) < 400 and len(note) < 330
    assert "null" not in cite["plain"] and "None" not in cite["plain"] and "masks=" not in cite["plain"]
    assert "results/fig2/84d73a032d5630f6.csv.gz" in cite["plain"] and "n\\_samples=8" in note
    assert "JSON download" in cite["plain"]


def test_figure_citation_names_the_commit_that_computed_the_data_beside_the_render_commit():
    record = {"parameters": {}, "git_commit": "render99",
              "data": [{"result": "results/fig2/84d73a032d5630f6.csv",
                        "computed_at_commit": "35be2223a296888e"}]}
    cite = figure_citation("fig-x-mu", "5.1", "Fig. 2", "https://owner.github.io/book/p.html#fig-x-mu",
                           record, _config(), "def5678")
    for text in cite.values():
        assert "rendered at commit render99" in text
        assert "results/fig2/84d73a032d5630f6.csv computed at commit 35be2223a296" in text


def test_citation_cff_matches_the_package():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors", "version", "date-released"} <= set(cff)
    assert str(cff["version"]) == __version__
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    paper = cff["references"][0]
    assert (paper["title"] == "On the Role of Attention Masks and LayerNorm in Transformers"
            and paper["year"] == 2024)
    book_config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cff["title"] == book_config["title"] and cff["repository-code"] == book_config["repository"]["url"]


def _build_tiny_book(tmp_path, monkeypatch, export: bool):
    """A one-page Sphinx project with a fig-* figure (and the gallery), built with the extension."""
    import io
    import json

    from sphinx.application import Sphinx

    src = tmp_path / "src"
    (src / "_build" / "figures").mkdir(parents=True)
    from PIL import Image

    Image.new("RGB", (20, 10)).save(src / "pic.png")
    if export:
        for ext in ("png", "svg", "pdf", "csv"):
            (src / "_build" / "figures" / f"fig-tiny-pic.{ext}").write_bytes(b"x")
        (src / "_build" / "figures" / "fig-tiny-pic.json").write_text(
            json.dumps({"parameters": {"n_layers": 3}, "git_commit": "abc1234"}))
    (src / "conf.py").write_text(
        "extensions = ['rankcollapse.book.sphinx_figures']\nproject = 'Tiny'\nauthor = 'Team'\n"
        "copyright = '2026'\nhtml_baseurl = 'https://example.org/tiny/'\nhtml_title = 'Tiny book'\n"
        "html_theme = 'sphinx_book_theme'\nnumfig = True\n")
    (src / "index.rst").write_text("Tiny\n====\n\n.. figure:: pic.png\n   :name: fig-tiny-pic\n\n"
                                   "   A picture of :math:`\\mu(X)` over depth.\n\n.. figure-gallery::\n")
    monkeypatch.delenv("RANKCOLLAPSE_FIGURE_DIR", raising=False)
    warnings = io.StringIO()
    app = Sphinx(str(src), str(src), str(tmp_path / "html"), str(tmp_path / "doctrees"), "html",
                 status=None, warning=warnings, freshenv=True)
    app.build()
    return (tmp_path / "html" / "index.html").read_text(), warnings.getvalue()


def test_extension_decorates_an_exported_figure(tmp_path, monkeypatch):
    page, warnings = _build_tiny_book(tmp_path, monkeypatch, export=True)
    assert "fig-tiny-pic" not in warnings
    assert 'alt="A picture of \\mu(X) over depth."' in page
    assert ('href="_figures/fig-tiny-pic.png"' in page
            and (tmp_path / "html" / "_figures" / "fig-tiny-pic.json").is_file())
    assert 'href="_figures/fig-tiny-pic.csv" download>CSV (the points drawn)</a>' in page
    assert "https://example.org/tiny/index.html#fig-tiny-pic" in page
    assert "n_layers=3" in page and "abc1234" in page
    assert 'class="figure-gallery"' in page and 'id="gallery-fig-tiny-pic"' in page
    assert '<meta name="citation_title"' in page and f"Version {__version__}" in page
    assert '<meta name="citation_inbook_title" content="Tiny book"' in page


def test_extension_warns_when_a_figure_was_not_exported(tmp_path, monkeypatch):
    page, warnings = _build_tiny_book(tmp_path, monkeypatch, export=False)
    assert "figure 'fig-tiny-pic' has no exported fig-tiny-pic.png" in warnings
    assert 'class="figure-downloads"' not in page


@needs_latex
def test_every_kind_of_figure_bibtex_compiles_with_bibtex_and_latex(tmp_path):
    """The entries carried n_layers, U(±1/√d), JSON braces and results/<page>/<key>.csv as they were: LaTeX
    stopped at the first underscore ("Missing $ inserted") and had no glyph for ± or √."""
    record = {"git_commit": "f4ecf666397b", "parameters": {
        "weights": {"initialized": "initialized: U(±1/√d), seed 0",
                    "pretrained": "pretrained: all-mpnet-base-v2"},
        "mask_options": ['["causal", true]', '["density", 0.15]'], "n_layers": 12,
        "note": "100 % & #1, ~x^2 $5 \\ μ ‖X‖"},
              "data": [{"result": "results/appendix_g1/17585253890de7ea.csv",
                        "computed_at_commit": "13f61b99ff42"}]}
    entries = [figure_citation(f"fig-{name}", "10.1", "Appendix G.1: 128 layers — Fig. 2’s “μ”",
                               f"https://owner.github.io/book/book/experiments/{name}.html#fig-{name}",
                               record,
                               _config(author="The rankcollapse companion team"), "def5678")["bibtex"]
               for name in ("appendix_g1-fig2", "mask_design-rates")]
    log = compile_bibtex(entries, tmp_path)
    assert "Output written on doc.pdf" in log
    with pytest.raises(AssertionError, match="failed"):  # the check fails on the entries as they were
        compile_bibtex([entries[0].replace(r"\_", "_")], tmp_path)
