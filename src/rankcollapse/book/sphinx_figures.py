"""Sphinx extension: every ``fig-*`` figure of the book can be read, downloaded and cited; every page can be
cited too.

For each figure whose label starts with ``fig-`` (a ``{glue:figure}`` with ``:name: fig-...``), in the HTML:
* the image's alt text is the caption's text, and a click on it opens the full-size PNG;
* below it: downloads of the PNG, SVG, PDF, JSON provenance and CSV of the points it draws exported by
  :func:`rankcollapse.book.plotting.common.export_figure` (copied from ``<book>/_build/figures/<label>.*`` to
  ``_figures/`` in the site), and a collapsible "Cite this figure" block (BibTeX and plain text with the
  book's version, the git commit, the figure's anchor URL and the parameters from its JSON);
* a figure whose exported files are missing is a build warning (an error under ``-W``).
Every page gets Highwire Press ``citation_*`` meta tags (Zotero, Google Scholar) and the footer shows the
book's version and commit. The ``figure-gallery`` directive lists every figure of the book, in table of
contents order, with its thumbnail, caption, page, downloads and citation. Registered in ``_config.yml``'s
``extra_extensions``; the site's base URL is ``html_baseurl`` when set, else the GitHub Pages URL of the
repository.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import posixpath
import re
import shutil
import unicodedata
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx
from sphinx.builders.html import StandaloneHTMLBuilder
from sphinx.environment import BuildEnvironment
from sphinx.util import logging

from rankcollapse import __version__
from rankcollapse.experiments.provenance import git_commit

_logger = logging.getLogger(__name__)

_FIGURE_PREFIX = "fig-"
DOWNLOADS = ("png", "svg", "pdf", "json", "csv")
_DOWNLOAD_WORDS = {"csv": "CSV (the points drawn)"}  # a link's words where its format's name is not enough
_SITE_FOLDER = "_figures"  # where the exported files land in the HTML output
# Captions in the body text colour (the theme's muted grey is too faint), citations that wrap on a phone and
# print no ligature (a URL copied from the PDF read "ﬁg-" for "fig-"), the gallery as a grid of cards.
_STYLE = """<style>
figure figcaption, figure figcaption p { color: var(--pst-color-text-base); }
.figure-downloads { font-size: 0.9rem; margin: -0.75rem 0 0.25rem; }
details.figure-cite { font-size: 0.9rem; margin-bottom: 1.5rem; }
details.figure-cite pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.8rem; }
details.figure-cite p { overflow-wrap: anywhere; font-variant-ligatures: none; }
.figure-gallery { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 18rem), 1fr));\
 gap: 1.5rem; }
.gallery-card figure { margin: 0; }
.gallery-card img { width: 100%; height: auto; }
</style>"""


class _gallery_placeholder(nodes.General, nodes.Element):
    """Where ``figure-gallery`` puts the book's figures once all pages are read."""


