"""Computed verdicts: does a curve collapse, and does a claim of the paper hold, with the deciding numbers.

Two layers. :func:`curve_verdict` reads one curve (per-layer values, layer 0 = X(0), with that curve's own
rounding floor per layer, and, when the result stored its samples, the bootstrap's resampled curves) as one of
``CURVE_VERDICTS``; :func:`claim_verdict` combines the curves a claim is about into one of ``CLAIM_VERDICTS``.

**The per-layer factor.** A curve's decay is its per-layer factor ``f = exp(-rate)``, the rate the
least-squares slope of ``-log(value)`` against the layer over its *fit layers*: the last ``LATE_FRACTION`` of
the layers >= ``EARLY_LAYER`` that lie above the floor band (``FLOOR_BAND`` times the floor) before the curve
first reaches it — at least ``MIN_FIT_LAYERS`` of them — or, for a claim about given layers (Fig. 3's
"shallow layers"), the layers of that window above the band. Its interval is the 95 % percentile interval of
the same fit on the bootstrap's resampled medians (:func:`rankcollapse.core.stats.resampled_medians`: weight
seeds and articles). Nothing is ever fitted on a layer within the band: a value there is rounding noise.

**The curve verdicts** (for ``mu / ||X||_F``, floor ``eps``; a configuration tracked exactly below the floor,
:mod:`rankcollapse.engine.exact`, has no floor but underflow):

* **on the floor** — within the band already at X(0): nothing can be told.
* **reaches the floor** — the curve falls into the band at layer k before ``MIN_FIT_LAYERS`` layers above it
  could be fitted: it collapsed, at a per-layer factor below ``(band x floor / X(0)'s value)^(1/k)`` (a
  bound, not a measurement: no effect or ratio is computed from it).
* **collapses** — a fitted factor whose interval lies below 1 (without per-sample values: an estimate below
  ``exp(-COLLAPSE_RATE)``), or a curve that reaches the band after its fit layers.
* **not resolved** — a fitted factor whose interval includes 1 or lies above it: no collapse resolved in this
  many layers. This is not "stable": Theorem 1 predicts collapse under every quasi-strongly connected mask,
  at a rate that can be far too slow to see in a few layers (a bidirectional window on 128 tokens: of order
  1e-3 per layer). Whether LayerNorm *stops* a collapse is decided against the collapse it would stop
  (:func:`rankcollapse.verdicts.claims.bounded_claim`).

A claim about a set of curves **holds** if every deciding curve shows it, **holds partly** if some do,
**does not hold** if none does, and **cannot tell** if no curve decides.

:func:`rankcollapse.verdicts.tables.table_verdicts` applies the rules to every configuration of a tidy table.

The thresholds are the published constants below, gathered in :class:`Thresholds` (``DEFAULTS``); every
function takes a ``thresholds`` argument so that :mod:`rankcollapse.verdicts.robustness` can recompute a
verdict over a grid of them (never by changing the constants).

Used by: the claims tables of the experiment and response pages (:mod:`rankcollapse.verdicts.claims`,
:mod:`rankcollapse.verdicts.effects`), :mod:`rankcollapse.verdicts.limits`; the setup page quotes this
docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rankcollapse.core.metrics import FLOOR_BAND
from rankcollapse.core.stats import late_rates, percentile_interval

# per layer, without per-sample values: a fitted factor below e^-0.05 = 0.95 a layer counts as collapse
COLLAPSE_RATE = 0.05
STABLE_FACTOR = 10.0  # a curve "grows" past this factor of its early value (limits: a norm blowing up)
LATE_FRACTION = 0.5  # the factor is fitted on this last fraction of the layers above the band
MIN_FIT_LAYERS = 3  # fewer layers above the band than this: no factor is fitted ("reaches the floor")
MAJORITY = 0.5  # a claim read as a share of samples (full rank) "holds partly" from this share on
# an effect (a ratio) within this factor of 1 is tiny (for per-layer factors: a rate gap < 0.049)
TINY_EFFECT = 1.05
# a measured factor follows a prediction whose rate lies within this factor of its own (or inside its
# interval)
PREDICTION_TOLERANCE = 1.5
EARLY_LAYER = 1  # the early value: the first layer after attention (layer 0 is X(0), the embedding)
COLLAPSES, REACHES_FLOOR, NOT_RESOLVED, ON_FLOOR = CURVE_VERDICTS = (
    "collapses", "reaches the floor", "not resolved", "on the floor")
CLAIM_VERDICTS = ("holds", "holds partly", "does not hold", "cannot tell")
# what a claim may say about its curves: they collapse, or (LayerNorm's claims) a collapse is stopped
EXPECTATIONS = ("collapses", "bounded")


@dataclass(frozen=True)
class Thresholds:
    """The thresholds of the rules; ``DEFAULTS`` holds the published ones (the constants above)."""

    collapse_rate: float = COLLAPSE_RATE
    stable_factor: float = STABLE_FACTOR
    late_fraction: float = LATE_FRACTION
    floor_band: float = FLOOR_BAND
    majority: float = MAJORITY
    tiny_effect: float = TINY_EFFECT
    min_fit_layers: int = MIN_FIT_LAYERS

    def __post_init__(self) -> None:
        for name in ("collapse_rate", "stable_factor", "floor_band"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0; got {getattr(self, name)!r}")
        for name in ("late_fraction", "majority"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must lie in (0, 1]; got {getattr(self, name)!r}")
        if not self.tiny_effect >= 1:
            raise ValueError(f"tiny_effect must be >= 1; got {self.tiny_effect!r}")
        if not isinstance(self.min_fit_layers, int) or self.min_fit_layers < 2:
            raise ValueError(f"min_fit_layers must be an integer >= 2; got {self.min_fit_layers!r}")


DEFAULTS = Thresholds()


def rule_numbers() -> dict[str, str]:
    """The thresholds of the rules, as words for the setup page (``floor_band``, ``collapse_rate``,
    ``late_percent``, ``min_fit_layers``, ``majority_percent``, ``tiny_effect``).

    >>> rule_numbers()["min_fit_layers"]
    '3'
    """
    return {"floor_band": f"{FLOOR_BAND:g}", "collapse_rate": f"{COLLAPSE_RATE:g}",
            "collapse_factor": f"{math.exp(-COLLAPSE_RATE):.3g}", "late_percent": f"{100 * LATE_FRACTION:g}",
            "min_fit_layers": f"{MIN_FIT_LAYERS}", "stable_factor": f"{STABLE_FACTOR:g}",
            "majority_percent": f"{100 * MAJORITY:g}", "tiny_effect": f"{TINY_EFFECT:g}"}


def factor_text(x: float) -> str:
    """A per-layer factor with the digits that tell it from 1: two significant digits of ``1 - x`` near 1.

    >>> factor_text(0.5213), factor_text(0.99953), factor_text(1.0), factor_text(1.00021)
    ('0.521', '0.99953', '1', '1.00021')
    """
    if not math.isfinite(x):
        return "n/a"
    gap = abs(1 - x)
    if gap == 0:
        return "1"
    if gap >= 0.01:
        return f"{x:.3g}"
    return f"{x:.{-math.floor(math.log10(gap)) + 1}f}"


@dataclass(frozen=True)
class CurveVerdict:
    """The verdict on one curve and the numbers that decide it (module docstring)."""

    verdict: str  # one of CURVE_VERDICTS
    factor: float | None  # per-layer factor exp(-rate) over the fit layers; None: fewer than MIN_FIT_LAYERS
    low: float | None  # its interval; None: no per-sample values (or no factor)
    high: float | None
    fit: tuple[int, int] | None  # the first and last fit layer
    floor_layer: int | None  # first layer within the band of the floor; None if never
    n_layers: int  # layers after X(0)
    ratio: float  # value at the last layer read (the last, or the first in the band) / the early value
    bound: float | None = None  # "reaches the floor": the factor lies below this

    @property
    def rate(self) -> float | None:
        """The fitted rate ``-log(factor)`` per layer (positive: decaying); None without a factor."""
        return None if self.factor is None else -math.log(self.factor)

    @property
    def collapses(self) -> bool:
        return self.verdict in (COLLAPSES, REACHES_FLOOR)

    @property
    def interval(self) -> str:
        """``" [0.91, 0.95]"``, or "" without one."""
        return "" if self.low is None else f" [{factor_text(self.low)}, {factor_text(self.high)}]"

    @property
    def words(self) -> str:
        """Glue-able words with the deciding numbers, e.g. ``"collapses, factor 0.5 [0.48, 0.52] per layer
        (layers 7–12)"``."""
        if self.verdict == ON_FLOOR:
            return "cannot tell: on the rounding floor from X(0) on"
        if self.verdict == REACHES_FLOOR:
            return (f"collapses: reaches the rounding floor at layer {self.floor_layer} (a factor below "
                    f"{self.bound:.2g} per layer)")
        if self.factor is None:  # not resolved: fewer than min_fit_layers layers above the floor band
            return f"no collapse resolved in {self.n_layers} layers: too few layers to fit a factor"
        fit = f"{self.factor_words} (layers {self.fit[0]}–{self.fit[1]})"
        if self.verdict == NOT_RESOLVED:
            return f"no collapse resolved in {self.n_layers} layers: {fit}"
        floor = ("" if self.floor_layer is None
                 else f"; reaches the rounding floor at layer {self.floor_layer}")
        return f"collapses, {fit}{floor}"

    @property
    def factor_words(self) -> str:
        """``"factor 0.93 [0.91, 0.95] per layer"`` (``"… per layer, no interval"`` without per-sample
        values)."""
        return (f"factor {factor_text(self.factor)}{self.interval} per layer"
                f"{'' if self.low else ', no interval'}")

    @property
    def text(self) -> str:
        """Compact words for a claims cell: ``"×0.93 [0.91, 0.95]/layer"``, ``"floor at layer 2"``,
        ``"not resolved in 12 layers (×0.998, ≥ 0.995)"`` or ``"on the floor"``."""
        if self.verdict == ON_FLOOR:
            return "on the floor"
        if self.verdict == REACHES_FLOOR:
            return f"floor at layer {self.floor_layer}"
        if self.verdict == NOT_RESOLVED and self.factor is None:
            return f"not resolved in {self.n_layers} layers (too few to fit)"
        if self.verdict == NOT_RESOLVED:
            lower = factor_text(self.low if self.low is not None else self.factor)
            return f"not resolved in {self.n_layers} layers (×{factor_text(self.factor)}, ≥ {lower})"
        return f"×{factor_text(self.factor)}{self.interval}/layer"


