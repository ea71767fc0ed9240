"""theory.rates and the reviewers' theory checks: the linear causal case's per-layer ratio against its
second eigenvalue, the complete mask's exact track against the direct one and its cubic convergence, the
exact Jordan ranks, the log(-log) slope; the rotated counterexample's identity and the jump along the
path of value matrices against its closed form."""

import math
from fractions import Fraction

import pytest
import torch

from rankcollapse.core import masks
from rankcollapse.theory import counterexample as ce
from rankcollapse.theory import rates
from rankcollapse.theory.dynamics import DynamicsConfig, SystemConfig, sample_system, simulate


def test_linear_causal_ratio_is_one_half_after_40_layers():
    X0, W_Q, W_K, W_V = sample_system(SystemConfig(n_tokens=16, d_model=8, n_layers=60, n_samples=4,
                                                   qk_weights="zero", value_weights="identity"))
    log_mu = simulate(X0, masks.causal_mask(16), W_Q, W_K, W_V, 60).log_mu_exact  # [sample, layer + 1]
    ratio = torch.exp(-rates.layer_rates(log_mu))  # mu(t + 1) / mu(t)  [sample, layer]
    # |lambda_2| of the uniform causal matrix: its diagonal 1/2
    assert (ratio[:, 40:] - 0.5).abs().max() < 1e-6
    # not from the start: the other eigenvalues 1/3, 1/4, ... fade
    assert (ratio[:, :3] - 0.5).abs().max() > 1e-6


def test_complete_mask_track_matches_direct_above_the_floor_and_converges_cubically():
    X0, W_Q, W_K, W_V = sample_system(SystemConfig(n_tokens=8, d_model=4, n_layers=9, n_samples=3))
    exact = rates.complete_mask_log_mu(X0, W_Q, W_K, W_V, 9, temperature=4.0)
    direct = simulate(X0, masks.complete_mask(8), W_Q, W_K, W_V, 9,
                      DynamicsConfig(temperature=4.0)).log_mu_exact
    above = direct[0] > math.log(1e-8)  # mu of X far above its rounding floor
    assert torch.allclose(exact[0, above], direct[0, above], rtol=1e-6)
    steps = rates.layer_rates(exact)  # [sample, layer]
    assert (steps[:, -1] / steps[:, -2] - 3).abs().max() < 1e-2  # mu(t + 1) ~ c mu(t)^3
    assert rates.loglog_slope(exact[0]) > 0.9


def test_loglog_slope_separates_exponential_from_doubly_exponential():
    t = torch.arange(30, dtype=torch.float64)
    assert rates.loglog_slope(-0.7 * t, first=15) < 0.1  # exponential: slope ~ 1/t
    assert rates.loglog_slope(-(1.5 ** t), first=10) == pytest.approx(math.log(1.5), rel=3e-3)  # log(b^t - 1)


@pytest.mark.parametrize("n_tokens, window", [(16, 2), (9, 3)])
def test_causal_window_has_one_jordan_chain(n_tokens, window):
    mask = masks.causal_sliding_window_mask(n_tokens, window)
    ranks = rates.jordan_ranks(mask, Fraction(1, window + 1), n_tokens)
    multiplicity = n_tokens - window  # rows i >= window have the diagonal 1 / (window + 1)
    assert ranks[1] == n_tokens - 1  # geometric multiplicity 1
    assert ranks[multiplicity] == n_tokens - multiplicity == ranks[-1]  # one chain of the full length
    assert ranks[multiplicity - 1] == n_tokens - multiplicity + 1


@pytest.mark.slow
def test_rotated_counterexample_is_the_rotated_trajectory():
    X0 = torch.randn(16, 2, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for angle in (0.3, 1.1, 2.5, 4.0):
        Z = ce.rotation_matrix(angle)
        assert ce.rotation_invariance_gap(X0, ce.COUNTEREXAMPLE_W_V, Z, 60) < 1e-12
        limit = torch.tensor([0.0, 1.0], dtype=torch.float64) @ Z
        token1 = ce.run_pair(X0[:1] @ Z, Z.T @ ce.COUNTEREXAMPLE_W_V @ Z, 80, keep_states=False).final[0, 0]
        assert torch.allclose(token1.abs(), limit.abs(), atol=1e-10)  # +-(0, 1) Z, by the sign of the start
        assert bool((limit.abs() > 0.29).all())  # no zero activation


def test_jump_along_the_value_path_is_where_the_second_fixed_point_appears():
    W0, W1 = torch.eye(2, dtype=torch.float64), ce.COUNTEREXAMPLE_W_V
    # W(s) = [[1 - s/2, 2 s], [0, 1]]: fixed points off (0, 1) exist iff (2 s)^2 + (s / 2)^2 > 1
    closed_form = 1 / math.sqrt(4.25)
    low, high = ce.locate_switch(
        lambda s: torch.tensor([ce.has_second_stable_point(ce.value_path(W0, W1, float(x))) for x in s]),
        0.0, 1.0, rounds=6)
    assert low <= closed_form <= high and high - low < 1e-7
    X0 = torch.tensor([[[0.0, 1.0], [-0.2585, -0.9660]]], dtype=torch.float64)
    mu = ce.path_mu(X0, W0, W1, torch.tensor([0.3, 0.45, 0.52, 1.0]), 400)[:, 0]
    assert float(mu[:2].max()) < 1e-12 and float(mu[2:].min()) > 1.0
    with pytest.raises(ValueError, match="false at low"):
        ce.locate_switch(lambda s: s > -1, 0.0, 1.0, rounds=2)
