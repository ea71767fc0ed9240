"""How every computed page is shown: its one call, :func:`present`, opens the page (its parameters and the
results it shows, :func:`start_page`, at the largest stored scale, :func:`largest_stored`), asks the page's
module what it shows (``show(results, parameters) -> Shown``, :mod:`rankcollapse.book.shown`), and glues every
value, Markdown text, claims table, table and figure (figures exported with their cite blocks), with the
banner when a larger stored run is shown (``<page>_banner``) and the re-run block (``<page>_rerun``).

This is the one module that glues; page modules return values and never glue or display.

Used by: every computed page (``report.present``), book/intro.md (``report.present_findings``),
:mod:`rankcollapse.book.cli` (the page a run shows).
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
from IPython.display import Markdown
from myst_nb import glue

from rankcollapse.book import registry
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.claims_table import claims_markdown, headline, page_anchors
from rankcollapse.book.pages import verdicts
from rankcollapse.book.pages._claims_records import record_claims
from rankcollapse.book.plotting.overlap import notes_block
from rankcollapse.book.runner import page_parameters
from rankcollapse.book.registry import largest_stored  # noqa: F401 (the command line's, origins')
from rankcollapse.book.shown import Shown, banner, seconds_words
from rankcollapse.experiments.provenance import book_root
from rankcollapse.experiments.store import StoredResult, compute_seconds, run_command
from rankcollapse.verdicts.claims import Claim



# ---------------------------------------------------------------- the one call of a page


def present(name: str, namespace: Mapping[str, object]) -> None:
    """Show page ``name``: the one call of its code cell, after its ``parameters`` cell.

    Opens the page (:func:`start_page`), calls its module's ``show(results, parameters)`` and glues what it
    returns (:func:`glue_shown`); then the page's banner (``<name>_banner``: Markdown, empty unless the page
    shows a larger stored run than its parameters', experiment pages only) and its re-run block
    (``<name>_rerun``: the command, what computing it cost, the paper profile's command), and what computing
    it cost alone (``<name>_compute_time``, :func:`compute_time`: the status page shows the same words).
    """
    parameters, results = start_page(name, namespace)
    shown = registry.show(name, results, parameters)
    glue_shown(shown, name)
    record_claims(name, parameters, shown.claims)
    if all(isinstance(r, StoredResult) for r in results.values()):
        _glue_markdown(f"{name}_banner", banner(name, parameters, results))
    _glue_markdown(f"{name}_rerun", rerun_result_block(name, parameters, results))
    glue(f"{name}_compute_time", compute_time(results) or "", display=False)  # the status page's column


def present_findings() -> None:
    """The one call of the book's first page (book/intro.md, not a registered page): glue the paper's headline
    findings (``verdicts_finding_<key>``: Markdown clauses, a verdict, its numbers and the link to its row,
    :func:`rankcollapse.book.pages.verdicts.findings`), from the claims of the pages they point at."""
    rows = verdicts.rows_of(registry.gather_claims(verdicts.headline_pages()))
    for key, text in verdicts.findings(rows, start="book/intro.md").items():
        _glue_markdown(f"verdicts_finding_{key}", text)


def glue_shown(shown: Shown, name: str) -> None:
    """Glue everything page ``name``'s ``show`` returned, not displayed: values as they are (words also as
    Markdown, :class:`Words`), Markdown, claims tables with their headlines (:func:`_glue_claims`), tables,
    and figures (exported with their cite blocks, their computed notes as a collapsed Markdown block under
    ``<key>_notes`` where asked, then closed)."""
    for key, value in shown.values.items():
        glue(key, Words(value) if isinstance(value, str) else value, display=False)
    for key, text in shown.markdown.items():
        _glue_markdown(key, text)
    for prefix, claims in shown.claims.items():
        _glue_claims(name, prefix, claims)
    for key, table in shown.tables.items():
        glue(key, table, display=False)
    for figure in shown.figures:
        if figure.notes:  # a collapsed block under the figure (paste it with {glue:md})
            _glue_markdown(f"{figure.key}_notes", notes_block(figure.figure))
        plotting.export_figure(figure.figure, figure.stem, figure.parameters, figure.data)
        glue(figure.key, figure.figure, display=False)
        plt.close(figure.figure)


# ---------------------------------------------------------------- the results a page shows


def start_page(name: str, namespace: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """What every computed page does first: the book's plot theme, its parameters and what it shows.

    The parameters are the current values of the names of page ``name``'s ``parameters`` cell (read from
    the page file), taken from the notebook's ``namespace`` after papermill injected a reader's values.
    What it shows, by part (:func:`rankcollapse.book.registry.shown_results`): an experiment page's results,
    computed (or loaded) for exactly these parameters, then, when its ``show_largest_stored`` is true, its
    parts at the largest scale stored (:func:`largest_stored`); for a page that computes in its own module,
    ``{"main": Computed(config, result, seconds)}`` (:class:`rankcollapse.book.registry.Computed`).
    """
    plotting.set_theme()
    names = page_parameters(registry.page(name).path(book_root()))
    parameters = {k: namespace[k] for k in names}
    return parameters, registry.shown_results(name, parameters)


class Words(str):
    """A glued value in words, pasted with ``{glue:text}`` (its text/plain) or, where it holds Markdown (a
    finding's bold verdict, its link to a claims row), with ``{glue:md}`` (its text/markdown)."""

    def _repr_markdown_(self) -> str:
        return str(self)


def _glue_markdown(key: str, text: str) -> None:
    """Glue ``text`` as Markdown under ``key`` (paste it with ``{glue:md}``), not displayed."""
    glue(key, Markdown(text), display=False)


def _glue_claims(name: str, prefix: str, claims: list[Claim]) -> None:
    """Glue page ``name``'s claims table ``prefix`` (``<prefix>_claims``: the table of
    :func:`rankcollapse.book.claims_table.claims_markdown` — per row the claim, its verdict and the evidence
    per mask or part, each row anchored ``claim-<page>-<prefix>-<n>`` — its legend and the collapsible
    details; Markdown holding HTML: paste it with ``{glue:md}`` and ``:format: gfm``) and its headline
    sentence (``<prefix>_headline``)."""
    _glue_markdown(f"{prefix}_claims", claims_markdown(claims, page_anchors(name, prefix, claims)))
    _glue_markdown(f"{prefix}_headline", headline(claims))


# ---------------------------------------------------------------- scale, banner, re-run


def _lists(value: object) -> object:
    """A config's tuples as the parameters cell's lists (nested too).

    >>> _lists(((0.5, 2.0), (0.0, 1.0)))
    [[0.5, 2.0], [0.0, 1.0]]
    """
    return [_lists(v) for v in value] if isinstance(value, (tuple, list)) else value


def _rerun_block(name: str, parameters: Mapping[str, object], took: str | None = None) -> str:
    """Markdown: the command that re-runs this page with these parameters, its expected time, the paper
    profile's command where the page has one.

    Only values that differ from the page's parameters cell appear in the command. ``took``: the measured
    computation time of the page in words (:func:`compute_time`, from stored results' provenance or this
    build), with the words that split it over the page's runs.
    """
    entry = registry.page(name)
    defaults = page_parameters(entry.path(book_root()))
    changed = {k: _lists(v) for k, v in parameters.items() if k in defaults and defaults[k] != _lists(v)}
    command = run_command(name, [(k, repr(v)) for k, v in changed.items()])
    lines = ["**Re-run this page**", "", "```bash", command, "```", ""]
    if took is not None:
        lines.append(f"Its computation took {took}; the executed notebook and its figures go to "
                     f"`runs/{name}-<time>/`.")
    if "paper" in entry.profiles:
        paper = run_command(name, options=("--profile paper", "--device cuda"))
        lines += ["", "At the paper's scale "
                      f"({', '.join(f'{k} = {v}' for k, v in entry.profiles['paper'].items())}), "
                      f"on a GPU: `{paper}` (the *Reproduce and cite* page lists every page's "
                      "paper-scale run)."]
    return "\n".join(lines)


def _cost(result: StoredResult | registry.Computed) -> tuple[float | None, str | None]:
    """What computing a part cost and where: a stored result's
    :func:`~rankcollapse.experiments.store.compute_seconds` and hardware, or this build's wall time."""
    if isinstance(result, registry.Computed):
        return result.seconds, None
    return compute_seconds(result.provenance), result.provenance.get("hardware")


def compute_time(results: Mapping[str, object]) -> str | None:
    """What computing ``results`` cost, in words: the cost of every part summed, on the hardware of the
    first part (this build's machine for a page that computes in its own module), e.g. ``"171 s on NVIDIA
    H200 (2.9 min)"``; None when a part's cost is unknown. The page's re-run block and the status page's
    column (glued as ``<page>_compute_time``) both show these words."""
    costs = [_cost(r) for r in results.values()]
    if not costs or any(seconds is None for seconds, _ in costs):
        return None
    seconds = sum(s for s, _ in costs)
    return (f"{seconds_words(seconds)} on {costs[0][1] or 'the build machine'}"
            f"{'' if seconds < 60 else f' ({seconds / 60:.1f} min)'}")


def rerun_result_block(name: str, parameters: Mapping[str, object], results: Mapping[str, object]) -> str:
    """The re-run block of a page (its command, what computing ``results`` cost, :func:`compute_time`, the
    paper profile's command), the cost split over its parts when it has several, so each part's time is
    the one its scale note states (:func:`scale_note`: the same :func:`compute_seconds`)."""
    took = compute_time(results)
    if took is None:
        return _rerun_block(name, parameters)
    costs = {part: _cost(r) for part, r in results.items()}
    seconds = [c[0] for c in costs.values()]
    each = {part: seconds_words(c[0]) for part, c in costs.items()}
    parts = ("" if len(costs) == 1 else
             f", in all, over its {len(costs)} runs ({', '.join(f'{p}: {t}' for p, t in each.items())})"
             if len(costs) <= 4
             else f", in all, over its {len(costs)} runs ({seconds_words(min(seconds))} to "
             f"{seconds_words(max(seconds))} each)")
    return _rerun_block(name, parameters, took + parts)
