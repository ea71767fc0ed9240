"""The machinery of the claims tables: for each claim the paper or the authors' response makes about a
figure, what we measure, our verdict and the number that decides it. The rows themselves are each page's
(``claims(...)`` of :mod:`rankcollapse.book.pages`); this module knows no page.

A claim is decided from its curves' verdicts of μ/‖X‖_F (:func:`rankcollapse.verdicts.rules.curve_verdict`:
*collapses* with its per-layer factor and interval, *reaches the floor*, *not resolved*, *on the floor*), read
from :class:`rankcollapse.verdicts.effects.Side` curves (:func:`side_verdict`): :func:`collapse_claim` ("every
curve collapses", each measured factor beside the theory's prediction where one is given),
:func:`bounded_claim` ("LayerNorm stops the collapse": decided against the collapse it would stop), or from
effects against a baseline (:func:`effect_claim`), or from a direct comparison of numbers (stated in the row).
The verdict words are :data:`rankcollapse.verdicts.rules.CLAIM_VERDICTS` (holds / holds partly / does not
hold / cannot tell); the rules are those of :mod:`rankcollapse.verdicts.rules`, documented on the setup page.

Used by: every page module that states claims (:mod:`rankcollapse.book.pages`), then
:mod:`rankcollapse.book.claims_table` (the tables a reader sees, glued by
:func:`rankcollapse.book.report.present`); tests/unit/test_claims.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from rankcollapse.core.stats import late_rates, mean_decay_rate
from rankcollapse.verdicts import rules
from rankcollapse.verdicts.effects import Effect, Side, outcome

HOLDS, PARTLY, FAILS, OPEN = rules.CLAIM_VERDICTS
COLLAPSES, BOUNDED = rules.EXPECTATIONS


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
    """The claim verdict of its cells (:func:`rankcollapse.verdicts.rules.combine` of their outcomes; an
    effect's "tiny" or "no effect" counts as not holding, a number "read" decides nothing)."""
    return rules.combine([c.outcome if c.outcome in rules.CLAIM_VERDICTS else
                          OPEN if c.outcome in ("cannot tell", "read") else FAILS for c in cells])


def effect_cell(column: str, effect: Effect, direction: int,
                thresholds: rules.Thresholds = rules.DEFAULTS) -> Cell:
    """The cell of an effect: its outcome for a claim expecting ``direction`` (:func:`effects.outcome`)."""
    result = outcome(effect, direction, thresholds)
    return Cell(column, result, effect.text, f"{result}: {effect.words}")


def effect_claim(claim: str, source: str, measured: str, cells: list[Cell]) -> Claim:
    """A claim decided on effect cells; its ``number`` lists them."""
    return Claim(claim, source, measured, combine(cells), "; ".join(f"{c.column}: {c.text}" for c in cells),
                 tuple(cells))


def side_verdict(curve: Side, thresholds: rules.Thresholds = rules.DEFAULTS,
                 window: tuple[int, int] | None = None) -> rules.CurveVerdict:
    """The curve verdict of a side (its median curve, floor and bootstrap draws) under ``thresholds``."""
    return rules.curve_verdict(curve.values, curve.floor, thresholds, curve.draws, window)


def predicted_factor(curve: np.ndarray | None, verdict: rules.CurveVerdict) -> float | None:
    """The theory's per-layer factor over the layers the measured curve was fitted on: the same fit of
    ``-log`` on the predicted curve (the linear case's μ/‖X‖_F,
    :func:`rankcollapse.theory.dynamics.linear_curve`); 0 where the prediction fell to exactly 0 there; None
    without a prediction or a fit.

    Shapes: curve [layer + 1] or None.
    """
    if curve is None or verdict.fit is None:
        return None
    window = np.asarray(curve, dtype=np.float64)[verdict.fit[0]:verdict.fit[1] + 1]
    if not (window > 0).all():
        return 0.0
    return float(np.exp(-late_rates(np.asarray(curve, dtype=np.float64)[None],
                                    np.arange(verdict.fit[0], verdict.fit[1] + 1))[0]))


def _versus(predicted: float | None) -> str:
    return "" if predicted is None else f"; the linear case predicts ×{rules.factor_text(predicted)}"


def collapse_claim(claim: str, source: str, measured: str, sides: dict[str, Side],
                   thresholds: rules.Thresholds = rules.DEFAULTS,
                   predicted: dict[str, np.ndarray] | None = None, window: tuple[int, int] | None = None,
                   setting: str = "") -> Claim:
    """"Every curve collapses", one cell per ``sides`` key (a mask, part or configuration): holds where the
    curve collapses; does not hold where its factor's interval lies above 1 or excludes the factor the theory
    ``predicted`` over the same layers (:func:`predicted_factor`: its collapse would have been resolved);
    cannot tell where it lies on the floor or no collapse is resolved at this depth
    (:func:`rankcollapse.verdicts.rules.collapse_outcome`).

    Shapes: ``predicted`` per key a curve [layer + 1] (the linear case's μ/‖X‖_F)."""
    predicted = predicted or {}
    cells = []
    for column, curve in sides.items():
        verdict = side_verdict(curve, thresholds, window)
        p = predicted_factor(predicted.get(column), verdict)
        cells.append(Cell(column, rules.collapse_outcome(verdict, p), verdict.text,
                          verdict.words + _versus(p) + _over(curve)))
    return Claim(claim, source, measured, combine(cells), _counted(cells, "collapse"), tuple(cells),
                 setting=setting)


def bounded_claim(claim: str, source: str, measured: str, pairs: dict[str, tuple[Side, Side]],
                  thresholds: rules.Thresholds = rules.DEFAULTS, setting: str = "") -> Claim:
    """"The configuration stops the collapse" (LayerNorm, skip connections), per ``pairs`` key: (the
    configuration's curve, the baseline's — pure attention on the same weights). Holds where the baseline
    collapses and the configuration shows no resolved collapse; does not hold where the configuration
    collapses too; cannot tell where the configuration lies on the floor, or where the baseline does not
    collapse at this depth either (nothing to stop yet: "stable" is never read from a short stack)."""
    cells = []
    for column, (config, baseline) in pairs.items():
        mine, theirs = side_verdict(config, thresholds), side_verdict(baseline, thresholds)
        if mine.collapses:
            result = FAILS
        elif mine.verdict == rules.ON_FLOOR or not theirs.collapses:
            result = OPEN
        else:
            result = HOLDS
        words = (f"{config.label}: {mine.words}; {baseline.label}: {theirs.words}" + _over(config))
        cells.append(Cell(column, result, f"{mine.text} (pure: {theirs.text})", words))
    return Claim(claim, source, measured, combine(cells), _counted(cells, "stop the collapse"), tuple(cells),
                 setting=setting)


def _over(curve: Side) -> str:
    return f" (interval over {curve.resampled})" if curve.resampled else ""


def _counted(cells: list[Cell], what: str) -> str:
    """``"3 of 4 collapse"``, or with cells that cannot tell ``"3 of the 3 decided collapse; 1 cannot tell:
    causal"`` (``"none decided; 4 cannot tell: ..."``): the cells that hold, of those that decide, and the
    others by name."""
    deciding = [c for c in cells if c.outcome != OPEN]
    held = sum(c.outcome == HOLDS for c in deciding)
    open_ = [c.column for c in cells if c.outcome == OPEN]
    if not open_:
        return f"{held} of {len(deciding)} {what}"
    named = f"{len(open_)} cannot tell: {', '.join(open_)}"
    return f"{held} of the {len(deciding)} decided {what}; {named}" if deciding else f"none decided; {named}"


def mean_rate(curve: rules.CurveVerdict) -> float:
    """Average decay per layer of a curve from the first layer to the last one read (its floor, if it hits
    it): ``-log(ratio) / layers``; comparable between curves that reach the floor and curves that do not
    (an ordering, never an effect: near the floor it is bounded by the floor, not measured)."""
    last = curve.floor_layer if curve.floor_layer is not None else curve.n_layers
    return mean_decay_rate(curve.ratio, last - rules.EARLY_LAYER)
