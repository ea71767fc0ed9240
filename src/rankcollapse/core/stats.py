"""Every statistic the book draws or decides with, in one place: decay-rate fits, quantile bands, rank
correlations, binomial intervals and the paired bootstrap of the verdicts' effect sizes.

Used by: the theorem pages (:mod:`rankcollapse.theory.dynamics`, the band figures), the verdicts
(:mod:`rankcollapse.verdicts.rules`: the late rate, the mean rate), the mask-design page (rates, rank
correlations), the Monte-Carlo fractions of the counterexample and Theorem 2 pages, and the effect sizes of
the claims tables (:mod:`rankcollapse.verdicts.effects`: :func:`resampled_medians`,
:func:`percentile_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


def fit_decay_rates(log_mu: Tensor, valid: Tensor | None = None, skip: int = 0) -> Tensor:
    """Least-squares rate ``-d log(mu) / dt`` per layer over the valid layers ``t >= skip``, for a batch of
    curves: the one decay-rate fit of the package (:func:`_slopes`; :func:`late_rates` is the same fit on
    chosen layers of numpy curves).

    Positive means collapse; ``exp(-rate)`` is the contraction factor per layer.

    Shapes: log_mu ``[..., layer]`` (natural log), valid ``[layer]`` bool (e.g. mu above the floor)
    -> ``[...]``.
    """
    keep = np.arange(log_mu.shape[-1]) >= skip
    if valid is not None:
        keep = keep & valid.cpu().numpy().astype(bool)
    if int(keep.sum()) < 2:
        raise ValueError(f"valid layers: {int(keep.sum())}; at least 2 are needed to fit a rate")
    logs = log_mu.detach().cpu().to(torch.float64).numpy()
    return torch.from_numpy(np.asarray(-_slopes(logs[..., keep], np.flatnonzero(keep))))


def _slopes(y: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Least-squares slopes of ``y`` against ``t`` along the last axis.
    Shapes: y [..., k], t [k] -> [...]."""
    t = np.asarray(t, dtype=np.float64)
    centred = t - t.mean()
    with np.errstate(invalid="ignore"):  # -inf - -inf where a curve is exactly 0 in the window: NaN
        return ((y - y.mean(axis=-1, keepdims=True)) * centred).sum(axis=-1) / (centred**2).sum()


def fit_decay_rate(log_mu: Tensor, valid: Tensor | None = None, skip: int = 0) -> float:
    """:func:`fit_decay_rates` of one curve.  Shapes: log_mu ``[layer]``, valid ``[layer]`` -> float."""
    return float(fit_decay_rates(log_mu, valid, skip))


def late_rate(values, layers) -> float | None:
    """:func:`fit_decay_rate` of ``values`` over the chosen ``layers`` (None with fewer than 2).

    Shapes: values [layer + 1], layers [k] (indices) -> float.

    >>> round(late_rate([1.0, 0.5, 0.25, 0.125], [1, 2, 3]), 6)
    0.693147
    """
    rates = late_rates(np.asarray(values, dtype=np.float64)[None], layers)
    return None if rates is None else float(rates[0])


def late_rates(values: np.ndarray, layers) -> np.ndarray | None:
    """:func:`fit_decay_rates` of a batch of curves over the same chosen ``layers`` (None with fewer than 2).

    Shapes: values [curve, layer + 1], layers [k] (indices) -> [curve].
    """
    layers = np.unique(np.asarray(layers, dtype=np.int64))
    if len(layers) < 2:
        return None
    with np.errstate(divide="ignore"):  # a curve at exactly 0 (underflow) gives an infinite rate
        logs = np.log(np.asarray(values, dtype=np.float64)[..., layers])
    return -_slopes(logs, layers)


def mean_decay_rate(ratio: float, n_layers: int) -> float:
    """Average decay per layer of a curve that changed by ``ratio`` over ``n_layers`` layers:
    ``-log(ratio) / n_layers`` (at least one layer; infinite for a ratio of 0).

    >>> round(mean_decay_rate(0.25, 2), 6)
    0.693147
    """
    return -math.log(ratio) / max(1, n_layers) if ratio > 0 else math.inf


