"""Effect sizes with 95 % intervals: how much a configuration changes a curve against its baseline.

A comparative claim ("LayerNorm slows collapse", "a smaller temperature slows collapse") is decided on an
**effect**, a ratio between a configuration and its *baseline* on the same samples and weights (:class:`Side`:
the median curve of μ/‖X‖_F, μ or ‖X‖_F over every weight seed and sample, its rounding floor, and the
bootstrap's resampled medians when the results stored their samples,
:class:`rankcollapse.experiments.sample_values.SampleValues`; :func:`side` builds one from one result or from
the results of several weight seeds):

* :func:`late_factor` — the ratio of the per-layer factors, ``exp(rate_baseline - rate_config)``, each rate
  the rules' fit of ``-log`` of the median curve over its fit layers (the late layers, or a given window,
  above the floor band: :func:`rankcollapse.verdicts.rules.fit_layers`).
  Above 1: the configuration decays more slowly per layer. A curve with fewer than ``MIN_FIT_LAYERS`` layers
  above the band has no factor, and the effect is "cannot tell": no ratio is ever computed from values in the
  band. A ratio of the factors, not of the rates themselves: a rate near 0 or below it makes a ratio of rates
  unbounded and of either sign, while the factors' ratio stays a number near 1 when the two rates are close.
* :func:`factor_contrast` — one pair's late factor over another's (is the effect larger under one mask?).
* :func:`layer_factor` — the ratio of one layer's factor (its value over the previous layer's) between the two
  ("where does an effect disappear?").
* :func:`last_value` — the ratio of the median curves at their last layer.
* :func:`growth` — one curve's last layer over its middle layer (no baseline: "grows over the last half").
* :func:`depth_change` — one curve's last layer over X(0), or scale-free over another curve of the same
  samples ("σ_min falls from the embeddings to the last layer").
* :func:`lowest_ratio` — the smallest ratio of the two median curves over layers >= 1 ("in every layer").

Interval: a **paired two-level bootstrap** (:func:`rankcollapse.core.stats.resampled_medians`): the weight
seeds of initialized stacks and the articles the samples were cut from are resampled (B =
:data:`rankcollapse.core.stats.BOOTSTRAP_RESAMPLES`, seed :data:`rankcollapse.core.stats.BOOTSTRAP_SEED`),
both curves' medians recomputed on the same resample, then the statistic; the 95 % percentile interval of
the B statistics. The fit layers are those of the full-sample median (the rules' choice), so the interval
shows the spread of the medians over weights and texts, not of the window. A result stored without
per-sample values gets the effect of its median curves and the words :data:`NO_INTERVAL`.

An effect **holds** (:func:`outcome`) only when its interval excludes no effect (ratio 1) on the side the
claim expects and its estimate, accumulated over the layers it acts on (a per-layer ratio over its fit
layers), lies beyond ``thresholds.tiny_effect`` (:data:`rankcollapse.verdicts.rules.TINY_EFFECT`); inside
that factor it is **tiny**, with an interval across 1 it is **no effect**, on the other side **does not
hold**. (×1.01 per layer is tiny over one layer and a factor 1.9 over 64.)

Used by: the claims of the experiment and response pages (:mod:`rankcollapse.book.pages`);
tests/unit/test_effects.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rankcollapse.core.metrics import FLOOR_OF
from rankcollapse.core.stats import (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, INTERVAL_LEVEL, late_rates,
                                     percentile_interval, resampled_medians)
from rankcollapse.experiments.sample_values import CURVE_COLUMNS, SampleValues
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts import rules, tables
from rankcollapse.verdicts.rules import DEFAULTS, Thresholds

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
    """One configuration's curve: its median over weight seeds and samples and its floor per layer and, when
    stored, the bootstrap's resampled medians.

    Shapes: values [layer + 1], floor [layer + 1], draws [resample, layer + 1] (the bootstrap's medians) or
    None.
    """

    label: str  # words naming the configuration
    values: np.ndarray
    floor: np.ndarray
    draws: np.ndarray | None
    resampled: str = ""  # what the bootstrap resamples, in words ("5 weight seeds and 412 articles")


def _rows(table: pd.DataFrame, labels: dict) -> pd.DataFrame:
    for column, wanted in labels.items():
        table = table[table[column].isna()] if wanted is None else table[table[column] == wanted]
    return table


def side(results: StoredResult | Sequence[StoredResult] | pd.DataFrame, samples: SampleValues | None = None,
         label: str = "", metric: str = "relative_mu", **labels) -> Side:
    """The configuration matching ``labels`` (column=value; exactly one) of one result, of the results of
    several weight seeds (the same samples; the design the bootstrap resamples,
    :func:`rankcollapse.core.stats.resampled_medians`), or of a bare tidy ``table`` with its ``samples``.

    The curve is the median per layer over every seed's samples (from the per-sample values; without them, the
    first table's median) with the first table's floor; the draws are the two-level bootstrap's, None when a
    result lacks per-sample values of ``metric``.
    """
    if isinstance(results, pd.DataFrame):
        frames, stored = [results], [samples]
    else:
        results = [results] if isinstance(results, StoredResult) else list(results)
        frames, stored = [r.table for r in results], [r.samples for r in results]
        _check_crossed(results)
    group = _rows(frames[0], labels)
    layers = group.loc[group["metric"] == metric, "layer"].to_numpy()
    if not len(layers) or len(np.unique(layers)) != len(layers):
        raise ValueError(f"{len(layers)} rows of {metric!r} match {labels}; name one configuration")
    if metric in FLOOR_OF:
        values, floor = (s.to_numpy() for s in tables.curve_and_floor(group, metric))
    else:  # ‖X‖_F: no rounding floor to read against
        values = tables.table_curve(group, metric, "median").to_numpy()
        floor = 0 * values
    if any(s is None or metric not in s.values for s in stored):
        return Side(label, values, floor, None)
    curve_labels = {k: v for k, v in labels.items() if k in CURVE_COLUMNS}
    curves = np.stack([s.curve(metric, **curve_labels) for s in stored])  # [seed, layer + 1, sample]
    groups = stored[0].groups
    if len(stored) > 1:  # the pooled median (one result: its table's, the numbers the page states)
        values = np.median(curves.transpose(1, 0, 2).reshape(curves.shape[1], -1), axis=-1)
    articles = "samples" if groups is None else "articles"
    n_groups = curves.shape[-1] if groups is None else len(np.unique(groups))
    seeds = f"{len(stored)} weight seeds and " if len(stored) > 1 else ""
    return Side(label, values, floor, resampled_medians(curves, groups), f"{seeds}{n_groups} {articles}")


def _check_crossed(results: list[StoredResult]) -> None:
    """Several results read as one side are the same samples under other weight seeds."""
    if not results:
        raise ValueError("results must name at least one stored result")
    ids = {r.provenance.get("sample_ids_sha256") for r in results}
    if len(ids) != 1:
        raise ValueError("the results of one side must hold the same samples (their weight seeds differ): "
                         f"{len(ids)} different sample sets")


@dataclass(frozen=True)
class Effect:
    """A ratio and its bootstrap interval (``low``/``high`` None: no per-sample values; NaN estimate:
    undefined)."""

    name: str  # what the ratio is, in words
    estimate: float
    low: float | None
    high: float | None
    reason: str = ""  # why the estimate is undefined
    resampled: str = ""  # what the interval resamples ("5 weight seeds and 412 articles")
    layers: int = 1  # the layers a per-layer ratio acts over (its fit layers): "tiny" reads it accumulated

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
        over = f" over {self.resampled}" if self.resampled else ""
        interval = (NO_INTERVAL if self.low is None
                    else f"95 % interval{over} [{self.low:.3g}, {self.high:.3g}]")
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
    if abs(math.log(effect.estimate)) * effect.layers < math.log(thresholds.tiny_effect):
        return "tiny"  # accumulated over its layers, still within the tiny factor of no effect
    return "holds" if (effect.estimate > 1) == (direction > 0) else "does not hold"


def _effect(name: str, statistic: Callable[..., np.ndarray], layers: int,
            sides: tuple[Side, ...]) -> Effect:
    """``statistic`` (median curves [batch, layer + 1] each -> [batch]) on the medians and on the
    resamples; ``layers``: how many layers a per-layer ratio acts over (1 for other ratios)."""
    estimate = float(statistic(*(s.values[None] for s in sides))[0])
    if any(s.draws is None for s in sides) or not math.isfinite(estimate):
        return Effect(name, estimate, None, None, layers=layers)
    if len({s.draws.shape[0] for s in sides}) != 1 or len({s.resampled for s in sides}) != 1:
        raise ValueError("the sides of an effect must be resampled alike (the same seeds and samples): "
                         + "; ".join(f"{s.label}: {s.resampled}" for s in sides))
    interval = percentile_interval(estimate, statistic(*(s.draws for s in sides)))
    return Effect(name, estimate, interval.low, interval.high, resampled=sides[0].resampled, layers=layers)


def _rate_layers(curve: Side, thresholds: Thresholds, window: tuple[int, int] | None) -> np.ndarray | str:
    """The layers a curve's factor is read on (the rules' fit layers, :func:`rules.fit_layers`), or why it
    has none: fewer than ``min_fit_layers`` of them lie above the floor band."""
    layers, floor_layer = rules.fit_layers(curve.values, curve.floor, thresholds, window)
    if len(layers) >= thresholds.min_fit_layers:
        return layers
    where = "X(0)" if floor_layer == 0 else f"layer {floor_layer}"
    return f"{curve.label} on the rounding floor from {where} on"


def _rate_statistic(config: Side, baseline: Side, thresholds: Thresholds,
                    window: tuple[int, int] | None = None) -> tuple[Callable, int] | str:
    """``exp(rate_baseline - rate_config)`` of median curves [batch, layer + 1] -> [batch] and the layers it
    acts over (the shorter fit), or why it is undefined."""
    windows = [_rate_layers(s, thresholds, window) for s in (config, baseline)]
    reasons = [w for w in windows if isinstance(w, str)]
    if reasons:
        return "; ".join(reasons)

    def statistic(c: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.exp(late_rates(b, windows[1]) - late_rates(c, windows[0]))

    return statistic, min(len(w) for w in windows)


def late_factor(config: Side, baseline: Side, thresholds: Thresholds = DEFAULTS,
                window: tuple[int, int] | None = None) -> Effect:
    """``exp(rate_baseline - rate_config)``: above 1 when the configuration decays more slowly per layer; each
    rate fitted on its late layers, or on the layers of ``window`` (first, last) above the band."""
    where = "" if window is None else f" over layers {window[0]}–{window[1]}"
    name = f"per-layer factor{where}, {config.label} over {baseline.label}"
    found = _rate_statistic(config, baseline, thresholds, window)
    if isinstance(found, str):
        return Effect(name, math.nan, None, None, found)
    return _effect(name, *found, (config, baseline))


def factor_contrast(first: tuple[Side, Side], second: tuple[Side, Side],
                    thresholds: Thresholds = DEFAULTS, window: tuple[int, int] | None = None) -> Effect:
    """The :func:`late_factor` of the ``first`` (configuration, baseline) pair over that of the ``second``:
    above 1 when the first pair's effect is the larger ("more for global attention"); over ``window``'s
    layers when given."""
    name = f"per-layer factor of {first[0].label} over {first[1].label}, over that of {second[0].label}"
    found = [_rate_statistic(*pair, thresholds, window) for pair in (first, second)]
    reasons = [s for s in found if isinstance(s, str)]
    if reasons:
        return Effect(name, math.nan, None, None, "; ".join(reasons))
    (one, n_one), (two, n_two) = found
    return _effect(name, lambda a, b, c, d: one(a, b) / two(c, d), min(n_one, n_two), (*first, *second))


def layer_factor(config: Side, baseline: Side, layer: int) -> Effect:
    """The configuration's factor at ``layer`` (its value over the previous layer's) over the baseline's:
    above 1 when the configuration falls less in that layer; cannot tell where either value lies in the band.
    """
    name = f"factor of layer {layer}, {config.label} over {baseline.label}"
    if not 1 <= layer < len(config.values):
        raise ValueError(f"layer must lie in [1, {len(config.values) - 1}]; got {layer!r}")
    pair = slice(layer - 1, layer + 1)
    in_band = [s.label for s in (config, baseline)
               if (s.values[pair] <= rules.DEFAULTS.floor_band * s.floor[pair]).any()]
    if in_band:
        return Effect(name, math.nan, None, None,
                      f"{' and '.join(in_band)} on the rounding floor at layer {layer}")
    return _effect(name, lambda c, b: (c[:, layer] / c[:, layer - 1]) / (b[:, layer] / b[:, layer - 1]), 1,
                   (config, baseline))


def last_value(config: Side, baseline: Side, what: str = "μ/‖X‖_F") -> Effect:
    """The configuration's median at its last layer over the baseline's at its last layer."""
    return _effect(f"{what} at the last layer, {config.label} over {baseline.label}",
                   lambda c, b: c[:, -1] / b[:, -1], 1, (config, baseline))


def growth(curve: Side, what: str = "μ") -> Effect:
    """The median at the last layer over the median at the middle layer (``n_layers // 2``)."""
    middle = (len(curve.values) - 1) // 2
    return _effect(f"growth of {what} over the last half, {curve.label}",
                   lambda c: c[:, -1] / c[:, middle], 1, (curve,))


def depth_change(curve: Side, what: str, scale: Side | None = None) -> Effect:
    """The median at the last layer over the median at X(0) (layer 0); with ``scale`` (a curve of the same
    samples, e.g. ‖X‖_F), of the curve's median over the scale's (scale-free). Cannot tell where the curve's
    median at either end lies in its floor band.  Shapes: each Side's values [layer + 1]."""
    name = f"{what}, last layer over the embeddings"
    ends = [0, len(curve.values) - 1]
    if (curve.values[ends] <= rules.DEFAULTS.floor_band * curve.floor[ends]).any():
        return Effect(name, math.nan, None, None, f"{curve.label} on the rounding floor at an end")
    if scale is None:
        return _effect(name, lambda c: c[:, -1] / c[:, 0], 1, (curve,))
    return _effect(name, lambda c, s: (c[:, -1] / s[:, -1]) / (c[:, 0] / s[:, 0]), 1, (curve, scale))


def lowest_ratio(config: Side, baseline: Side) -> Effect:
    """The smallest ratio of the two median curves over layers >= 1 (above 1: higher in every layer)."""
    return _effect(f"lowest ratio over layers, {config.label} over {baseline.label}",
                   lambda c, b: (c[:, 1:] / b[:, 1:]).min(axis=-1), 1, (config, baseline))
