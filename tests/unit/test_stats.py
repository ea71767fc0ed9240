"""core.stats: the one decay-rate fit, the mean rate, bands, rank correlations and intervals."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.core import stats


def test_late_rate_is_the_fit_over_the_chosen_layers():
    values = np.exp(-0.4 * np.arange(10.0))
    values[:3] = 1.0  # layers outside the chosen ones do not count
    assert stats.late_rate(values, [5, 6, 7, 8, 9]) == pytest.approx(0.4, rel=1e-12)
    assert stats.late_rate(values, [4]) is None


def test_mean_decay_rate_counts_at_least_one_layer_and_is_infinite_at_zero():
    assert stats.mean_decay_rate(math.exp(-1.5), 3) == pytest.approx(0.5)
    assert stats.mean_decay_rate(0.5, 0) == pytest.approx(math.log(2))
    assert stats.mean_decay_rate(0.0, 5) == math.inf


@pytest.mark.parametrize("seed", range(5))
def test_rank_correlation_is_pandas_spearman_bit_for_bit_with_ties_and_nans(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 5, 20).astype(float)  # many ties
    y = x + rng.normal(size=20)
    x[3], y[7] = np.nan, np.nan
    keep = ~(np.isnan(x) | np.isnan(y))
    # Spearman: Pearson on average ranks
    reference = pd.Series(x[keep]).rank().corr(pd.Series(y[keep]).rank())
    assert stats.rank_correlation(x, y) == reference  # bit for bit: the book's glued values must not move


def test_rank_correlation_of_a_constant_is_nan():
    assert math.isnan(stats.rank_correlation([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_quantile_band_is_the_10_50_90_quantiles():
    curves = torch.arange(11, dtype=torch.float64).repeat(2, 1).T  # [sample, layer]: 0..10 in every layer
    band = stats.quantile_band(curves)
    assert band.shape == (3, 2)
    assert band[:, 0].tolist() == pytest.approx([1.0, 5.0, 9.0])


def test_the_two_level_bootstrap_is_the_median_of_each_drawn_multiset():
    """Against a naive reference with the same draws: per resample the units, then the articles (each drawn
    article's every sample), and np.median over the drawn (unit, sample) pairs at each layer."""
    rng = np.random.default_rng(1)
    curves = rng.lognormal(size=(5, 13, 40))  # [unit, layer + 1, sample]
    groups = np.repeat(np.arange(10), 4)  # 4 samples per article
    fast = stats.resampled_medians(curves, groups, resamples=200, seed=3)
    draws = np.random.default_rng(3)
    reference = np.empty((200, 13))
    for b in range(200):
        units = draws.integers(0, 5, size=5)
        samples = np.concatenate([np.flatnonzero(groups == g) for g in draws.integers(0, 10, size=10)])
        reference[b] = np.median(curves[units][:, :, samples].transpose(1, 0, 2).reshape(13, -1), axis=-1)
    np.testing.assert_array_equal(fast, reference)
    with pytest.raises(ValueError, match="no NaN"):
        stats.resampled_medians(np.full((2, 3, 4), np.nan))