def quantile_band(curves: Tensor) -> Tensor:
    """10 %, 50 % and 90 % quantiles over samples.  Shapes: ``[sample, layer]`` -> ``[3, layer]``."""
    return curves.double().quantile(torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), dim=0)


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``x``, ties given their average rank (as ``pandas.Series.rank``)."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1, dtype=np.float64)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def rank_correlation(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson's on ranks, ties averaged); NaN pairs dropped.

    >>> round(rank_correlation([1, 2, 3, 4], [10, 20, 30, 25]), 12)
    0.8
    >>> rank_correlation([1, 2, float("nan"), 4], [3, 2, 5, 1])
    -1.0
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = ~(np.isnan(x) | np.isnan(y))
    rx, ry = _average_ranks(x[keep]), _average_ranks(y[keep])
    if len(rx) < 2 or rx.std() == 0 or ry.std() == 0:
        return math.nan
    return _pearson(rx, ry)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's correlation, centred and scaled before the products (pandas' own algorithm, so the book's
    correlations are those ``pandas.Series.corr`` gives, to the last bit); clipped to [-1, 1]."""
    a, b = a - a.mean(), b - b.mean()
    a, b = a / np.max(np.abs(a)), b / np.max(np.abs(b))
    n = len(a) - 1
    result = np.dot(a, b) / n / np.sqrt(np.dot(a, a) / n) / np.sqrt(np.dot(b, b) / n)
    return float(np.clip(result, -1.0, 1.0))


@dataclass(frozen=True)
class Proportion:
    """A Monte-Carlo fraction with its Wilson score interval."""

    fraction: float  # successes / trials
    low: float  # lower end of the interval
    high: float  # upper end of the interval
    trials: int  # number of independent draws


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> Proportion:
    """Wilson score interval (95% for z = 1.96)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}, {trials}")
    f = successes / trials
    centre = (f + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(f * (1 - f) / trials + z * z / (4 * trials**2)) / (1 + z * z / trials)
    return Proportion(f, max(0.0, centre - half), min(1.0, centre + half), trials)


BOOTSTRAP_RESAMPLES = 1000  # B: resamples behind every interval of an effect
BOOTSTRAP_SEED = 0  # the fixed seed of the resampled indices: every curve of one result draws the same ones
INTERVAL_LEVEL = 0.95  # the coverage of a bootstrap interval (percentile interval)


def resampled_medians(curves: np.ndarray, groups: np.ndarray | None = None,
                      resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """The median per layer over every (unit, sample) pair, over ``resamples`` two-level bootstrap
    resamples: the units (the weight seeds of initialized stacks; one unit for pretrained weights) drawn with
    replacement, and independently the groups of samples (the articles the samples were cut from; each sample
    its own group when ``groups`` is None) drawn with replacement, every sample of a drawn group taken.

    The design is crossed: every unit saw the same samples (the weight seed changes the weights, not the
    text), so a resample is the drawn units x the drawn groups' samples. It covers both variations a
    statement about initialized weights has: another draw of the weights and another draw of the text.

    The indices depend only on ``seed``, ``resamples``, the number of units and the groups, so two curves of
    one result (the same units and samples, in the same order) get the *same* indices: their resampled
    medians are paired, and a statistic of both (a ratio of their late rates) is a paired bootstrap.

    Shapes: curves [unit, layer + 1, sample] or [layer + 1, sample] (one unit), groups [sample] int or None
    -> [resample, layer + 1].
    """
    curves = np.asarray(curves, dtype=np.float64)
    if curves.ndim == 2:
        curves = curves[None]
    if curves.ndim != 3 or curves.shape[0] < 1 or curves.shape[2] < 1:
        raise ValueError(f"curves must be [unit, layer + 1, sample] with at least one unit and sample; "
                         f"got shape {curves.shape}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1; got {resamples}")
    n_units, n_layers, n_samples = curves.shape
    codes = np.arange(n_samples) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    if codes.shape != (n_samples,):
        raise ValueError(f"groups must give one group per sample ({n_samples}); got shape {np.shape(groups)}")
    if np.isnan(curves).any():
        raise ValueError("curves must hold no NaN (cut a shallower curve after its last layer)")
    n_groups = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    weights = np.empty((resamples, n_units * n_samples))  # how often each (unit, sample) pair is drawn
    for b in range(resamples):
        units = np.bincount(rng.integers(0, n_units, size=n_units), minlength=n_units)  # [unit]
        drawn = np.bincount(rng.integers(0, n_groups, size=n_groups), minlength=n_groups)[codes]  # [sample]
        weights[b] = np.outer(units, drawn).ravel()
    return _weighted_medians(curves.transpose(1, 0, 2).reshape(n_layers, -1), weights)


def _weighted_medians(values: np.ndarray, weights: np.ndarray, chunk_elements: int = 2**23) -> np.ndarray:
    """Per row of ``weights`` and per layer, the median of the multiset in which value j appears weights[., j]
    times — exactly ``np.median`` of that multiset (the mean of its two middle elements when it has an even
    number): each layer's values sorted once, the middle positions found on the cumulative weights.

    Shapes: values [layer, n], weights [resample, n] (non-negative integers) -> [resample, layer].
    """
    n_layers, n = values.shape
    order = np.argsort(values, axis=1)  # [layer, n]
    ranked = np.take_along_axis(values, order, axis=1)  # [layer, n]
    total = weights.sum(axis=1)  # [resample]
    lower, upper = (total + 1) // 2, total // 2 + 1  # 1-based middle positions (equal for an odd total)
    rows = np.arange(n_layers)[None, :]
    out = np.empty((len(weights), n_layers))
    step = max(1, chunk_elements // (n_layers * n))
    for start in range(0, len(weights), step):
        cumulative = np.cumsum(weights[start:start + step][:, order], axis=-1)  # [chunk, layer, n]
        first = np.argmax(cumulative >= lower[start:start + step, None, None], axis=-1)  # [chunk, layer]
        second = np.argmax(cumulative >= upper[start:start + step, None, None], axis=-1)
        out[start:start + step] = (ranked[rows, first] + ranked[rows, second]) / 2
    return out


@dataclass(frozen=True)
class Interval:
    """A statistic and its bootstrap percentile interval."""

    estimate: float  # the statistic on all samples
    low: float  # lower end (the (1 - level) / 2 quantile of the resampled statistic)
    high: float  # upper end
    resamples: int  # B, the resamples with a finite statistic


def percentile_interval(estimate: float, draws: np.ndarray, level: float = INTERVAL_LEVEL) -> Interval:
    """The percentile interval of the resampled statistic ``draws`` (non-finite draws left out).

    Shapes: draws [resample].

    >>> interval = percentile_interval(0.5, np.linspace(0.0, 1.0, 101), 0.9)
    >>> round(interval.low, 12), round(interval.high, 12), interval.resamples
    (0.05, 0.95, 101)
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}")
    finite = np.asarray(draws, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if not len(finite):
        return Interval(float(estimate), math.nan, math.nan, 0)
    low, high = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(estimate), float(low), float(high), len(finite))
