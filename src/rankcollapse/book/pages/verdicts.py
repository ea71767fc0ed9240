"""The verdicts page (book/verdicts.md): every claims row of every page, one place, grouped by whose claim it
is, each linking to its row on its page; and the paper's headline claims with their verdicts, for the book's
first screen (book/intro.md).

:func:`compute` takes each page's claims at its parameters cell's defaults, as the page shows them, from the
registry (:func:`rankcollapse.book.registry.gather_claims`, passed in: the registry imports this module):
the claims without the figures, or read from the record the page's build left
(:mod:`rankcollapse.book.pages._claims_records`) when ``reuse_recorded`` and the record matches.
:func:`show` lays them out: per group (:data:`GROUPS`) a summary (one line per claim: its verdicts linked to
their rows, what each is decided on, the page) and the details (every field of the row, through
:func:`rankcollapse.book.claims_table.table_html`), and the counts of each verdict. :func:`findings` words
the headline claims (:data:`HEADLINES`) for the intro. Claims are read generically: any verdict word, any
source.

Used by: book/verdicts.md (through the page registry, :mod:`rankcollapse.book.registry`), book/intro.md
(:func:`rankcollapse.book.report.present_findings`); tests/unit/test_verdicts_page.py.
"""

from __future__ import annotations

import html
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from rankcollapse.book.claims_table import (column_words, reader_html, reader_text, row_anchor, table_html,
                                            verdict_html)
from rankcollapse.book.pages._common import own_config
from rankcollapse.book.shown import Shown, prefixed, seconds_words
from rankcollapse.verdicts.claims import Claim
from rankcollapse.verdicts.effects import OUTCOMES
from rankcollapse.verdicts.rules import CLAIM_VERDICTS

PAGE = "verdicts"
SOURCE = "book/verdicts.md"  # where the links start from (the intro, book/intro.md, sits beside it)

# Whose claim a row is: the first group whose test passes on (the row's page file, the row), in this order;
# the page shows them in the order of GROUP_ORDER.
GROUPS: tuple[tuple[str, Callable[[str, Claim], bool]], ...] = (
    ("controls", lambda source, claim: "this book" in claim.source.lower()),
    ("beyond", lambda source, claim: source.startswith("book/beyond/")),
    ("response", lambda source, claim: "response" in claim.source.lower()),
    ("paper", lambda source, claim: True),
)
GROUP_ORDER = ("paper", "response", "beyond", "controls")

# The paper's headline claims the book opens with: (key, page, claims table prefix, row from 1). Re-point a
# headline at another row by editing its page, prefix and row; its words on the intro are the paper's, in
# book/intro.md (the verdict clause glued as ``verdicts_finding_<key>``).
HEADLINES = (  # each decided where the theory makes it: the bias-free SAN at depth
    ("collapse", "theory_san", "theory_san", 1),  # pure attention collapses under every mask
    ("radius", "theory_san", "theory_san", 4),  # local masks slow it, by their radius (within a family)
    ("layernorm", "theory_san", "theory_san", 7),  # LayerNorm prevents it (the paper's D)
)


@dataclass(frozen=True)
class VerdictsConfig:
    """The parameters of ``book/verdicts.md``."""

    # read the claims recorded when this build showed each page (when they match its defaults, code and
    # stored results); False: compute every page's claims again
    reuse_recorded: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.reuse_recorded, bool):
            raise ValueError(f"reuse_recorded must be True or False, got {self.reuse_recorded!r}")


configure = own_config(VerdictsConfig)


@dataclass(frozen=True)
class PageClaims:
    """One page's claims tables at its parameters cell's defaults, as the page shows them, and how they were
    had (:func:`rankcollapse.book.registry.gather_claims`)."""

    name: str  # the page
    source: str  # its file, from the book root ("book/experiments/fig2.md")
    title: str  # its title in the registry
    claims: dict[str, list[Claim]]  # prefix -> rows
    recorded: bool  # read from the record its build left
    seconds: float  # to have them


# (pages or None for every page that states claims, reuse_recorded) -> each page's claims
Gather = Callable[[Sequence[str] | None, bool], list[PageClaims]]


@dataclass(frozen=True)
class Row:
    """One claims row where a page shows it: page ``page``'s claims table ``prefix``, row ``n`` (from 1)."""

    page: PageClaims
    prefix: str
    n: int
    claim: Claim
    group: str  # one of GROUP_ORDER

    @property
    def anchor(self) -> str:
        """The row's anchor on its page."""
        return row_anchor(self.page.name, self.prefix, self.n)


@dataclass(frozen=True)
class VerdictsResult:
    """Every claims row of the book, in book order, and how each page's claims were had."""

    pages: list[PageClaims]
    rows: list[Row]


