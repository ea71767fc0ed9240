"""Unit tests for rankcollapse.theory.dynamics: the theory systems against independent references."""

import math

import pytest
import torch

from rankcollapse.theory import dynamics as dy
from rankcollapse.core import masks
from rankcollapse.core import metrics, stats


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_uniform_attention_complete_mask_collapses_in_one_step():
    X0 = torch.randn(3, 7, 4, generator=_gen(), dtype=torch.float64)
    zero = torch.zeros(4, 4, dtype=torch.float64)
    W_V = dy.sample_weights("gaussian", 4, 1, 3, _gen(1))
    tr = dy.simulate(X0, masks.complete_mask(7), zero, zero, W_V, 1)
    assert torch.all(metrics.mu(X0) > 1.0)
    assert torch.all(metrics.mu(tr.final) <= 1e-14)
    assert torch.all(tr.log_mu_exact[:, 1] < tr.log_mu_exact[:, 0] - 60)  # zero up to rounding of P A R
    torch.testing.assert_close(tr.attention_min, torch.full((3, 1), 1 / 7, dtype=torch.float64))


def test_attention_matrix_matches_explicit_softmax():
    X = torch.randn(1, 5, 3, generator=_gen(2), dtype=torch.float64)
    W_Q, W_K = (torch.randn(1, 3, 3, generator=_gen(s), dtype=torch.float64) for s in (3, 4))
    mask = masks.causal_sliding_window_mask(5, 1)
    A = dy.attention_matrix(X, W_Q, W_K, mask, temperature=4.0)[0]
    for i in range(5):
        allowed = [j for j in range(5) if mask[i, j]]
        logits = torch.tensor([float(X[0, i] @ W_Q[0] @ W_K[0].T @ X[0, j]) / 2.0 for j in allowed],
                              dtype=torch.float64)
        weights = torch.exp(logits - logits.max())
        weights = weights / weights.sum()
        for k, j in enumerate(allowed):
            assert float(A[i, j]) == pytest.approx(float(weights[k]), rel=1e-12)
        assert float(A[i].sum()) == pytest.approx(1.0, rel=1e-14)
        assert all(float(A[i, j]) == 0.0 for j in range(5) if not mask[i, j])


def test_exact_tracking_matches_direct_mu_above_the_floor():
    system = dy.SystemConfig(n_tokens=10, d_model=6, n_layers=70, n_samples=4, value_weights="gaussian",
                             seed=5)
    tr = dy.run_system(masks.causal_mask(10), system, dy.DynamicsConfig(temperature=6.0))
    direct = metrics.mu(tr.states)  # [sample, layer + 1]
    floor = metrics.rounding_floor(metrics.frobenius_norm(tr.states), torch.float64)
    above = direct > 1e4 * floor
    assert int(above.sum()) > 40 and int((~above).sum()) > 10  # both regimes occur in this run
    # the two paths differ by rounding only: a few floors of X, everywhere above and below
    assert float(((tr.log_mu_exact.exp() - direct).abs() / floor).max()) < 10.0
    far = direct > 1e8 * floor
    torch.testing.assert_close(tr.log_mu_exact[far], direct[far].log(), rtol=0, atol=1e-7)
    # below the floor the exact track keeps falling while the direct mu stalls
    assert float(tr.log_mu_exact[:, -1].max()) < float(direct[:, -1].log().min()) - 3


def test_orthogonal_value_matrices_keep_token_norms():
    W = dy.sample_weights("orthogonal", 5, 3, 2, _gen(7))
    eye = torch.eye(5, dtype=torch.float64).expand(2, 3, 5, 5)
    torch.testing.assert_close(W @ W.transpose(-1, -2), eye, rtol=0, atol=1e-13)
    X = torch.randn(2, 9, 5, generator=_gen(8), dtype=torch.float64)
    for t in range(3):
        torch.testing.assert_close(torch.linalg.vector_norm(X @ W[:, t], dim=-1),
                                   torch.linalg.vector_norm(X, dim=-1))