class _FigureGallery(Directive):
    """``{figure-gallery}``: every ``fig-*`` figure of the book with caption, page, downloads and citation."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        return [_gallery_placeholder()]


# -- what a page and a figure are -------------------------------------------------------------------------


def caption_text(caption: nodes.Element, math_html: bool = False) -> str:
    """The caption's words in one line; math as its LaTeX source. ``math_html``: HTML for the gallery, the
    words escaped and each formula in a ``<span class="math">`` as ``\\( \\)`` (Sphinx's MathJax typesets
    only inside elements of class ``math``)."""
    parts = []
    for node in caption.findall(lambda n: isinstance(n, (nodes.Text, nodes.math))):
        if isinstance(node, nodes.math):
            tex = node.astext()
            parts.append(rf'<span class="math notranslate nohighlight">\({html.escape(tex)}\)</span>'
                         if math_html else tex)
        elif not isinstance(node.parent, nodes.math):
            parts.append(html.escape(node.astext()) if math_html else node.astext())
    return " ".join("".join(parts).split())


def site_url(config) -> str:
    """The site's base URL, ending in ``/``: ``html_baseurl``, else the repository's GitHub Pages URL."""
    if config.html_baseurl:
        return config.html_baseurl.rstrip("/") + "/"
    repository = (config.html_theme_options or {}).get("repository_url", "")
    match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", repository)
    if not match:
        raise ValueError("set html_baseurl or a GitHub repository url in _config.yml, got "
                         f"repository_url={repository!r}")
    return f"https://{match[1]}.github.io/{match[2]}/"


def published_url(app: Sphinx, docname: str) -> str:
    """Page ``docname`` on the published site, whichever builder asks: the HTML builder's file name, also for
    the single-page build that the PDF is printed from (its own target is a ``#document-<page>`` fragment)."""
    return f"{site_url(app.config)}{StandaloneHTMLBuilder.get_target_uri(app.builder, docname)}"


def _book_title(config) -> str:
    """The book's title: ``html_title`` (Jupyter Book's ``title``), else ``project``."""
    return config.html_title or config.project


def _book_year(config) -> str:
    """The year the book is dated, from ``copyright`` (e.g. ``"2026"``), else this year."""
    match = re.search(r"\d{4}", str(config.copyright or ""))
    return match[0] if match else str(_dt.date.today().year)


# The parameters a cite note names: the run's scale (every parameter is in the figure's JSON download)
CITED_PARAMETERS = ("model", "n_layers", "n_samples", "n_tokens", "dtype", "seed")


def parameter_text(parameters: dict) -> str:
    """``key=value`` pairs of a figure's parameters, sorted, values as compact JSON when not plain; a
    parameter without a value (None, or a list of None only) is left out.

    >>> parameter_text({"seed": 0, "temperatures": [None], "window": None})
    'seed=0'
    """
    def show(value) -> str:
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"),
                                                               ensure_ascii=False, default=str)

    def empty(value) -> bool:
        return value is None or (isinstance(value, list) and all(v is None for v in value))

    return ", ".join(f"{key}={show(value)}" for key, value in sorted(parameters.items()) if not empty(value))


# LaTeX for the characters a BibTeX field cannot hold as they are: TeX's specials and the non-ASCII ones the
# book's words use (pdflatex's default encodings know none of ±, √, μ).
_LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#",
          "$": r"\$", "^": r"\^{}", "~": r"\~{}", "±": r"$\pm$", "√": r"$\surd$", "×": r"$\times$",
          "·": r"$\cdot$", "μ": r"$\mu$", "ε": r"$\varepsilon$", "λ": r"$\lambda$", "σ": r"$\sigma$",
          "γ": r"$\gamma$", "β": r"$\beta$", "‖": r"$\|$", "≈": r"$\approx$", "≤": r"$\leq$",
          "≥": r"$\geq$", "→": r"$\to$", "₂": r"$_2$",
          "—": "---", "–": "--", "’": "'", "‘": "`", "“": "``", "”": "''", "\u00a0": "~"}


def bibtex_text(text: str) -> str:
    """``text`` as a BibTeX field's value that BibTeX and LaTeX compile: TeX's special characters escaped,
    the book's non-ASCII symbols as LaTeX, accented letters as their ASCII base letter.

    >>> print(bibtex_text('U(±1/√d), n_layers=12, {"a":1}'))
    U($\\pm$1/$\\surd$d), n\\_layers=12, \\{"a":1\\}
    """
    out = []
    for char in text:
        if char in _LATEX:
            out.append(_LATEX[char])
        elif ord(char) < 128:
            out.append(char)
        else:
            base = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
            if not base:
                raise ValueError(f"text holds {char!r} (U+{ord(char):04X}), which bibtex_text cannot write "
                                 f"as LaTeX: add it to sphinx_figures._LATEX")
            out.append(base)
    return "".join(out)


