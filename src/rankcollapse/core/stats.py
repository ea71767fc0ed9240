"""Every statistic the book draws or decides with, in one place: decay-rate fits, quantile bands, rank
correlations and binomial intervals.

Used by: the theorem pages (:mod:`rankcollapse.theory.dynamics`, the band figures), the verdicts
(:mod:`rankcollapse.verdicts.rules`: the late rate, the mean rate), the mask-design page (rates, rank
correlations) and the Monte-Carlo fractions of the counterexample and Theorem 2 pages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


def fit_decay_rate(log_mu: Tensor, valid: Tensor | None = None, skip: int = 0) -> float:
    """Least-squares rate ``-d log(mu) / dt`` per layer over the valid layers ``t >= skip``: the one decay-rate
    fit of the package.

    Positive means collapse; ``exp(-rate)`` is the contraction factor per layer.

    Shapes: log_mu ``[layer]`` (natural log), valid ``[layer]`` bool (e.g. mu above the floor).
    """
    t = torch.arange(log_mu.shape[0], dtype=torch.float64)
    keep = t >= skip
    if valid is not None:
        keep = keep & valid
    if int(keep.sum()) < 2:
        raise ValueError(f"valid layers: {int(keep.sum())}; at least 2 are needed to fit a rate")
    tk, yk = t[keep], log_mu.to(torch.float64)[keep]
    slope = ((tk - tk.mean()) * (yk - yk.mean())).sum() / ((tk - tk.mean()) ** 2).sum()
    return float(-slope)


def late_rate(values, layers) -> float | None:
    """:func:`fit_decay_rate` of ``values`` over the chosen ``layers`` (None with fewer than 2).

    Shapes: values [layer + 1], layers [k] (indices) -> float.

    >>> round(late_rate([1.0, 0.5, 0.25, 0.125], [1, 2, 3]), 6)
    0.693147
    """
    layers = np.asarray(layers, dtype=np.int64)
    if len(layers) < 2:
        return None
    keep = np.zeros(len(values), dtype=bool)
    keep[layers] = True
    with np.errstate(divide="ignore"):  # a curve at exactly 0 outside ``layers``
        logs = np.log(np.asarray(values, dtype=np.float64))
    return fit_decay_rate(torch.from_numpy(logs), torch.from_numpy(keep))


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