def test_linear_special_case_decays_at_the_second_eigenvalue():
    mask = masks.sliding_window_mask(8, 1)
    X0 = torch.randn(1, 8, 3, generator=_gen(9), dtype=torch.float64)
    zero, eye = torch.zeros(3, 3, dtype=torch.float64), torch.eye(3, dtype=torch.float64)
    tr = dy.simulate(X0, mask, zero, zero, eye, 200)
    A = mask.double() / mask.sum(-1, keepdim=True)
    lam2 = float(torch.linalg.eigvals(A).abs().sort(descending=True).values[1])
    measured = stats.fit_decay_rate(tr.log_mu_exact[0], skip=100)
    assert measured == pytest.approx(-math.log(lam2), rel=1e-6)
    assert dy.linear_rate(mask) == pytest.approx(-math.log(lam2), rel=1e-12)
    assert dy.linear_rate(masks.causal_mask(6)) == pytest.approx(math.log(2), rel=1e-12)
    assert dy.linear_rate(masks.complete_mask(6)) == math.inf


def test_theorem1_bound_holds_with_measured_epsilon():
    mask = masks.sliding_window_mask(12, 2)
    system = dy.SystemConfig(n_tokens=12, d_model=4, n_layers=60, n_samples=6, seed=1)
    X0, W_Q, W_K, W_V = dy.sample_system(system)
    tr = dy.simulate(X0, mask, W_Q, W_K, W_V, 60, dy.DynamicsConfig(temperature=4.0))
    bound = dy.theorem1_bound(X0, float(tr.attention_min.min()), masks.graph_radius(mask), 60)
    assert torch.all(tr.log_mu_exact <= bound.log() + 1e-9)


def test_fit_decay_rate_recovers_a_known_slope():
    log_mu = -0.3 * torch.arange(20, dtype=torch.float64) + 2.0
    assert stats.fit_decay_rate(log_mu) == pytest.approx(0.3, rel=1e-12)
    valid = torch.arange(20) < 2
    assert stats.fit_decay_rate(log_mu, valid) == pytest.approx(0.3, rel=1e-12)
    with pytest.raises(ValueError, match="at least 2"):
        stats.fit_decay_rate(log_mu, torch.arange(20) < 1)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: dy.DynamicsConfig(norm="sphere"), "norm"),
        (lambda: dy.DynamicsConfig(temperature=-1.0), "temperature"),
        (lambda: dy.SystemConfig(value_weights="haar"), "value_weights"),
        (lambda: dy.SystemConfig(n_tokens=0), "n_tokens"),
        (lambda: dy.SystemConfig(dtype="float16"), "dtype"),
        (lambda: dy.sample_weights("normal", 3, 1, 1, _gen()), "law"),
    ],
)
def test_bad_parameters_name_themselves(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_mask_without_self_loops_is_rejected():
    X0 = torch.randn(1, 3, 2, dtype=torch.float64)
    W = torch.eye(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="self-loop"):
        dy.simulate(X0, torch.zeros(3, 3, dtype=torch.bool), W, W, W, 1)


def test_seeded_systems_are_reproducible_and_hemisphere_holds():
    a = dy.sample_system(dy.SystemConfig(seed=3, hemisphere=True))
    b = dy.sample_system(dy.SystemConfig(seed=3, hemisphere=True))
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    assert bool((a[0][..., 0] > 0).all())


def test_summarize_collapse_linear_causal_and_a_mask_without_center():
    linear = dy.SystemConfig(n_tokens=6, d_model=3, n_layers=40, n_samples=2, qk_weights="zero",
                             value_weights="identity")
    s = dy.summarize_collapse(masks.causal_mask(6), linear)
    assert s.radius == 1 and s.epsilon == pytest.approx(1 / 6, rel=1e-12)  # last row: uniform over 6 tokens
    assert 10 ** dy.log10_bound_rate(s.epsilon, s.radius) == pytest.approx(-math.log(1 - 1 / 6), rel=1e-12)
    assert s.rate == pytest.approx(math.log(2), rel=0.05)  # the |lambda_2| = 1/2 mode dominates
    split = masks.dilated_window_mask(6, 2, 2)  # even offsets only: two parity classes, no center
    t = dy.summarize_collapse(split, linear)
    assert t.radius is None and math.isnan(dy.log10_bound_rate(t.epsilon, t.radius))
    assert float(t.mu_exact[:, -1].min()) > 1e-3  # collapses only inside each class
    with pytest.raises(ValueError, match="keep_states"):
        dy.summarize_collapse(split, linear, dy.DynamicsConfig(keep_states=False))
