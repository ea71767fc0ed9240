"""The claims tables as a reader sees them: every page's claims (:class:`rankcollapse.verdicts.claims.Claim`
rows) as one HTML table inside the Markdown a page pastes, its legend and the long words per row in a
collapsible block; a page's headline sentence; and the words of a claim as a reader reads them.

A table has three columns — the claim (with what decides it, its source, setting and scale), the verdict,
and the evidence per mask or part (one short line each: the outcome's symbol, the mask's display name and
its number) — so it reads at any width: a row's masks wrap as lines, never as columns squeezed letter by
letter, and on a phone every row is a card (``_static/booksite.css``). No word or number breaks inside: the
tokens a browser could break (hyphenated words, ``μ/‖X‖_F``, intervals) are kept whole. Code names become
the book's words (:func:`reader_text`: ``causal_sliding_window`` → "uni-directional window"), ``W_V`` and
``‖X‖_F`` are set with subscripts (:func:`reader_html`). The robustness over the thresholds' grid shows only
where a row is borderline: a mark under its verdict, the flip in the details. Each row carries a stable
anchor, ``claim-<page>-<prefix>-<n>`` (:func:`row_anchor`), which the verdicts page links to.

Claims are read generically: any verdict word (:data:`rankcollapse.verdicts.rules.CLAIM_VERDICTS` may
grow), any number of cells, columns or none.

Used by: :func:`rankcollapse.book.report.present` (``<prefix>_claims``, ``<prefix>_headline``), the reviewers'
page module (one row alone), :mod:`rankcollapse.book.pages.verdicts`; tests/unit/test_claims_table.py.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from rankcollapse.book.labels import MASK_LABELS, mask_label
from rankcollapse.core.stats import BOOTSTRAP_RESAMPLES, INTERVAL_LEVEL
from rankcollapse.verdicts import rules
from rankcollapse.verdicts.claims import HOLDS, Claim
from rankcollapse.verdicts.effects import NO_INTERVAL, OUTCOMES, SAME_SCALE
from rankcollapse.verdicts.robustness import ROBUST

# Code names a claim's words may carry, and what a reader reads instead: the masks' (those with an
# underscore: "complete" or "causal" are words already) and the metrics'.
CODE_WORDS = {**{name: words for name, words in MASK_LABELS.items() if "_" in name},
              "relative_mu": "μ/‖X‖_F", "relative_floor": "the floor of μ/‖X‖_F"}
_CODE_NAME = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, CODE_WORDS), key=len, reverse=True))
                        + r")(?![\w])")
# A math name: one letter (or ‖...‖) and a short subscript or superscript: W_V, g_V, ‖X‖_F, σ_min, d_QK, Z^T.
_SCRIPT = re.compile(r"(?<![\w])([A-Za-zα-ωΑ-Ω]|‖[A-Za-z]‖)([_^])([A-Za-z0-9]{1,3})(?![\w])")
# A token a browser may break inside (after a hyphen, a dash, a slash or a bar): kept whole.
_BREAKABLE = re.compile(r"\w[-/–‐‑|]|[-/–‐‑|]\w|‖")


def row_anchor(page: str, prefix: str, n: int) -> str:
    """The HTML anchor of row ``n`` (from 1) of a page's claims table ``prefix``.

    >>> row_anchor("appendix_g1", "g1", 2)
    'claim-appendix-g1-g1-2'
    """
    return f"claim-{page}-{prefix}-{n}".replace("_", "-")


def reader_text(text: str) -> str:
    """A claim's words as a reader reads them, in plain text: code names made the book's words, line breaks
    made spaces.

    >>> reader_text("rate of relative_mu under causal_sliding_window and sliding_window")
    'rate of μ/‖X‖_F under uni-directional window and sliding window'
    """
    return _CODE_NAME.sub(lambda m: CODE_WORDS[m.group(1)], " ".join(str(text).split()))


def column_words(column: str) -> str:
    """A cell's column (a mask, part or configuration) as a reader reads it.

    >>> column_words("causal_sliding_window"), column_words("as_trained")
    ('uni-directional window', 'as trained')
    """
    return reader_text(mask_label(column)).replace("_", " ")


def reader_html(text: str) -> str:
    """:func:`reader_text` as HTML: escaped, math names with their subscript or superscript, and every token a
    browser could break inside (``uni-directional``, ``μ/‖X‖_F``) kept whole.

    >>> reader_html("W_V and μ/‖X‖_F")
    'W<sub>V</sub> and <span class="nw">μ/‖X‖<sub>F</sub></span>'
    """
    words = []
    for token in reader_text(text).split(" "):
        marked = _SCRIPT.sub(lambda m: f"{m.group(1)}<{'sub' if m.group(2) == '_' else 'sup'}>"
                                       f"{m.group(3)}</{'sub' if m.group(2) == '_' else 'sup'}>",
                             html.escape(token, quote=False))
        words.append(f'<span class="nw">{marked}</span>' if _BREAKABLE.search(token) else marked)
    return " ".join(words)


def _whole(text: str) -> str:
    """HTML of a short phrase that never breaks (a cell's number, a mask's name)."""
    return f'<span class="nw">{reader_html(text)}</span>'


def _cell_number(text: str) -> str:
    """HTML of a cell's number: whole when short (``×0.5 [0.49, 0.51]/layer``); a longer one ("not resolved in
    128 layers (×0.99979, ≥ 0.9954) (pure: …)") wraps at its spaces, never inside an interval.

    >>> number = _cell_number("not resolved in 128 layers (×0.99979, ≥ 0.9954) [0.99, 1.01]")
    >>> number.startswith("not resolved in") and number.endswith("[0.99,\u00a01.01]")
    True
    """
    if len(text) <= SHORT_NUMBER:
        return _whole(text)
    return re.sub(r"\[[^\]<>]*\]", lambda m: m.group(0).replace(" ", "\u00a0"), reader_html(text))


SHORT_NUMBER = 32  # characters of a cell's number kept on one line (a phone's claims card holds about 40)


def is_borderline(claim: Claim) -> bool:
    """Whether a row's verdict changes somewhere on the thresholds' grid (its robustness is more than
    "robust")."""
    return claim.robustness not in ("", ROBUST)


def where(claim: Claim) -> str:
    """What decides a row, its source, and its setting and scale where it names them, in plain words:
    ``"initialized weights, pure attention · Fig. 2 caption"``."""
    parts = [claim.measured.split(":")[0], claim.source, claim.setting, claim.scale]
    return " · ".join(reader_text(p) for p in parts if p)


def evidence_html(claim: Claim) -> str:
    """A row's evidence: one line per cell (symbol, column, number), or its number when it has no cells."""
    if not claim.cells:
        return reader_html(claim.number)
    items = (f'<li><span class="nw">{OUTCOMES.get(c.outcome, "")} {reader_html(column_words(c.column))}:'
             f'</span> {_cell_number(c.text)}</li>' for c in claim.cells)
    return f'<ul class="claim-cells">{" ".join(items)}</ul>'