def group(source: str, claim: Claim) -> str:
    """Whose claim a row is (:data:`GROUPS`), from its page's file and its source."""
    return next(name for name, test in GROUPS if test(source, claim))


def rows_of(pages: Iterable[PageClaims]) -> list[Row]:
    """Pages' claims tables as rows, in order."""
    return [Row(page, prefix, n, claim, group(page.source, claim))
            for page in pages for prefix, table in page.claims.items()
            for n, claim in enumerate(table, start=1)]


def compute(config: VerdictsConfig, gather: Gather) -> VerdictsResult:
    """Every page's claims rows, had through ``gather`` (the registry's)."""
    pages = gather(None, config.reuse_recorded)
    return VerdictsResult(pages, rows_of(pages))


# ---------------------------------------------------------------- what the page shows


def href(row: Row, start: str = SOURCE) -> str:
    """The link from page file ``start`` to ``row`` on its page."""
    target = posixpath.splitext(row.page.source)[0] + ".html"
    return f"{posixpath.relpath(target, posixpath.dirname(start))}#{row.anchor}"


def row_link(row: Row, start: str = SOURCE) -> str:
    """HTML: a link to ``row`` on its page, named by the page's title and the row's number there."""
    return f'<a href="{html.escape(href(row, start))}">{reader_html(row.page.title)}, row {row.n}</a>'


def setting_words(claim: Claim) -> str:
    """What a row is decided on, in a few words: its setting, else what its measurement names first."""
    return claim.setting or claim.measured.split(":")[0]


def short_titles(titles: Iterable[str]) -> dict[str, str]:
    """A short name per page title for the summaries: the title before its colon, or after it where several
    titles share that prefix.

    >>> short_titles(["Fig. 2: masks and LayerNorm", "Response: skip connections", "Response: 32 samples",
    ...               "Equilibria of every rank"])["Fig. 2: masks and LayerNorm"]
    'Fig. 2'
    >>> short_titles(["Response: skip connections", "Response: 32 samples"])["Response: skip connections"]
    'skip connections'
    """
    titles = list(dict.fromkeys(titles))
    heads = [t.split(":")[0] for t in titles]
    return {title: head if heads.count(head) == 1 else title.split(":", 1)[1].strip()
            for title, head in zip(titles, heads)}


def verdict_mark(verdict: str) -> tuple[str, str]:
    """A verdict's mark in the overview and its CSS class: the claims tables' symbol of its words (before any
    colon) and ``mark-<those words>``, or • and ``mark-other`` for a verdict that has no symbol.

    >>> verdict_mark("holds partly"), verdict_mark("cannot tell: on the rounding floor"), verdict_mark("new")
    (('◐', 'mark-holds-partly'), ('?', 'mark-cannot-tell'), ('•', 'mark-other'))
    """
    words = verdict.split(":")[0]
    return (OUTCOMES[words], "mark-" + words.replace(" ", "-")) if words in OUTCOMES else ("•", "mark-other")


def glance_html(rows: Sequence[Row]) -> str:
    """The overview: one line per page, a mark per claims row in its order, each linking to its row (its
    claim and verdict in the link's title)."""
    short = short_titles(r.page.title for r in rows)
    by_page: dict[str, list[Row]] = {}
    for row in rows:
        by_page.setdefault(row.page.title, []).append(row)
    body = "".join(
        f'<tr><td data-label="page">{reader_html(short[title])}</td><td data-label="rows">'
        + " ".join(f'<a class="claim-mark {verdict_mark(r.claim.verdict)[1]}" href="{html.escape(href(r))}" '
                   f'title="{html.escape(reader_text(r.claim.claim))}: {html.escape(r.claim.verdict)}">'
                   f"{verdict_mark(r.claim.verdict)[0]}</a>" for r in page_rows)
        + "</td></tr>" for title, page_rows in by_page.items())
    return (f'<table class="table claims-table claims-glance"><thead><tr><th>page</th><th>its claims, row by '
            f"row</th></tr></thead><tbody>{body}</tbody></table>")


