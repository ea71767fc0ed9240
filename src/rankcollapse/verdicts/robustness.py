"""Robustness of a verdict: is it the same over a grid of the rules' thresholds?

A claim is built by a function of the thresholds (``make(thresholds) -> Claim``); :func:`robust` builds it
with the published ones (:data:`rankcollapse.verdicts.rules.DEFAULTS`), rebuilds it at every point of
:data:`THRESHOLD_GRID` — one threshold moved at a time, the others at their defaults — and writes in its
``robustness`` either "robust" or "borderline — flips when <threshold> = <value> (→ <verdict>)", computed.

The grid: the collapse rate ÷2 and ×2 (read only where a result has no per-sample values), the late
fraction 1/3 and 2/3, the floor band 3 and 30, the fewest fit layers 2 and 5, and two more thresholds that
claims use: the majority share 1/3 and 2/3 (a share-of-samples claim's "holds partly" cut) and the tiny-effect
factor 1.025 and 1.1.

Used by: the claims of the experiment and response pages (:mod:`rankcollapse.book.pages`), the setup page
(:func:`grid_words`); tests/unit/test_effects.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rankcollapse.verdicts import rules
from rankcollapse.verdicts.rules import DEFAULTS, Thresholds

THRESHOLD_GRID = (
    ("collapse_rate", (rules.COLLAPSE_RATE / 2, rules.COLLAPSE_RATE * 2)),
    ("late_fraction", (1 / 3, 2 / 3)),
    ("floor_band", (3.0, 30.0)),
    ("min_fit_layers", (2, 5)),
    ("majority", (1 / 3, 2 / 3)),
    ("tiny_effect", (1.025, 1.1)),
)  # (field of Thresholds, its values besides the default)
THRESHOLD_NAMES = {"collapse_rate": "COLLAPSE_RATE", "late_fraction": "LATE_FRACTION",
                   "floor_band": "FLOOR_BAND", "min_fit_layers": "MIN_FIT_LAYERS", "majority": "MAJORITY",
                   "tiny_effect": "TINY_EFFECT"}  # the published constant of each field
ROBUST = "robust"


def _value(x: float) -> str:
    """``1/3`` and ``2/3`` as fractions, other values as ``%g``.

    >>> _value(1 / 3), _value(0.025)
    ('1/3', '0.025')
    """
    for k in (1, 2):
        if abs(x - k / 3) < 1e-12:
            return f"{k}/3"
    return f"{x:g}"


def grid_points() -> list[tuple[str, float, Thresholds]]:
    """Every point of the grid: (field, value, the thresholds with that one field moved)."""
    return [(field, value, dataclasses.replace(DEFAULTS, **{field: value}))
            for field, values in THRESHOLD_GRID for value in values]


def flips(decide: Callable[[Thresholds], str]) -> list[tuple[str, float, str]]:
    """The grid points where ``decide`` (thresholds -> verdict) differs from its verdict at the defaults:
    (field, value, the verdict there)."""
    default = decide(DEFAULTS)
    found = []
    for field, value, thresholds in grid_points():
        verdict = decide(thresholds)
        if verdict != default:
            found.append((field, value, verdict))
    return found


def robustness_words(found: list[tuple[str, float, str]]) -> str:
    """``"robust"`` or ``"borderline — flips when FLOOR_BAND = 3 (→ holds partly)"``.

    >>> robustness_words([("floor_band", 3.0, "holds partly")])
    'borderline — flips when FLOOR_BAND = 3 (→ holds partly)'
    """
    if not found:
        return ROBUST
    return "borderline — flips when " + "; ".join(
        f"{THRESHOLD_NAMES[field]} = {_value(value)} (→ {verdict})" for field, value, verdict in found)


def robust(make: Callable[[Thresholds], object]) -> object:
    """The claim ``make(DEFAULTS)`` with its ``robustness`` computed over the grid (``make``: thresholds ->
    :class:`rankcollapse.verdicts.claims.Claim`)."""
    claim = make(DEFAULTS)
    return dataclasses.replace(claim, robustness=robustness_words(flips(lambda t: make(t).verdict)))


def grid_words() -> dict[str, str]:
    """The grid as words for the setup page: ``grid_<field>`` -> ``"0.025 / 0.05 / 0.1"`` (default
    included)."""
    return {f"grid_{field}": " / ".join(_value(v) for v in sorted((*values, getattr(DEFAULTS, field))))
            for field, values in THRESHOLD_GRID}