def _data_text(data: list[dict]) -> str:
    """The stored results a figure draws, in a cite note's words: each with the commit that computed it, or,
    for more than two, their number, folder and commits (each is listed in the figure's JSON download).

    >>> _data_text([{"result": f"results/zoo/{k}.csv.gz", "computed_at_commit": "abc"} for k in "xyz"])
    '3 stored results in results/zoo/ (listed in the JSON download) computed at commit abc'
    """
    if len(data) <= 2:
        return "; ".join(f"{d['result']} computed at commit {d['computed_at_commit'][:12]}" for d in data)
    folders = sorted({posixpath.dirname(d["result"]) + "/" for d in data})
    commits = sorted({d["computed_at_commit"][:12] for d in data})
    return (f"{len(data)} stored results in {', '.join(folders)} (listed in the JSON download) computed at "
            f"commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}")


def figure_citation(label: str, number: str, page_title: str, url: str, record: dict, config,
                    commit: str) -> dict:
    """BibTeX and plain-text citations of one figure, short: what (its number and page), which run (the
    commit that rendered it, the stored results it draws and the commit that computed them, the run's scale
    from CITED_PARAMETERS) and where (its URL, the book's version); every parameter is in the figure's JSON
    download. ``record`` is its JSON provenance sidecar."""
    made_at = record.get("git_commit", commit)
    data = _data_text(record.get("data", []))
    origin = f"rendered at commit {made_at}" + (f"; data: {data}" if data else "")
    what = f"Fig. {number}" if number else label
    scale = parameter_text({k: v for k, v in record.get("parameters", {}).items() if k in CITED_PARAMETERS})
    params = f"{scale + '; ' if scale else ''}all in the figure's JSON download"
    author = config.author
    title = f"{what}: {page_title}"
    bibtex = "\n".join([  # every field in LaTeX (bibtex_text) but the URL, which BibTeX styles print verbatim
        f"@misc{{rankcollapse-{label},",
        f"  title = {{{bibtex_text(title)}}},",
        f"  author = {{{{{bibtex_text(author)}}}}},",
        f"  howpublished = {{Figure in {bibtex_text(_book_title(config))}}},",
        f"  year = {{{_book_year(config)}}},",
        f"  version = {{{bibtex_text(__version__)}}},",
        f"  url = {{{url}}},",
        f"  note = {{{bibtex_text(f'Version {__version__}, {origin}. Parameters: {params}')}}}",
        "}",
    ])
    plain = (f"{author} ({_book_year(config)}). {title}. In {_book_title(config)}, version {__version__} "
             f"({origin}). {url}. Parameters: {params}.")
    return {"bibtex": bibtex, "plain": plain}


# -- collecting figures while reading ----------------------------------------------------------------------


def _figures(env: BuildEnvironment) -> dict[str, dict]:
    if not hasattr(env, "rankcollapse_figures"):
        env.rankcollapse_figures = {}
    return env.rankcollapse_figures


def _collect_figures(app: Sphinx, doctree: nodes.document) -> None:
    """Record every ``fig-*`` figure of the page just read, by label: its page."""
    docname = app.env.docname
    for figure in doctree.findall(nodes.figure):
        for label in figure["ids"]:
            if not label.startswith(_FIGURE_PREFIX):
                continue
            _figures(app.env)[label] = {"docname": docname}


