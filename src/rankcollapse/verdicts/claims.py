"""The machinery of the claims tables: for each claim the paper or the authors' response makes about a
figure, what we measure, our verdict and the number that decides it. The rows themselves are each page's
(``claims(...)`` of :mod:`rankcollapse.book.pages`); this module knows no page.

A claim is decided from per-configuration curve verdicts of μ/‖X‖_F (:func:`rankcollapse.verdicts.rules.table_verdicts`:
*collapses*, *stable*, *decays slowly*, *on the floor*, with the late-layer rate) combined by
:func:`rankcollapse.verdicts.rules.claim_verdict` (:func:`select_curves`, then :func:`count_curves`), or from a
direct comparison of numbers (stated in the row). The verdict words are
:data:`rankcollapse.verdicts.rules.CLAIM_VERDICTS` (holds / holds partly / does not hold / cannot tell: on
the rounding floor); the rules are those of :mod:`rankcollapse.verdicts.rules`, documented on the setup page.

Used by: every experiment, response and decoder page's module (:mod:`rankcollapse.book.pages`), then
:func:`markdown_table` and :func:`headline` (:func:`rankcollapse.book.report.glue_claims`);
tests/unit/test_claims.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rankcollapse.core.stats import mean_decay_rate
from rankcollapse.verdicts import rules as verdicts

HOLDS, PARTLY, FAILS, FLOOR = verdicts.CLAIM_VERDICTS
COLLAPSES, STABLE = verdicts.EXPECTATIONS


@dataclass(frozen=True)
class Claim:
    """One row of a claims table."""

    claim: str  # the claim, as the paper or the response states it
    source: str  # where it is stated ("Fig. 2 caption", "response W1", ...)
    measured: str  # what we measure to decide it
    verdict: str  # one of verdicts.CLAIM_VERDICTS
    number: str  # the deciding number(s), formatted


def select_curves(table: pd.DataFrame, **labels) -> pd.DataFrame:
    """Curve verdicts of μ/‖X‖_F for the configurations matching ``labels`` (column=value)."""
    curves = verdicts.table_verdicts(table)
    for column, wanted in labels.items():
        curves = curves[curves[column] == wanted]
    if curves.empty:
        raise ValueError(f"no configuration of this result matches {labels}")
    return curves


def count_curves(curves: pd.DataFrame, expected: str, what: str) -> tuple[str, str]:
    """The claim verdict for "every curve ``expected``" and the deciding numbers, per mask."""
    claim = verdicts.claim_verdict(expected, list(curves["curve"]))
    per_mask = "; ".join(f"{r.mask}: {r.words}" for r in curves.itertuples())
    return claim.verdict, f"{claim.n_agree} of {claim.n_deciding} {what} ({per_mask})"


def mean_rate(curve: verdicts.CurveVerdict) -> float:
    """Average decay per layer of a curve from the first layer to the last one read (its floor, if it hits
    it): ``-log(ratio) / layers``; comparable between curves that reach the floor and curves that do not."""
    last = curve.floor_layer if curve.floor_layer is not None else curve.n_layers
    return mean_decay_rate(curve.ratio, last - verdicts.EARLY_LAYER)


def markdown_table(claims: list[Claim]) -> str:
    """The claims as a Markdown table (claim, source, what we measure, verdict in bold, the number)."""
    lines = ["| claim | source | what we measure | verdict | number |", "|---|---|---|---|---|"]
    lines += [f"| {c.claim} | {c.source} | {c.measured} | **{c.verdict}** | {c.number} |" for c in claims]
    return "\n".join(lines)


def headline(claims: list[Claim]) -> str:
    """One sentence for a page's first paragraph: which claims do not hold (or only partly) on this run."""
    failing = [c for c in claims if c.verdict != HOLDS]
    if not failing:
        return "On this run every claim below holds."
    words = "; ".join(f"*{c.claim.strip('. ')}* ({c.measured.split(':')[0]}) — **{c.verdict}**" for c in failing)
    return f"On this run not every claim holds: {words}."