def summary_html(rows: Sequence[Row]) -> str:
    """The compact table of a group: one line per claim of a page (its rows with the same words merged), each
    row's verdict linked to the row on its page (with the borderline mark) beside its page's short name
    (:func:`short_titles`) and what it is decided on."""
    short = short_titles(r.page.title for r in rows)
    merged: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        merged.setdefault((row.page.name, row.claim.claim), []).append(row)
    body = "".join(
        f'<tr><td data-label="claim">{reader_html(same[0].claim.claim)}</td><td data-label="verdict">'
        + "".join(f'<div class="claim-chip"><a href="{html.escape(href(r))}">{verdict_html(r.claim)}</a> '
                  f'<span class="claim-setting">{reader_html(short[r.page.title])}: '
                  f"{reader_html(setting_words(r.claim))}</span></div>" for r in same)
        + "</td></tr>" for same in merged.values())
    head = "".join(f"<th>{h}</th>" for h in ("claim", "verdict, page and what it is decided on"))
    return (f'<table class="table claims-table claims-summary"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def details_html(rows: Sequence[Row]) -> str:
    """Every field of a group's rows: the claim with what decides it, its source, setting and scale; the
    verdict (borderline rows marked, the flip in the mark's title); the evidence per mask or part; each
    labelled by a link to the row on its page."""
    return table_html([r.claim for r in rows], labels=[row_link(r) for r in rows])


def counts_words(claims: Sequence[Claim]) -> str:
    """How many rows have each verdict, the verdict words in the rules' order, then any others.

    >>> counts_words([Claim("c", "s", "m", "holds", "1"), Claim("d", "s", "m", "stable for now", "2")])
    '2 rows — holds: 1 · stable for now: 1'
    """
    found = [c.verdict for c in claims]
    order = [*CLAIM_VERDICTS, *sorted(set(found) - set(CLAIM_VERDICTS))]
    parts = [f"{v}: {found.count(v)}" for v in order if v in found]
    return f"{len(found)} row{'' if len(found) == 1 else 's'} — " + " · ".join(parts)


def evidence_words(claim: Claim) -> str:
    """The deciding numbers of a row in one line: each cell's column and number, else the row's number."""
    return "; ".join(f"{column_words(c.column)}: {c.text}" for c in claim.cells) or claim.number


def finding_markdown(row: Row, start: str = SOURCE) -> str:
    """A headline's verdict clause (Markdown): the verdict in bold, the row's deciding number in one line (the
    count of cells that hold, or each cell's number where the row has no number of its own), the link to the
    row."""
    evidence = row.claim.number or evidence_words(row.claim)
    return (f"**{reader_html(row.claim.verdict)}** — {reader_html(evidence)} "
            f"({row_link(row, start)}).")


def findings(rows: Sequence[Row], start: str = SOURCE) -> dict[str, str]:
    """The headline findings (:data:`HEADLINES`) as glued Markdown clauses by key, from ``rows``; one
    ValueError when a headline points at a row no page shows."""
    by_place = {(r.page.name, r.prefix, r.n): r for r in rows}
    found = {}
    for key, *place in HEADLINES:
        if tuple(place) not in by_place:
            raise ValueError(f"HEADLINES {key!r} points at {tuple(place)}, a row no page shows; rows are "
                             f"(page, prefix, n) of the claims tables")
        found[key] = finding_markdown(by_place[tuple(place)], start)
    return found


def headline_pages() -> list[str]:
    """The pages the headlines point at."""
    return list(dict.fromkeys(page for _, page, _, _ in HEADLINES))


def rows_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """Every row as a data table (the page's notebook shows it; the page itself shows the HTML tables): one
    row per claim with its page, table, number, group, words, verdict, setting and link."""
    return pd.DataFrame([{"page": r.page.name, "table": r.prefix, "row": r.n, "whose claim": r.group,
                          "claim": reader_text(r.claim.claim), "verdict": r.claim.verdict,
                          "decided on": reader_text(setting_words(r.claim)), "link": href(r)} for r in rows])


def gathered_words(pages: Sequence[PageClaims]) -> str:
    """How the pages' claims were had: how many read from records, in what time, which computed again."""
    computed = [p for p in pages if not p.recorded]
    again = ", ".join(f"{p.title} ({seconds_words(p.seconds)})" for p in computed) or "none"
    return (f"{len(pages) - len(computed)} of {len(pages)} pages' claims read from this build's records, "
            f"{seconds_words(sum(p.seconds for p in pages))} in all; computed again: {again}")


def show(results: dict, parameters: dict) -> Shown:
    """The page's counts and timing (``verdicts_*``), the overview of every row (``verdicts_glance``), per
    group its summary (``verdicts_summary_<group>``) and details (``verdicts_details_<group>``), and every row
    as a data table (``verdicts_table``: glued for the page's notebook, :func:`rows_frame`)."""
    _, result, _ = results["main"]
    markdown = {}
    values: dict[str, object] = {"n_rows": len(result.rows),
                                 "n_pages": len({r.page.name for r in result.rows})}
    for name in GROUP_ORDER:
        rows = [r for r in result.rows if r.group == name]
        markdown[f"verdicts_summary_{name}"] = summary_html(rows) if rows else "No rows."
        markdown[f"verdicts_details_{name}"] = details_html(rows) if rows else "No rows."
        values[f"counts_{name}"] = counts_words([r.claim for r in rows])
    markdown["verdicts_glance"] = glance_html(result.rows)
    values["gathered"] = gathered_words(result.pages)
    return Shown(values=prefixed("verdicts", values), markdown=markdown,
                 tables={"verdicts_table": rows_frame(result.rows).style.hide(axis="index")})
