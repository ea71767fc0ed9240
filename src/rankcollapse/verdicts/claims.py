"""The machinery of the claims tables: for each claim the paper or the authors' response makes about a
figure, what we measure, our verdict and the number that decides it. The rows themselves are each page's
(``claims(...)`` of :mod:`rankcollapse.book.pages`); this module knows no page.

A claim is decided from per-configuration curve verdicts of μ/‖X‖_F
(:func:`rankcollapse.verdicts.rules.table_verdicts`: *collapses*, *stable*, *decays slowly*, *on the floor*,
with the late-layer rate) combined by :func:`rankcollapse.verdicts.rules.claim_verdict`
(:func:`select_curves`, then :func:`count_curves`), or from a direct comparison of numbers (stated in the
row). The verdict words are :data:`rankcollapse.verdicts.rules.CLAIM_VERDICTS` (holds / holds partly / does
not hold / cannot tell: on the rounding floor); the rules are those of :mod:`rankcollapse.verdicts.rules`,
documented on the setup page.

Used by: every page module that states claims (:mod:`rankcollapse.book.pages`), then
:mod:`rankcollapse.book.claims_table` (the tables a reader sees, glued by
:func:`rankcollapse.book.report.present`); tests/unit/test_claims.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from rankcollapse.core.stats import mean_decay_rate
from rankcollapse.verdicts import rules
from rankcollapse.verdicts.effects import Effect, outcome

HOLDS, PARTLY, FAILS, FLOOR = rules.CLAIM_VERDICTS
COLLAPSES, STABLE = rules.EXPECTATIONS


@dataclass(frozen=True)
class Cell:
    """One cell of a claims matrix: a claim read on one mask (or part, or configuration)."""

    column: str  # the mask, part or configuration
    outcome: str  # one of effects.OUTCOMES
    text: str  # compact: the effect and its interval, or the curve's deciding number
    words: str  # long: what decides it, for the details beneath the table


@dataclass(frozen=True)
class Claim:
    """One row of a claims table."""

    claim: str  # the claim, as the paper or the response states it
    source: str  # where it is stated ("Fig. 2 caption", "response W1", ...)
    measured: str  # what we measure to decide it
    verdict: str  # one of rules.CLAIM_VERDICTS
    number: str  # the deciding number(s), formatted
    cells: tuple[Cell, ...] = ()  # per mask or part; none: the row has only its ``number``
    # "robust" or "borderline — flips when ..." (:mod:`rankcollapse.verdicts.robustness`)
    robustness: str = ""
    # the setting the claim is decided in, as a reader knows it ("the theory's SAN: initialized, no biases",
    # "pretrained MPNet"); "" where the row's ``measured`` says it
    setting: str = ""
    # the run's scale in words ("512 samples × 5 weight seeds, 128 tokens, 12 layers"); "": the page's own
    scale: str = ""


def combine(cells: Iterable[Cell]) -> str:
    """The claim verdict of its cells: holds when every deciding cell (not "cannot tell") holds, holds partly
    when some do, does not hold when none does, cannot tell when no cell decides."""
    deciding = [c.outcome for c in cells if c.outcome not in ("cannot tell", "read")]
    if not deciding:
        return FLOOR
    held = deciding.count(HOLDS)
    return HOLDS if held == len(deciding) else PARTLY if held or PARTLY in deciding else FAILS


def effect_cell(column: str, effect: Effect, direction: int,
                thresholds: rules.Thresholds = rules.DEFAULTS) -> Cell:
    """The cell of an effect: its outcome for a claim expecting ``direction`` (:func:`effects.outcome`)."""
    result = outcome(effect, direction, thresholds)
    return Cell(column, result, effect.text, f"{result}: {effect.words}")


def effect_claim(claim: str, source: str, measured: str, cells: list[Cell]) -> Claim:
    """A claim decided on effect cells; its ``number`` lists them."""
    return Claim(claim, source, measured, combine(cells), "; ".join(f"{c.column}: {c.text}" for c in cells),
                 tuple(cells))


def select_curves(table: pd.DataFrame, thresholds: rules.Thresholds = rules.DEFAULTS,
                  **labels) -> pd.DataFrame:
    """Curve verdicts of μ/‖X‖_F for the configurations matching ``labels`` (column=value)."""
    curves = rules.table_verdicts(table, thresholds=thresholds)
    for column, wanted in labels.items():
        curves = curves[curves[column] == wanted]
    if curves.empty:
        raise ValueError(f"no configuration of this result matches {labels}")
    return curves


def rethreshold(curves: pd.DataFrame, thresholds: rules.Thresholds) -> pd.DataFrame:
    """Curve verdicts (:func:`select_curves`, or a table with their ``values`` and ``floor`` columns) decided
    again under ``thresholds``: ``curve, verdict, words, ratio, floor_layer``, the rate (``rate`` or
    ``late rate``) and ``mean rate`` where present."""
    out = curves.copy()
    out["curve"] = [rules.curve_verdict(v, f, thresholds) for v, f in zip(curves["values"], curves["floor"])]
    for column in ("verdict", "words", "ratio"):
        out[column] = [getattr(c, column) for c in out["curve"]]
    out["floor_layer"] = pd.array([c.floor_layer for c in out["curve"]], dtype="Int64")
    out["late rate" if "late rate" in out.columns else "rate"] = [c.rate for c in out["curve"]]
    if "mean rate" in out.columns:
        out["mean rate"] = out["curve"].map(mean_rate)
    return out


def count_curves(curves: pd.DataFrame, expected: str, what: str) -> tuple[str, str]:
    """The claim verdict for "every curve ``expected``" and the deciding numbers, per mask."""
    claim = rules.claim_verdict(expected, list(curves["curve"]))
    per_mask = "; ".join(f"{r.mask}: {r.words}" for r in curves.itertuples())
    return claim.verdict, f"{claim.n_agree} of {claim.n_deciding} {what} ({per_mask})"


def curve_claim(claim: str, source: str, measured: str, curves: pd.DataFrame, expected: str, what: str,
                column: str = "mask") -> Claim:
    """A claim that every curve of ``curves`` (:func:`select_curves`) shows ``expected``, one cell per
    ``column``."""
    verdict, number = count_curves(curves, expected, what)
    cells = tuple(Cell(str(getattr(r, column)), _curve_outcome(r.curve, expected), _curve_text(r.curve),
                       r.words)
                  for r in curves.itertuples())
    return Claim(claim, source, measured, verdict, number, cells)


def _curve_outcome(curve: rules.CurveVerdict, expected: str) -> str:
    if curve.verdict == "on the floor":
        return "cannot tell"
    return "holds" if curve.verdict == expected else "does not hold"


def _curve_text(curve: rules.CurveVerdict) -> str:
    """Compact words for a curve: ``"floor at 3"``, ``"rate 0.69"`` or ``"rate 0, ×0.31"``."""
    if curve.verdict == "on the floor":
        return "on the floor"
    if curve.floor_layer is not None:
        return f"floor at {curve.floor_layer}"
    rate = "n/a" if curve.rate is None else f"{curve.rate:.2g}" if abs(curve.rate) >= 5e-5 else "0"
    return f"rate {rate}" if curve.verdict == COLLAPSES else f"rate {rate}, ×{curve.ratio:.2g}"


def mean_rate(curve: rules.CurveVerdict) -> float:
    """Average decay per layer of a curve from the first layer to the last one read (its floor, if it hits
    it): ``-log(ratio) / layers``; comparable between curves that reach the floor and curves that do not."""
    last = curve.floor_layer if curve.floor_layer is not None else curve.n_layers
    return mean_decay_rate(curve.ratio, last - rules.EARLY_LAYER)
