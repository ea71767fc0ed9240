"""Computed verdicts: does a curve collapse, and does a claim of the paper hold, with the deciding numbers.

Two layers. :func:`curve_verdict` classifies one curve (per-layer values, layer 0 = X(0), with that curve's
own rounding floor per layer) into one of ``CURVE_VERDICTS``; :func:`claim_verdict` combines the curves a
claim is about into one of ``CLAIM_VERDICTS``. The rules, for ``mu / ||X||_F`` (floor ``eps``) or ``mu``
(floor ``eps * ||X||_F``):

* **on the floor** — the curve is within ``FLOOR_BAND`` (10x) of its floor already at X(0): its whole decay,
  if any, is invisible in this dtype, and no verdict about collapse can be drawn ("cannot tell").
* **collapses** — the curve, above the band at X(0), *reaches the band* at some layer k ("reaches the
  rounding floor at layer k"; k = 1 means it collapsed within one layer, a steep descent from well above
  the floor, not a floor artefact), or its *late-layer rate* exceeds ``COLLAPSE_RATE`` per layer. The late
  rate is the least-squares slope of ``-log(value)`` against the layer over the last ``LATE_FRACTION`` of
  the layers >= 1 that lie above the band (at least two). What a curve does after it reached the band is
  rounding noise (LayerNorm can blow it back up) and is not read.
* **stable** — no late decay faster than ``COLLAPSE_RATE`` and the last layer within ``STABLE_FACTOR`` of
  the early value (layer ``EARLY_LAYER``, the first after attention: X(0) is an embedding, not a state of
  the dynamics).
* **decays slowly** — late rate at most ``COLLAPSE_RATE`` but the last layer more than ``STABLE_FACTOR``
  below the early value: neither a collapse at the stated rate nor stable.

A claim ``expected`` ("collapses" or "stable") about a set of curves **holds** if every deciding curve
(every curve not on the floor) shows it, **holds partly** if some do, **does not hold** if none does, and is
**cannot tell: on the rounding floor** if no curve decides. ``.words`` gives glue-able text.

:func:`table_verdicts` reads a tidy experiments table (:func:`rankcollapse.experiments.table.summarize`) and
gives one curve verdict per configuration from the **median over samples** per layer: the median commutes
with the log and with scaling (so the median floor over the median norm is exactly eps) and is not pulled by
the few samples that collapse differently. Every claim of every page is decided on this median (never on
the mean); the figures draw the same median with its 10–90 % band over samples (one centre).

The thresholds are the published constants below, gathered in :class:`Thresholds` (``DEFAULTS``); every
function takes a ``thresholds`` argument so that :mod:`rankcollapse.verdicts.robustness` can recompute a
verdict over a grid of them (never by changing the constants).

Used by: the claims tables of the experiment and response pages; the setup page quotes this docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rankcollapse.core.stats import late_rate
from rankcollapse.core.metrics import FLOOR_BAND, FLOOR_OF

# per layer: faster late decay (a factor below e^-0.05 = 0.95 a layer) counts as collapse
COLLAPSE_RATE = 0.05
STABLE_FACTOR = 10.0  # a stable curve ends within this factor of its early value
LATE_FRACTION = 0.5  # the late-layer rate is fitted on this last fraction of the layers above the band
MAJORITY = 0.5  # a claim read as a share of samples (full rank) "holds partly" from this share on
# an effect (a ratio) within this factor of 1 is tiny (for per-layer factors: a rate gap < 0.049)
TINY_EFFECT = 1.05
EARLY_LAYER = 1  # the early value: the first layer after attention (layer 0 is X(0), the embedding)
CURVE_VERDICTS = ("collapses", "stable", "decays slowly", "on the floor")
CLAIM_VERDICTS = ("holds", "holds partly", "does not hold", "cannot tell: on the rounding floor")
EXPECTATIONS = ("collapses", "stable")  # what a claim may say about its curves
LABEL_COLUMNS = ("weights", "variant", "mask", "window", "temperature", "norm", "skip", "n_samples")


@dataclass(frozen=True)
class Thresholds:
    """The thresholds of the rules; ``DEFAULTS`` holds the published ones (the constants above)."""

    collapse_rate: float = COLLAPSE_RATE
    stable_factor: float = STABLE_FACTOR
    late_fraction: float = LATE_FRACTION
    floor_band: float = FLOOR_BAND
    majority: float = MAJORITY
    tiny_effect: float = TINY_EFFECT

    def __post_init__(self) -> None:
        for name in ("collapse_rate", "stable_factor", "floor_band"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0; got {getattr(self, name)!r}")
        for name in ("late_fraction", "majority"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must lie in (0, 1]; got {getattr(self, name)!r}")
        if not self.tiny_effect >= 1:
            raise ValueError(f"tiny_effect must be >= 1; got {self.tiny_effect!r}")


DEFAULTS = Thresholds()


def rule_numbers() -> dict[str, str]:
    """The thresholds of the rules, as words for the setup page (``floor_band``, ``collapse_rate``,
    ``late_percent``, ``stable_factor``, ``majority_percent``, ``tiny_effect``).

    >>> rule_numbers()["collapse_rate"]
    '0.05'
    """
    return {"floor_band": f"{FLOOR_BAND:g}", "collapse_rate": f"{COLLAPSE_RATE:g}",
            "late_percent": f"{100 * LATE_FRACTION:g}", "stable_factor": f"{STABLE_FACTOR:g}",
            "majority_percent": f"{100 * MAJORITY:g}", "tiny_effect": f"{TINY_EFFECT:g}"}


def _number(x: float) -> str:
    """Two significant digits, as prose quotes them.

    >>> _number(0.7312), _number(1.7e-5)
    ('0.73', '1.7e-05')
    """
    return f"{x:.2g}"


def _rate_words(rate: float) -> str:
    """``"rate 0.73/layer"``; rates under 5e-5 a layer (a factor 0.994 over 128 layers) read as 0.

    >>> _rate_words(-1e-17)
    'rate 0/layer'
    """
    return f"rate {_number(rate) if abs(rate) >= 5e-5 else '0'}/layer"


@dataclass(frozen=True)
class CurveVerdict:
    """The verdict on one curve and the numbers that decide it.

    The early value is the one at ``EARLY_LAYER``, or at X(0) when that layer is already on the floor.
    """

    verdict: str  # one of CURVE_VERDICTS
    # late-layer decay rate per layer (positive: decaying); None with < 2 layers above the band
    rate: float | None
    ratio: float  # value at the last layer read (the last, or the first on the floor) / the early value
    floor_layer: int | None  # first layer within FLOOR_BAND of the floor; None if never
    n_layers: int  # layers after X(0)

    @property
    def collapses(self) -> bool:
        return self.verdict == "collapses"

    @property
    def words(self) -> str:
        """Glue-able words with the deciding number, e.g. ``"collapses (rate 0.73/layer)"``."""
        if self.verdict == "on the floor":
            return "cannot tell: on the rounding floor from X(0) on"
        if self.floor_layer is not None:
            layers = "layer" if self.floor_layer == 1 else "layers"
            return f"collapses (reaches the rounding floor within {self.floor_layer} {layers})"
        rate = _rate_words(self.rate)
        if self.verdict == "collapses":
            return f"collapses ({rate})"
        return (f"{self.verdict} ({rate}, x{_number(self.ratio)} of layer {EARLY_LAYER} "
                f"after {self.n_layers} layers)")


@dataclass(frozen=True)
class ClaimVerdict:
    """The verdict on a claim about a set of curves."""

    verdict: str  # one of CLAIM_VERDICTS
    expected: str  # one of EXPECTATIONS
    n_agree: int  # deciding curves that show ``expected``
    n_deciding: int  # curves not on the floor
    n_floor: int  # curves on the floor

    @property
    def words(self) -> str:
        """E.g. ``"holds partly (2 of 4 curves collapse; 1 on the floor)"``."""
        shows = {"collapses": "collapse", "stable": "stay stable"}[self.expected]
        if self.n_deciding == 0:
            return f"{self.verdict} ({self.n_floor} of {self.n_floor} curves on the floor)"
        floor = f"; {self.n_floor} on the floor" if self.n_floor else ""
        return f"{self.verdict} ({self.n_agree} of {self.n_deciding} curves {shows}{floor})"


def _as_curve(name: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or len(array) < EARLY_LAYER + 2:
        raise ValueError(f"{name} must be a 1-D sequence over layers 0..L with L >= {EARLY_LAYER + 1}, "
                         f"got shape {array.shape}")
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError(f"{name} must be finite and >= 0 at every layer")
    return array


def fit_layers(values, floor, thresholds: Thresholds = DEFAULTS) -> tuple[np.ndarray, int | None]:
    """The layers the late rate is fitted on, and the first layer within the band of the floor (None if
    never).

    The late layers are the last ``late_fraction`` (at least two) of the layers >= EARLY_LAYER above the band,
    before the curve first reaches it; fewer than two when fewer lie above it. Layer 0 on the band gives no
    layers. Shapes: values [layer + 1], floor [] or [layer + 1] -> ([k], int).
    """
    v = _as_curve("values", values)
    f = np.broadcast_to(np.asarray(floor, dtype=np.float64), v.shape)
    if not np.isfinite(f).all() or (f < 0).any():
        raise ValueError("floor must be finite and >= 0 (one number, or one per layer)")
    hits = np.flatnonzero(v <= thresholds.floor_band * f)
    floor_layer = int(hits[0]) if len(hits) else None
    above = np.arange(EARLY_LAYER, len(v) if floor_layer is None else max(EARLY_LAYER, floor_layer))
    return above[-max(2, math.ceil(thresholds.late_fraction * len(above))):], floor_layer


def curve_verdict(values, floor, thresholds: Thresholds = DEFAULTS) -> CurveVerdict:
    """Classify one curve (rules in the module docstring) under ``thresholds``.

    ``values``: per-layer values, layer 0 = X(0); ``floor``: its rounding floor, one number or per layer.
    Shapes: values [layer + 1], floor [] or [layer + 1].

    >>> curve_verdict([0.9] + [0.5 * 0.5**k for k in range(12)], 2.2e-16).words
    'collapses (rate 0.69/layer)'
    >>> curve_verdict([0.9] + [0.5] * 12, 2.2e-16).words
    'stable (rate 0/layer, x1 of layer 1 after 12 layers)'
    """
    v = _as_curve("values", values)
    n_layers = len(v) - 1
    layers, floor_layer = fit_layers(v, floor, thresholds)
    if floor_layer == 0:
        return CurveVerdict("on the floor", None, float("nan"), 0, n_layers)
    last = n_layers if floor_layer is None else floor_layer  # the last layer read
    rate = late_rate(v, layers)
    # layer 1, unless on the floor
    early = v[EARLY_LAYER] if floor_layer is None or floor_layer > EARLY_LAYER else v[0]
    ratio = float(v[last] / early)
    if floor_layer is not None or (rate is not None and rate > thresholds.collapse_rate):
        verdict = "collapses"
    elif ratio >= 1 / thresholds.stable_factor:
        verdict = "stable"
    else:
        verdict = "decays slowly"
    return CurveVerdict(verdict, rate, ratio, floor_layer, n_layers)


def claim_verdict(expected: str, curves) -> ClaimVerdict:
    """Combine the verdicts of the curves a claim is about (``curves``: CurveVerdicts, or a dict of them).

    >>> fast = curve_verdict([1.0] + [0.5**k for k in range(12)], 1e-16)
    >>> flat = curve_verdict([1.0] * 13, 1e-16)
    >>> claim_verdict("collapses", [fast, flat]).words
    'holds partly (1 of 2 curves collapse)'
    """
    if expected not in EXPECTATIONS:
        raise ValueError(f"expected must be one of {', '.join(EXPECTATIONS)}; got {expected!r}")
    curves = list(curves.values()) if isinstance(curves, dict) else list(curves)
    if not curves or not all(isinstance(c, CurveVerdict) for c in curves):
        raise ValueError("curves must be a non-empty collection of CurveVerdict")
    deciding = [c for c in curves if c.verdict != "on the floor"]
    agree = sum(c.verdict == expected for c in deciding)
    if not deciding:
        verdict = CLAIM_VERDICTS[3]
    elif agree == len(deciding):
        verdict = "holds"
    elif agree:
        verdict = "holds partly"
    else:
        verdict = "does not hold"
    return ClaimVerdict(verdict, expected, agree, len(deciding), len(curves) - len(deciding))


def table_curve(table: pd.DataFrame, metric: str, statistic: str) -> pd.Series:
    """The per-layer ``statistic`` of ``metric`` in the rows of one configuration, indexed by layer."""
    rows = table[table["metric"] == metric].sort_values("layer")
    return pd.Series(rows[statistic].to_numpy(), index=rows["layer"].to_numpy())


def _check_choice(metric: str, statistic: str) -> None:
    if metric not in FLOOR_OF:
        raise ValueError(f"metric must be one of {', '.join(FLOOR_OF)}; got {metric!r}")
    if statistic not in ("median", "mean", "q10", "q90"):
        raise ValueError(f"statistic must be one of median, mean, q10, q90; got {statistic!r}")


def curve_and_floor(group: pd.DataFrame, metric: str = "relative_mu",
                    statistic: str = "median") -> tuple[pd.Series, pd.Series]:
    """One configuration's per-layer ``statistic`` of ``metric`` and of its floor (``FLOOR_OF``); a table
    without ``relative_floor`` (stored before it existed) gets eps as median ``floor`` / median ``norm``,
    which is exact.

    Shapes: group the tidy rows of one configuration -> ([layer + 1], [layer + 1]) indexed by layer.
    """
    _check_choice(metric, statistic)
    values = table_curve(group, metric, statistic)
    floor_metric = FLOOR_OF[metric]
    if (group["metric"] == floor_metric).any():
        floor = table_curve(group, floor_metric, statistic)
    elif metric == "relative_mu":
        floor = table_curve(group, "floor", statistic) / table_curve(group, "norm", statistic)
    else:
        raise ValueError(f"the table has no {floor_metric!r} rows, the floor of {metric!r}")
    return values, floor.reindex(values.index)


def table_verdicts(table: pd.DataFrame, metric: str = "relative_mu", statistic: str = "median",
                   thresholds: Thresholds = DEFAULTS) -> pd.DataFrame:
    """One curve verdict per configuration of a tidy experiments table, from the per-layer ``statistic``
    (:func:`curve_and_floor`) under ``thresholds``. Returns the label columns and
    ``verdict, rate, ratio, floor_layer, words, curve`` (the :class:`CurveVerdict`), ``values, floor`` (the
    curve and its floor per layer, to decide it again under other thresholds).
    """
    _check_choice(metric, statistic)
    labels = [c for c in LABEL_COLUMNS if c in table.columns]
    rows = []
    for key, group in table.groupby(labels, dropna=False, sort=False):
        if not (group["metric"] == metric).any():
            continue
        values, floor = curve_and_floor(group, metric, statistic)
        curve = curve_verdict(values.to_numpy(), floor.to_numpy(), thresholds)
        rows.append({**dict(zip(labels, key)), "verdict": curve.verdict, "rate": curve.rate,
                     "ratio": curve.ratio, "floor_layer": curve.floor_layer, "words": curve.words,
                     "curve": curve, "values": values.to_numpy(), "floor": floor.to_numpy()})
    out = pd.DataFrame(rows)
    if not out.empty:
        # missing where the curve never reaches the floor
        out["floor_layer"] = out["floor_layer"].astype("Int64")
    return out