def _as_curve(name: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or len(array) < EARLY_LAYER + 2:
        raise ValueError(f"{name} must be a 1-D sequence over layers 0..L with L >= {EARLY_LAYER + 1}, "
                         f"got shape {array.shape}")
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError(f"{name} must be finite and >= 0 at every layer")
    return array


def fit_layers(values, floor, thresholds: Thresholds = DEFAULTS,
               window: tuple[int, int] | None = None) -> tuple[np.ndarray, int | None]:
    """The layers a curve's factor is fitted on, and the first layer within the band of its floor (None if
    never).

    Without ``window``: the last ``late_fraction`` (at least ``min_fit_layers``) of the layers >= EARLY_LAYER
    above the band, before the curve first reaches it; all of them when fewer lie above it. With ``window``
    (first, last): the layers of that window above the band, before the curve first reaches it. Layer 0 in
    the band gives no layers. Shapes: values [layer + 1], floor [] or [layer + 1] -> ([k], int).
    """
    v = _as_curve("values", values)
    f = np.broadcast_to(np.asarray(floor, dtype=np.float64), v.shape)
    if not np.isfinite(f).all() or (f < 0).any():
        raise ValueError("floor must be finite and >= 0 (one number, or one per layer)")
    hits = np.flatnonzero(v <= thresholds.floor_band * f)
    floor_layer = int(hits[0]) if len(hits) else None
    end = len(v) if floor_layer is None else max(EARLY_LAYER, floor_layer)
    if window is not None:
        first, last = window
        if not EARLY_LAYER <= first < last:
            raise ValueError(f"window must be (first, last) with {EARLY_LAYER} <= first < last; "
                             f"got {window!r}")
        return np.arange(first, min(last + 1, end)), floor_layer
    above = np.arange(EARLY_LAYER, end)
    keep = max(thresholds.min_fit_layers, math.ceil(thresholds.late_fraction * len(above)))
    return above[-keep:], floor_layer


def factor_interval(draws: np.ndarray | None, layers: np.ndarray) -> tuple[float | None, float | None]:
    """The percentile interval of the per-layer factor fitted on ``layers`` of each resampled curve (None,
    None without draws or when no resample gives a finite factor).

    Shapes: draws [resample, layer + 1] or None, layers [k].
    """
    if draws is None:
        return None, None
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.exp(-late_rates(draws, layers))
    interval = percentile_interval(math.nan, factors)
    if not interval.resamples:
        return None, None
    return interval.low, interval.high


def curve_verdict(values, floor, thresholds: Thresholds = DEFAULTS, draws: np.ndarray | None = None,
                  window: tuple[int, int] | None = None) -> CurveVerdict:
    """Read one curve (rules in the module docstring) under ``thresholds``.

    ``values``: per-layer values, layer 0 = X(0); ``floor``: its rounding floor, one number or per layer;
    ``draws``: the bootstrap's resampled curves (the interval), or None; ``window``: fit these layers
    (:func:`fit_layers`) instead of the late ones. Shapes: values [layer + 1], floor [] or [layer + 1],
    draws [resample, layer + 1].

    >>> curve_verdict([0.9] + [0.5 * 0.5**k for k in range(12)], 2.2e-16).words
    'collapses, factor 0.5 per layer, no interval (layers 7–12)'
    >>> curve_verdict([0.9] + [0.5] * 12, 2.2e-16).text
    'not resolved in 12 layers (×1, ≥ 1)'
    >>> curve_verdict([0.9, 0.01, 1e-16, 1e-16], 2.2e-16).words
    'collapses: reaches the rounding floor at layer 2 (a factor below 4.9e-08 per layer)'
    >>> curve_verdict([0.9, 0.5, 0.4], 2.2e-16).text  # fewer than min_fit_layers layers: no factor
    'not resolved in 2 layers (too few to fit)'
    """
    v = _as_curve("values", values)
    f = np.broadcast_to(np.asarray(floor, dtype=np.float64), v.shape)
    n_layers = len(v) - 1
    layers, floor_layer = fit_layers(v, f, thresholds, window)
    if window is not None and floor_layer is not None and floor_layer > window[1]:
        floor_layer = None  # reached after the window: not what the window is asked about
    if floor_layer == 0:
        return CurveVerdict(ON_FLOOR, None, None, None, None, 0, n_layers, math.nan)
    last = n_layers if window is None else min(window[1], n_layers)  # the last layer read
    last = last if floor_layer is None else floor_layer
    early = v[EARLY_LAYER] if floor_layer is None or floor_layer > EARLY_LAYER else v[0]
    ratio = float(v[last] / early)
    if len(layers) < thresholds.min_fit_layers:
        if floor_layer is not None:
            bound = (thresholds.floor_band * f[floor_layer] / v[0]) ** (1 / floor_layer)
            return CurveVerdict(REACHES_FLOOR, None, None, None, None, floor_layer, n_layers, ratio,
                                float(bound))
        return CurveVerdict(NOT_RESOLVED, None, None, None, None, None, n_layers, ratio)  # too few to fit
    factor = float(np.exp(-late_rates(v[None], layers)[0]))
    low, high = factor_interval(draws, layers)
    fit = (int(layers[0]), int(layers[-1]))
    resolved = high < 1 if high is not None else factor < math.exp(-thresholds.collapse_rate)
    verdict = COLLAPSES if resolved or floor_layer is not None else NOT_RESOLVED
    return CurveVerdict(verdict, factor, low, high, fit, floor_layer, n_layers, ratio)


@dataclass(frozen=True)
class ClaimVerdict:
    """The verdict on a claim about a set of curves."""

    verdict: str  # one of CLAIM_VERDICTS
    expected: str  # one of EXPECTATIONS
    n_agree: int  # deciding curves that show ``expected``
    n_deciding: int  # curves that decide (collapse, or show a resolved factor)
    n_open: int  # curves that do not decide (on the floor, or no collapse resolved)

    @property
    def words(self) -> str:
        """E.g. ``"holds partly (2 of 4 curves collapse; 1 not decided)"``."""
        if self.n_deciding == 0:
            return f"{self.verdict} (none of {self.n_open} curves decides)"
        rest = f"; {self.n_open} not decided" if self.n_open else ""
        return f"{self.verdict} ({self.n_agree} of {self.n_deciding} curves {self.expected}{rest})"


def combine(outcomes: list[str]) -> str:
    """The claim verdict of its cells' outcomes: holds when every deciding one ("holds" / "does not hold" /
    "holds partly") holds, holds partly when some do, does not hold when none does, cannot tell when none
    decides.

    >>> combine(["holds", "cannot tell"]), combine(["holds", "does not hold"]), combine(["cannot tell"])
    ('holds', 'holds partly', 'cannot tell')
    """
    deciding = [o for o in outcomes if o in CLAIM_VERDICTS[:3]]
    if not deciding:
        return CLAIM_VERDICTS[3]
    held = deciding.count("holds")
    return "holds" if held == len(deciding) else ("holds partly" if held or "holds partly" in deciding
                                                  else "does not hold")


def claim_verdict(curves) -> ClaimVerdict:
    """Combine the verdicts of the curves a claim "they collapse" is about (``curves``: CurveVerdicts, or a
    dict of them): a curve that collapses agrees; one whose fitted factor lies above 1 with its interval
    disagrees; one on the floor or with no collapse resolved decides nothing.

    >>> fast = curve_verdict([1.0] + [0.5**k for k in range(12)], 1e-16)
    >>> flat = curve_verdict([1.0] * 13, 1e-16)
    >>> claim_verdict([fast, flat]).words
    'holds (1 of 1 curves collapses; 1 not decided)'
    """
    curves = list(curves.values()) if isinstance(curves, dict) else list(curves)
    if not curves or not all(isinstance(c, CurveVerdict) for c in curves):
        raise ValueError("curves must be a non-empty collection of CurveVerdict")
    outcomes = [collapse_outcome(c) for c in curves]
    deciding = [o for o in outcomes if o != CLAIM_VERDICTS[3]]
    return ClaimVerdict(combine(outcomes), COLLAPSES, deciding.count("holds"), len(deciding),
                        len(outcomes) - len(deciding))


def collapse_outcome(curve: CurveVerdict, predicted: float | None = None) -> str:
    """A cell's outcome for the claim "this curve collapses": holds when it collapses; does not hold when its
    factor's interval lies above 1, or includes 1 but excludes a ``predicted`` factor below it (the theory's
    collapse would have been resolved); else cannot tell (on the floor, or not resolved at this depth)."""
    if curve.collapses:
        return "holds"
    if curve.verdict == ON_FLOOR:
        return CLAIM_VERDICTS[3]
    low = curve.low if curve.low is not None else curve.factor
    if low is None:  # too few layers to fit a factor
        return CLAIM_VERDICTS[3]
    if low > 1 or (predicted is not None and predicted < low):
        return "does not hold"
    return CLAIM_VERDICTS[3]
