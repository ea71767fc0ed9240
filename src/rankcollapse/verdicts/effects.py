"""Effect sizes with 95 % intervals: how much a configuration changes a curve against its baseline.

A comparative claim ("LayerNorm slows collapse", "a smaller temperature slows collapse") is decided on an
**effect**, a ratio between a configuration and its *baseline* on the same samples (:class:`Side`: the median
curve of μ/‖X‖_F, μ or ‖X‖_F over samples, its rounding floor, and each sample's curve when the result
stored them, :class:`rankcollapse.experiments.sample_values.SampleValues`):

* :func:`late_factor` — the ratio of the per-layer late factors, ``exp(rate_baseline - rate_config)``, each
  rate the rules' late-layer fit of ``-log`` of the median curve
  (:func:`rankcollapse.verdicts.rules.fit_layers`; a curve with fewer than two layers above the band is read
  by its mean rate down to the floor). Above 1: the configuration decays more slowly per layer. A ratio of the
  factors, not of the rates themselves: a rate near 0 or below it (pure attention under a window: 0.0003,
  −0.0006) makes a ratio of rates unbounded and of either sign, while the factors' ratio stays a number near 1
  when the two rates are close.
* :func:`factor_contrast` — one pair's late factor over another's (is the effect larger under one mask?).
* :func:`last_value` — the ratio of the median curves at their last layer.
* :func:`growth` — one curve's last layer over its middle layer (no baseline: "grows over the last half").
* :func:`lowest_ratio` — the smallest ratio of the two median curves over layers >= 1 ("in every layer").

Interval: a **paired bootstrap over samples** — the sample indices are resampled (B =
:data:`rankcollapse.core.stats.BOOTSTRAP_RESAMPLES`, seed :data:`rankcollapse.core.stats.BOOTSTRAP_SEED`),
both curves' medians recomputed on the same resample, then the statistic; the 95 % percentile interval of the
B statistics. The fit layers are those of the full-sample median (the rules' choice), so the interval shows
the sampling spread of the medians, not of the window. A result stored without per-sample values gets the
effect of its median curves and the words :data:`NO_INTERVAL`.

An effect **holds** (:func:`outcome`) only when its interval excludes no effect (ratio 1) on the side the
claim expects and its estimate lies beyond ``thresholds.tiny_effect`` (published as
:data:`rankcollapse.verdicts.rules.TINY_EFFECT`); inside that factor it is **tiny**, with an interval across
1 it is **no effect**, on the other side **does not hold**.

Used by: the claims of the experiment and response pages (:mod:`rankcollapse.book.pages`);
tests/unit/test_effects.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rankcollapse.core.metrics import FLOOR_OF
from rankcollapse.core.stats import (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, INTERVAL_LEVEL, late_rates,
                                     percentile_interval, resampled_medians)
from rankcollapse.experiments.sample_values import CURVE_COLUMNS, SampleValues
from rankcollapse.verdicts import rules
from rankcollapse.verdicts.rules import DEFAULTS, EARLY_LAYER, Thresholds

NO_INTERVAL = "no interval: per-sample values not stored for this result"
SAME_SCALE = 2.0  # "at the same scale": the ratio of two scales lies within this factor of 1
# cell symbols; "read": a number the row's verdict is decided on as a whole
OUTCOMES = {"holds": "✓", "holds partly": "◐", "does not hold": "✗", "tiny": "≈", "no effect": "○",
            "cannot tell": "?", "read": "•"}


def effect_numbers() -> dict[str, str]:
    """The bootstrap's settings as words for the setup page (``resamples``, ``seed``, ``level_percent``,
    ``same_scale``)."""
    return {"resamples": f"{BOOTSTRAP_RESAMPLES}", "seed": f"{BOOTSTRAP_SEED}",
            "level_percent": f"{100 * INTERVAL_LEVEL:g}", "same_scale": f"{SAME_SCALE:g}"}


@dataclass(frozen=True, eq=False)
class Side:
    """One configuration's curve: its median over samples and floor per layer and, when stored, every
    sample's.

    Shapes: values [layer + 1], floor [layer + 1], draws [resample, layer + 1] (the bootstrap's medians) or
    None.
    """

    label: str  # words naming the configuration
    values: np.ndarray
    floor: np.ndarray
    draws: np.ndarray | None


def side(table: pd.DataFrame, samples: SampleValues | None, label: str, metric: str = "relative_mu",
         **labels) -> Side:
    """The configuration of ``table`` (and of ``samples``, if given) matching ``labels`` (column=value), which
    must name exactly one; its median curve of ``metric`` with its floor, and its bootstrap medians."""
    group = table
    for column, wanted in labels.items():
        group = group[group[column] == wanted]
    layers = group.loc[group["metric"] == metric, "layer"].to_numpy()
    if not len(layers) or len(np.unique(layers)) != len(layers):
        raise ValueError(f"{len(layers)} rows of {metric!r} match {labels}; name one configuration")
    if metric in FLOOR_OF:
        values, floor = rules.curve_and_floor(group, metric)
    else:  # ‖X‖_F: no rounding floor to read against
        values = rules.table_curve(group, metric, "median")
        floor = 0 * values
    draws = None
    if samples is not None:
        curve = samples.curve(metric, **{k: v for k, v in labels.items() if k in CURVE_COLUMNS})
        draws = resampled_medians(curve)
    return Side(label, values.to_numpy(), floor.to_numpy(), draws)


@dataclass(frozen=True)
class Effect:
    """A ratio and its bootstrap interval (``low``/``high`` None: no per-sample values; NaN estimate:
    undefined)."""

    name: str  # what the ratio is, in words
    estimate: float
    low: float | None
    high: float | None
    reason: str = ""  # why the estimate is undefined

    @property
    def text(self) -> str:
        """Compact: ``"×1.2 [1.1, 1.3]"``, ``"×1.2"`` without per-sample values (the claims tables' legend
        says so once, not every cell), or ``"n/a"``."""
        if not math.isfinite(self.estimate):
            return "n/a"
        return (f"×{self.estimate:.3g}" if self.low is None
                else f"×{self.estimate:.3g} [{self.low:.3g}, {self.high:.3g}]")

    @property
    def words(self) -> str:
        """Long: the name, the estimate and the interval (or :data:`NO_INTERVAL`, or the reason)."""
        if not math.isfinite(self.estimate):
            return f"{self.name}: cannot tell ({self.reason})"
        interval = NO_INTERVAL if self.low is None else f"95 % interval [{self.low:.3g}, {self.high:.3g}]"
        return f"{self.name} ×{self.estimate:.3g} ({interval})"


def outcome(effect: Effect, direction: int, thresholds: Thresholds = DEFAULTS) -> str:
    """One of OUTCOMES for a claim expecting the ratio above 1 (``direction`` +1), below 1 (-1), or within
    :data:`SAME_SCALE` of 1 (0)."""
    if direction not in (-1, 0, 1):
        raise ValueError(f"direction must be -1, 0 or 1; got {direction!r}")
    if not math.isfinite(effect.estimate):
        return "cannot tell"
    if effect.low is not None and not (math.isfinite(effect.low) and math.isfinite(effect.high)):
        return "cannot tell"  # no resample gave a finite statistic
    low, high = (effect.estimate, effect.estimate) if effect.low is None else (effect.low, effect.high)
    if direction == 0:
        return "holds" if 1 / SAME_SCALE <= low and high <= SAME_SCALE else "does not hold"
    if low <= 1 <= high:
        return "no effect"
    if abs(math.log(effect.estimate)) < math.log(thresholds.tiny_effect):
        return "tiny"
    return "holds" if (effect.estimate > 1) == (direction > 0) else "does not hold"


def _effect(name: str, statistic: Callable[..., np.ndarray], sides: tuple[Side, ...]) -> Effect:
    """``statistic`` (median curves [batch, layer + 1] each -> [batch]) on the medians and on the
    resamples."""
    estimate = float(statistic(*(s.values[None] for s in sides))[0])
    if any(s.draws is None for s in sides) or not math.isfinite(estimate):
        return Effect(name, estimate, None, None)
    interval = percentile_interval(estimate, statistic(*(s.draws for s in sides)))
    return Effect(name, estimate, interval.low, interval.high)


def _rate_layers(curve: Side, thresholds: Thresholds) -> np.ndarray | None:
    """The layers a curve's rate is read on: the rules' late window, or (fewer than two layers above the band)
    the early layer and the first on the floor — the mean rate down to the floor. None on the floor at
    X(0)."""
    layers, floor_layer = rules.fit_layers(curve.values, curve.floor, thresholds)
    if len(layers) >= 2:
        return layers
    if floor_layer == 0:
        return None
    return np.array([0 if floor_layer <= EARLY_LAYER else EARLY_LAYER, floor_layer])


def _rate_statistic(config: Side, baseline: Side, thresholds: Thresholds) -> Callable | str:
    """``exp(rate_baseline - rate_config)`` of median curves [batch, layer + 1] -> [batch], or why it is
    undefined."""
    windows = [_rate_layers(s, thresholds) for s in (config, baseline)]
    on_floor = [s.label for s, w in zip((config, baseline), windows) if w is None]
    if on_floor:
        return f"{' and '.join(on_floor)} on the rounding floor from X(0) on"

    def statistic(c: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.exp(late_rates(b, windows[1]) - late_rates(c, windows[0]))

    return statistic


def late_factor(config: Side, baseline: Side, thresholds: Thresholds = DEFAULTS) -> Effect:
    """``exp(rate_baseline - rate_config)``: above 1 when the configuration decays more slowly per layer."""
    name = f"per-layer factor, {config.label} over {baseline.label}"
    statistic = _rate_statistic(config, baseline, thresholds)
    if isinstance(statistic, str):
        return Effect(name, math.nan, None, None, statistic)
    return _effect(name, statistic, (config, baseline))


def factor_contrast(first: tuple[Side, Side], second: tuple[Side, Side],
                    thresholds: Thresholds = DEFAULTS) -> Effect:
    """The :func:`late_factor` of the ``first`` (configuration, baseline) pair over that of the ``second``:
    above 1 when the first pair's effect is the larger ("more for global attention")."""
    name = f"per-layer factor of {first[0].label} over {first[1].label}, over that of {second[0].label}"
    statistics = [_rate_statistic(*pair, thresholds) for pair in (first, second)]
    reasons = [s for s in statistics if isinstance(s, str)]
    if reasons:
        return Effect(name, math.nan, None, None, "; ".join(reasons))
    return _effect(name, lambda a, b, c, d: statistics[0](a, b) / statistics[1](c, d), (*first, *second))


def last_value(config: Side, baseline: Side, what: str = "μ/‖X‖_F") -> Effect:
    """The configuration's median at its last layer over the baseline's at its last layer."""
    return _effect(f"{what} at the last layer, {config.label} over {baseline.label}",
                   lambda c, b: c[:, -1] / b[:, -1], (config, baseline))


def growth(curve: Side, what: str = "μ") -> Effect:
    """The median at the last layer over the median at the middle layer (``n_layers // 2``)."""
    middle = (len(curve.values) - 1) // 2
    return _effect(f"growth of {what} over the last half, {curve.label}",
                   lambda c: c[:, -1] / c[:, middle], (curve,))


def lowest_ratio(config: Side, baseline: Side) -> Effect:
    """The smallest ratio of the two median curves over layers >= 1 (above 1: higher in every layer)."""
    return _effect(f"lowest ratio over layers, {config.label} over {baseline.label}",
                   lambda c, b: (c[:, 1:] / b[:, 1:]).min(axis=-1), (config, baseline))
