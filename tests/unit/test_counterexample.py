"""Unit tests for rankcollapse.theory.counterexample: fixed points, basins, equilibria of every rank."""

import math

import pytest
import torch

from rankcollapse.theory import counterexample as ce
from rankcollapse.core import metrics, stats

W = ce.COUNTEREXAMPLE_W_V


def test_token1_limit_is_the_left_eigenvector():
    v1 = ce.token1_limit(W)
    torch.testing.assert_close(v1, torch.tensor([0.0, 1.0], dtype=torch.float64))
    X0 = torch.tensor([[[0.6, -0.8], [1.0, 0.0]], [[0.1, -0.9], [1.0, 0.0]]], dtype=torch.float64)
    final = ce.run_pair(X0, W, 80, keep_states=False).final
    torch.testing.assert_close(final[:, 0], torch.stack([v1, -v1]), rtol=0, atol=1e-12)  # sign of 4 a + b


def test_fixed_points_match_the_closed_form_and_the_map():
    points = ce.token2_fixed_points(W, ce.token1_limit(W))
    assert len(points) == 3
    # by hand: a != 0 forces lambda = 1/2 and 17 a^2 + 16 a + 3 = 0, b = -2 (1 + 2 a)
    roots = sorted([(-16 + math.sqrt(52)) / 34, (-16 - math.sqrt(52)) / 34])
    by_first = {round(q.point[0], 9): q for q in points}
    for a in roots:
        q = by_first[round(a, 9)]
        assert q.point[1] == pytest.approx(-2 * (1 + 2 * a), abs=1e-12)
        assert q.scale == pytest.approx(0.5, abs=1e-12)
    B, U = by_first[round(roots[1], 9)], by_first[round(roots[0], 9)]
    assert B.stable and not U.stable
    assert B.point == pytest.approx((-0.2585, -0.9660), abs=1e-4)
    for q in points:
        X = torch.tensor([[[0.0, 1.0], list(q.point)]], dtype=torch.float64)
        torch.testing.assert_close(ce.pair_map(X, W), X, rtol=0, atol=1e-12)


def test_multipliers_match_finite_differences():
    v1 = ce.token1_limit(W)
    for q in ce.token2_fixed_points(W, v1):
        assert ce.numerical_multiplier(W, v1, q.angle) == pytest.approx(q.multiplier, rel=1e-5)


def test_basin_of_B_is_the_arc_from_U_to_minus_e2():
    theta2 = torch.linspace(0, 2 * math.pi, 721, dtype=torch.float64)[:-1]
    keeps = ce.basin_map(W, torch.tensor([math.pi / 2], dtype=torch.float64), theta2, 200)[0]
    U = next(q for q in ce.token2_fixed_points(W, ce.token1_limit(W)) if not q.stable)
    inside = (theta2 > U.angle + 1e-3) & (theta2 < 1.5 * math.pi - 1e-3)
    outside = (theta2 < U.angle - 1e-3) | (theta2 > 1.5 * math.pi + 1e-3)
    assert bool(keeps[inside].all()) and not bool(keeps[outside].any())


def test_without_layernorm_both_tokens_meet_at_one_point():
    X0 = torch.tensor([[[0.3, 0.2], [-0.5, 0.9]]], dtype=torch.float64)
    final = ce.run_pair(X0, W, 80, layernorm=False, keep_states=False).final[0]
    meet = torch.tensor([0.0, 0.2 + 4 * 0.3], dtype=torch.float64)  # x1 W^t -> (0, b + 4a)
    torch.testing.assert_close(final, meet.expand(2, 2), rtol=0, atol=1e-12)


def test_full_rank_fraction_and_wilson_interval():
    p = ce.full_rank_fraction(W, 4000, 150, seed=0)
    assert 0.08 < p.fraction < 0.13 and p.low < p.fraction < p.high
    q = stats.wilson_interval(10, 100)
    assert (q.low, q.high) == pytest.approx((0.05523, 0.17437), abs=1e-4)  # textbook values
    with pytest.raises(ValueError, match="trials"):
        stats.wilson_interval(3, 0)


def test_rotation_invariance():
    Z = torch.tensor([[math.cos(0.7), -math.sin(0.7)], [math.sin(0.7), math.cos(0.7)]], dtype=torch.float64)
    X0 = torch.randn(6, 2, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert ce.rotation_invariance_gap(X0, W, Z, 60) < 1e-12


def test_equilibria_of_every_rank_are_fixed_points():
    W_V = ce.every_rank_value_matrix(3, 0.2, 4.0)
    equilibria = ce.every_rank_equilibria(6, 3, 0.2, 4.0)
    assert [int(metrics.numerical_rank(X)) for X in equilibria] == [1, 2, 3]
    for X in equilibria:
        torch.testing.assert_close(ce.star_map(X[None], W_V)[0], X, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="a="):
        ce.every_rank_value_matrix(3, 1.5, 4.0)
    with pytest.raises(ValueError, match="c="):
        ce.every_rank_equilibria(6, 3, 0.2, 0.1)


def test_bad_value_matrix_is_rejected():
    with pytest.raises(ValueError, match="W_V must be a finite 2 x 2 matrix"):
        ce.token1_limit(torch.eye(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="no real positive eigenvalue"):
        ce.token1_limit(torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64))  # a rotation