def _purge_figures(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    for label in [label for label, info in _figures(env).items() if info["docname"] == docname]:
        del _figures(env)[label]


def _merge_figures(app: Sphinx, env: BuildEnvironment, docnames, other: BuildEnvironment) -> None:
    _figures(env).update({label: info for label, info in _figures(other).items()
                          if info["docname"] in docnames})


# -- writing: figures, gallery, page context ---------------------------------------------------------------


def _export_dir(app: Sphinx) -> Path:
    """Where :func:`rankcollapse.book.plotting.common.export_figure` wrote the figures of this book."""
    override = os.environ.get("RANKCOLLAPSE_FIGURE_DIR")
    return Path(override) if override else Path(app.srcdir) / "_build" / "figures"


def _published(app: Sphinx, label: str, location) -> dict | None:
    """Copy ``label``'s exported files into the site; their provenance record, or None (with a warning)."""
    source = _export_dir(app)
    missing = [f"{label}.{ext}" for ext in DOWNLOADS if not (source / f"{label}.{ext}").is_file()]
    if missing:
        _logger.warning(f"figure {label!r} has no exported {', '.join(missing)} in {source}: export it with "
                       f"a ShownFigure(stem={label!r}, ...) that report.present exports",
                       location=location, type="rankcollapse", subtype="figure")
        return None
    target = Path(app.outdir) / _SITE_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    for ext in DOWNLOADS:
        shutil.copyfile(source / f"{label}.{ext}", target / f"{label}.{ext}")
    return json.loads((source / f"{label}.json").read_text())


def _relative(docname: str, path: str) -> str:
    return posixpath.relpath(path, posixpath.dirname(docname) or ".")


def _figure_number(env: BuildEnvironment, docname: str, label: str) -> str:
    number = env.toc_fignumbers.get(docname, {}).get("figure", {}).get(label)
    return ".".join(map(str, number)) if number else ""


def _page_title(env: BuildEnvironment, docname: str) -> str:
    title = env.titles.get(docname)
    return title.astext() if title else docname


def _figure_footer_html(app: Sphinx, docname: str, label: str, record: dict) -> str:
    """The downloads and the collapsible citation block under a figure, as HTML for page ``docname``."""
    env = app.env
    links = " · ".join(
        f'<a class="reference download" href="{_relative(docname, f"{_SITE_FOLDER}/{label}.{ext}")}" '
        'download>'
        f"{_DOWNLOAD_WORDS.get(ext, ext.upper())}</a>" for ext in DOWNLOADS)
    page = _figures(env)[label]["docname"]
    url = f"{published_url(app, page)}#{label}"
    cite = figure_citation(label, _figure_number(env, page, label), _page_title(env, page), url, record,
                           app.config, env.rankcollapse_commit)
    return (f'<div class="figure-downloads" data-figure="{label}">Download: {links}</div>\n'
            f'<details class="figure-cite" data-figure="{label}"><summary>Cite this figure</summary>\n'
            f'<p class="figure-cite-plain">{html.escape(cite["plain"])}</p>\n'
            f'<pre class="figure-cite-bibtex">{html.escape(cite["bibtex"])}</pre>\n</details>\n')


def _decorate_figures(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Alt text, click-to-enlarge, downloads and citation for every ``fig-*`` figure of a page; fills the
    gallery."""
    if app.builder.format != "html":
        return
    for figure in list(doctree.findall(nodes.figure)):
        label = next((i for i in figure["ids"] if i.startswith(_FIGURE_PREFIX)), None)
        if label is None:
            continue
        record = _published(app, label, figure)
        image = figure.next_node(nodes.image)
        if image is not None:
            caption = figure.next_node(nodes.caption)  # resolved now: references show their titles
            image["alt"] = caption_text(caption) if caption else ""
            if record is not None and not isinstance(image.parent, nodes.reference):
                link = nodes.reference("", "", refuri=_relative(docname, f"{_SITE_FOLDER}/{label}.png"),
                                       classes=["figure-full-size"], internal=False)
                image.replace_self(link)
                link += image
        if record is not None:
            figure.parent.insert(figure.parent.index(figure) + 1,
                                 nodes.raw("", _figure_footer_html(app, docname, label, record),
                                           format="html"))
    for placeholder in list(doctree.findall(_gallery_placeholder)):
        placeholder.replace_self(nodes.raw("", _gallery_html(app, docname, doctree), format="html"))


def toc_order(env: BuildEnvironment, root: str) -> list[str]:
    """Every page in the order of the table of contents, from ``root`` (the gallery; the status page)."""
    order, stack = [], [root]
    while stack:
        docname = stack.pop(0)
        if docname in order:
            continue
        order.append(docname)
        stack[:0] = env.toctree_includes.get(docname, [])
    return order


def _gallery_html(app: Sphinx, docname: str, doctree: nodes.document) -> str:
    """Every figure of the book, in table of contents order, as thumbnails with caption, page, downloads
    and citation, for page ``docname`` (resolved as ``doctree``)."""
    env = app.env
    order = {name: i for i, name in enumerate(toc_order(env, app.config.root_doc))}
    def position(item) -> tuple:  # page in table of contents order, then figure number
        label, info = item
        number = env.toc_fignumbers.get(info["docname"], {}).get("figure", {}).get(label, ())
        return order.get(info["docname"], len(order)), tuple(number), label

    figures = sorted(_figures(env).items(), key=position)
    cards, resolved = [], {docname: doctree}
    for label, info in figures:
        record = _published(app, label, (docname, None))
        if record is None:
            continue
        if info["docname"] not in resolved:  # captions with their references resolved, as on their page
            resolved[info["docname"]] = app.env.get_and_resolve_doctree(info["docname"], app.builder)
        figure = next(f for f in resolved[info["docname"]].findall(nodes.figure) if label in f["ids"])
        caption = figure.next_node(nodes.caption)
        plain, with_math = ((caption_text(caption), caption_text(caption, math_html=True)) if caption
                            else ("", ""))
        page = _relative(docname, app.builder.get_target_uri(info["docname"]))
        number = _figure_number(env, info["docname"], label)
        cards.append(
            f'<div class="gallery-card">\n<figure class="gallery-figure" id="gallery-{label}">\n'
            f'<a href="{page}#{label}"><img src="{_relative(docname, f"{_SITE_FOLDER}/{label}.png")}" '
            f'alt="{html.escape(plain)}" loading="lazy"></a>\n'
            f'<figcaption><p><strong>{"Fig. " + number if number else label}</strong> '
            f'(<a href="{page}#{label}">{html.escape(_page_title(env, info["docname"]))}</a>): '
            f'{with_math}</p></figcaption>\n</figure>\n'
            + _figure_footer_html(app, docname, label, record) + "</div>\n")
    return f'<div class="figure-gallery">\n{"".join(cards)}</div>\n'


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Highwire Press ``citation_*`` meta tags and the figures' style on every page."""
    config = app.config
    title = re.sub(r"<[^>]+>", "", context.get("title", "")) or _book_title(config)
    tags = {"citation_title": title, "citation_inbook_title": _book_title(config),
            "citation_author": config.author, "citation_publication_date": _book_year(config),
            "citation_language": "en",
            "citation_public_url": published_url(app, pagename),
            "citation_technical_report_number":
                f"version {__version__}, commit {app.env.rankcollapse_commit}"}
    context["metatags"] = context.get("metatags", "") + "".join(
        f'\n<meta name="{name}" content="{html.escape(value, quote=True)}" />'
        for name, value in tags.items()) + _STYLE


def _gallery_math(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """The gallery's captions hold math copied as text: load MathJax there as on a page with equations."""
    if doctree is not None and any(True for _ in doctree.findall(
            lambda n: isinstance(n, nodes.raw) and 'class="figure-gallery"' in n.astext())):
        app.env.get_domain("math").data["has_equations"][pagename] = True


def _builder_inited(app: Sphinx) -> None:
    """The book's commit once per build, the version and commit in every page's footer."""
    app.env.rankcollapse_commit = git_commit(Path(app.srcdir))
    site_url(app.config)  # a wrong base URL fails at once, not on the first figure
    options = app.config.html_theme_options
    footer = (f'<p class="book-version">Version {__version__}, commit '
              f'<code>{html.escape(app.env.rankcollapse_commit)}</code></p>')
    options["extra_footer"] = (options.get("extra_footer") or "") + footer


def setup(app: Sphinx) -> dict:
    app.add_node(_gallery_placeholder)
    app.add_directive("figure-gallery", _FigureGallery)
    app.connect("builder-inited", _builder_inited)
    app.connect("doctree-read", _collect_figures)
    app.connect("env-purge-doc", _purge_figures)
    app.connect("env-merge-info", _merge_figures)
    app.connect("doctree-resolved", _decorate_figures)
    app.connect("html-page-context", _gallery_math, priority=400)
    app.connect("html-page-context", _page_context)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