def verdict_html(claim: Claim) -> str:
    """A row's verdict, bold, with a mark under it when it is borderline (the flip in its title and the
    details)."""
    mark = (f' <br><span class="claim-borderline" title="{html.escape(reader_text(claim.robustness))}">'
            f'borderline</span>' if is_borderline(claim) else "")
    return f"<strong>{reader_html(claim.verdict)}</strong>{mark}"


def _cell(label: str, content: str) -> str:
    return f'<td data-label="{label}">{content}</td>'


def table_html(claims: Sequence[Claim], anchors: Sequence[str] | None = None,
               labels: Sequence[str] | None = None) -> str:
    """The claims as one HTML table (no blank line inside, so Markdown passes it through whole): per row the
    claim with what decides it, the verdict and the evidence; row ``i`` carries the id ``anchors[i]`` and
    starts with ``labels[i]`` (HTML; default its number)."""
    rows = []
    for i, claim in enumerate(claims, start=1):
        anchor = f' id="{anchors[i - 1]}"' if anchors else ""
        label = labels[i - 1] if labels else f"{i}."
        rows.append(f"<tr{anchor}>"
                    + _cell("claim", f'<span class="claim-n">{label}</span> {reader_html(claim.claim)}'
                                     f' <span class="claim-where">{reader_html(where(claim))}</span>')
                    + _cell("verdict", verdict_html(claim))
                    + _cell("per mask or part", evidence_html(claim)) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("claim", "verdict", "per mask or part"))
    return (f'<table class="table claims-table"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def details_html(claims: Sequence[Claim]) -> str:
    """The long words per row, collapsed: what each row measures, each cell's words, the flip of a
    borderline row, its setting and scale."""
    items = []
    for claim in claims:
        lines = [f"{reader_html(column_words(c.column))}: {reader_html(c.words)}" for c in claim.cells]
        if is_borderline(claim):
            lines.append(f"robustness: {reader_html(claim.robustness)}")
        sub = f"<ul>{''.join(f'<li>{line}</li>' for line in lines)}</ul>" if lines else ""
        items.append(f"<li><strong>{reader_html(claim.claim)}</strong> ({reader_html(claim.source)}) — "
                     f"{reader_html(claim.measured)}: {reader_html(claim.number)}{sub}</li>")
    return (f'<details class="claims-details"><summary>What each row measures, per mask or part</summary>'
            f'<ol>{"".join(items)}</ol></details>')


def legend(thresholds: rules.Thresholds = rules.DEFAULTS) -> str:
    """The symbols of the claims tables, in one Markdown paragraph."""
    meaning = {"holds": "holds", "holds partly": "holds partly",
               "does not hold": "does not hold (the opposite, or the curve does not show it)",
               "tiny": f"a tiny effect (within ×{thresholds.tiny_effect:g} of none)",
               "no effect": f"no effect shown (the {100 * INTERVAL_LEVEL:g} % interval includes 1)",
               "cannot tell": "cannot tell (on the rounding floor)",
               "read": "a number the row decides on as a whole"}
    return ("Symbols: " + " · ".join(f"{OUTCOMES[k]} {v}" for k, v in meaning.items())
            + f". ×r [lo, hi]: an effect (a ratio against the baseline, 1 = no effect) and its "
            f"{100 * INTERVAL_LEVEL:g} % paired bootstrap interval over samples (B = {BOOTSTRAP_RESAMPLES}); "
            f"a ×r without [lo, hi] reads the median curves only — {NO_INTERVAL}. "
            f"\"Same scale\": within ×{SAME_SCALE:g}. A verdict marked *borderline* changes at some point "
            f"of the thresholds' grid (setup page; the details say where); every other verdict holds over "
            f"the whole grid.")


def claims_markdown(claims: Sequence[Claim], anchors: Sequence[str] | None = None) -> str:
    """What a page pastes as its claims table (``{glue:md}``, ``:format: gfm``): the table
    (:func:`table_html`, rows anchored by ``anchors``), the legend, the collapsible details."""
    if anchors is not None and len(anchors) != len(claims):
        raise ValueError(f"anchors must name every row: {len(anchors)} anchors for {len(claims)} rows")
    return f"{table_html(claims, anchors)}\n\n{legend()}\n\n{details_html(claims)}"


def page_anchors(page: str, prefix: str, claims: Sequence[Claim]) -> list[str]:
    """The anchors of a page's claims table ``prefix``, one per row."""
    return [row_anchor(page, prefix, n) for n in range(1, len(claims) + 1)]


def headline(claims: Sequence[Claim]) -> str:
    """One Markdown sentence for a page's first paragraph: which claims do not hold (or only partly) on this
    run, their words as in the table (:func:`reader_html`)."""
    failing = [c for c in claims if c.verdict != HOLDS]
    if not failing:
        return "On this run every claim below holds."
    words = "; ".join(f"*{reader_html(c.claim.strip('. '))}* ({reader_html(c.measured.split(':')[0])}) — "
                      f"**{reader_html(c.verdict)}**" for c in failing)
    return f"On this run not every claim holds: {words}."
