"""Metrics on hand-computed examples, invariances, padding and batching."""

import math

import pytest
import torch

from rankcollapse.core import metrics

f64 = torch.float64

def _sigma_min(X: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Reference: the ``min(n_valid, d_model)``-th singular value of the valid rows, by a plain SVD."""
    if token_mask is not None:
        X = X[token_mask]
    return torch.linalg.svdvals(X.double())[..., -1]



def test_mu_of_rank_one_is_zero_and_invariant_to_a_common_vector():
    gen = torch.Generator().manual_seed(0)
    row = torch.randn(1, 5, generator=gen, dtype=f64)
    assert metrics.mu(torch.full((7, 5), 0.5, dtype=f64)).item() == 0.0  # exactly representable mean
    R = row.repeat(7, 1)
    assert metrics.mu(R).item() <= metrics.rounding_floor(metrics.frobenius_norm(R), f64).item()
    X = torch.randn(7, 5, generator=gen, dtype=f64)
    shift = torch.randn(1, 5, generator=gen, dtype=f64)
    assert metrics.mu(X + shift).item() == pytest.approx(metrics.mu(X).item(), rel=1e-12)


def test_mu_hand_example():
    X = torch.tensor([[0.0, 0.0], [2.0, 0.0], [4.0, 3.0]], dtype=f64)
    # mean (2, 1); residual rows (-2,-1), (0,-1), (2,2): squares 4+1+0+1+4+4 = 14
    assert metrics.mu(X).item() == pytest.approx(math.sqrt(14), rel=1e-15)
    assert metrics.frobenius_norm(X).item() == pytest.approx(math.sqrt(4 + 16 + 9), rel=1e-15)
    assert metrics.relative_mu(X).item() == pytest.approx(math.sqrt(14 / 29), rel=1e-15)


def test_numerical_rank_tolerance_follows_dtype():
    X = torch.tensor([[1.0, 0.0], [0.0, 1e-9]], dtype=f64)
    assert metrics.numerical_rank(X).item() == 2  # 1e-9 > 2 * eps64
    assert metrics.numerical_rank(X.float()).item() == 1  # 1e-9 < 2 * eps32: rounding in float32
    assert metrics.numerical_rank(X, rtol=1e-6).item() == 1


def test_smallest_singular_value_and_cosine_hand_examples():
    X = torch.tensor([[3.0, 0.0], [0.0, 2.0], [0.0, 0.0]], dtype=f64)
    assert _sigma_min(X).item() == pytest.approx(2.0)
    Y = torch.tensor([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0]], dtype=f64)
    c = 1 / math.sqrt(2)
    # ordered pairs: (0,1) c, (0,2) 1, (1,2) c, each twice
    assert metrics.mean_abs_cosine(Y).item() == pytest.approx((2 * c + 1) / 3)


def test_padding_rows_are_excluded():
    X = torch.tensor([[1.0, 0.0], [3.0, 2.0], [100.0, -50.0]], dtype=f64)
    keep = torch.tensor([True, True, False])
    assert metrics.mu(X, keep).item() == pytest.approx(metrics.mu(X[:2]).item(), rel=1e-15)
    assert metrics.frobenius_norm(X, keep).item() == pytest.approx(metrics.frobenius_norm(X[:2]).item())
    assert metrics.mean_abs_cosine(X, keep).item() == pytest.approx(metrics.mean_abs_cosine(X[:2]).item())
    wide = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 9.0]], dtype=f64)
    # valid rows span 2 dims: sigma_min is the 2nd singular value (1), not a padding zero
    assert _sigma_min(wide, torch.tensor([True, True, False])).item() == pytest.approx(1.0)
    assert metrics.numerical_rank(wide, torch.tensor([True, True, False])).item() == 2


def test_batched_leading_axes_match_per_item_and_all_metrics_agree():
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(3, 4, 6, 5, generator=gen, dtype=torch.float32)  # [config, sample, token, d_model]
    keep = torch.ones(3, 4, 6, dtype=torch.bool)
    keep[1, 2, 4:] = False
    out = metrics.all_metrics(X, keep)
    assert set(out) == set(metrics.METRIC_NAMES)
    for value in out.values():
        assert value.shape == (3, 4)
    for c in range(3):
        for s in range(4):
            x, k = X[c, s][keep[c, s]], None
            assert out["mu"][c, s].item() == pytest.approx(metrics.mu(x, k).item(), rel=1e-12)
            assert out["sigma_min"][c, s].item() == pytest.approx(_sigma_min(x).item(), rel=1e-10)
            assert out["numerical_rank"][c, s].item() == metrics.numerical_rank(x).item()
            assert out["mean_abs_cosine"][c, s].item() == pytest.approx(metrics.mean_abs_cosine(x).item(),
                                                                        rel=1e-12)
    assert out["mu"].dtype == f64


def test_rounding_floor_and_float32_collapse_sits_at_it():
    assert metrics.rounding_floor(2.0, torch.float64).item() == pytest.approx(2 * 2.0**-52)
    # uniform attention on identical float32 rows: what is left of mu is float32 rounding, at the floor
    gen = torch.Generator().manual_seed(2)
    rows = torch.randn(1, 16, generator=gen).repeat(8, 1)
    weights = torch.softmax(torch.randn(8, 8, generator=gen), dim=-1)  # row-stochastic, float32
    X = weights @ rows
    m = metrics.all_metrics(X, dtype=torch.float32)
    assert 0 < m["mu"].item() <= 10 * m["floor"].item()


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="X must have shape"):
        metrics.mu(torch.ones(3))
    with pytest.raises(ValueError, match="floating-point"):
        metrics.mu(torch.ones(3, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="token_mask must be a bool tensor of shape"):
        metrics.mu(torch.ones(3, 2), torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match="dtype must be a floating-point"):
        metrics.rounding_floor(1.0, torch.int32)


def _with_spectrum(singular_values: list[float], n_tokens: int, d_model: int, seed: int) -> torch.Tensor:
    """U diag(s) V^T with random orthonormal U, V.  Shapes: -> [n_tokens, d_model]."""
    gen = torch.Generator().manual_seed(seed)
    k = min(n_tokens, d_model)
    U = torch.linalg.qr(torch.randn(n_tokens, k, generator=gen, dtype=f64))[0]
    V = torch.linalg.qr(torch.randn(d_model, k, generator=gen, dtype=f64))[0]
    s = torch.tensor(singular_values + [0.0] * (k - len(singular_values)), dtype=f64)
    return (U * s) @ V.T


@pytest.mark.parametrize("dtype", [torch.float32, f64])
@pytest.mark.parametrize("shape", [(16, 24), (24, 16)])
def test_gram_spectrum_agrees_with_the_svd_and_gives_the_same_rank(dtype, shape):
    n, d = shape
    k = min(n, d)
    gen = torch.Generator().manual_seed(3)
    cases = [torch.randn(n, d, generator=gen, dtype=f64)]  # random, full rank
    for tail in (1e-2, 1e-4, 1e-6, 1e-9, 1e-13, 1e-17):  # near-rank-deficient: one tiny singular value
        cases.append(_with_spectrum([1.0] * (k - 1) + [tail], n, d, seed=len(cases)))
    for noise in (1e-3, 1e-7, 1e-12):  # collapsing states: one common row plus small noise
        row = torch.randn(1, d, generator=gen, dtype=f64)
        cases.append(row.repeat(n, 1) + noise * torch.randn(n, d, generator=gen, dtype=f64))
    cases.append(_with_spectrum([3.0, 1.0], n, d, seed=99))  # exactly rank two
    X = torch.stack(cases).to(dtype)  # states computed in `dtype`, measured in float64
    out = metrics.all_metrics(X)
    Xd = X.to(f64)
    svd = torch.linalg.svdvals(Xd)  # [case, k]
    rtol = metrics.rank_tolerance(n, d, dtype)
    assert torch.equal(out["numerical_rank"], (svd > rtol * svd[:, :1]).sum(-1))
    assert torch.allclose(out["sigma_min_floor"], rtol * svd[:, 0], rtol=1e-12)
    above = svd[:, -1] > out["sigma_min_floor"]
    # within GRAM_RESOLUTION relative, or the SVD's own accuracy (n + d) eps64 sigma_max
    # (two SVDs differ by that)
    tol = 2 * metrics.GRAM_RESOLUTION * svd[:, -1] + (n + d) * torch.finfo(f64).eps * svd[:, 0]
    assert ((out["sigma_min"] - svd[:, -1]).abs()[above] <= tol[above]).all()
    # below its floor sigma_min is rounding noise either way: both values stay below the floor
    assert (out["sigma_min"][~above] < out["sigma_min_floor"][~above]).all()
    assert metrics.numerical_rank(X).tolist() == out["numerical_rank"].tolist()


def test_float64_states_below_the_gram_resolution_get_the_svd_values():
    X = torch.stack([_with_spectrum([1.0] * 15 + [1e-9], 16, 24, seed=s) for s in range(3)])
    sv = metrics.all_metrics(X)["sigma_min"]
    # sqrt of a Gram eigenvalue could not resolve 1e-9 (its error is about 1e-7); the SVD does
    assert torch.allclose(sv, torch.linalg.svdvals(X)[:, -1], rtol=1e-6)
    assert torch.allclose(sv, torch.full((3,), 1e-9, dtype=f64), rtol=1e-4)


def test_relative_floor_is_eps_not_eps_times_norm():
    X = 1e3 * torch.randn(4, 8, 6, generator=torch.Generator().manual_seed(4))  # ||X||_F ~ 7e3, float32
    for out in (metrics.norm_metrics(X), metrics.all_metrics(X)):
        eps = torch.finfo(torch.float32).eps
        assert torch.equal(out["relative_floor"], torch.full((4,), eps, dtype=f64))
        assert torch.allclose(out["floor"], eps * out["norm"])  # mu's floor scales with ||X||_F ...
        assert (out["floor"] > 1e3 * out["relative_floor"]).all()  # ... relative_mu's does not
    assert metrics.norm_metrics(X.double())["relative_floor"][0].item() == torch.finfo(f64).eps


def test_every_floor_is_a_recorded_metric_and_flags_values_near_it():
    assert set(metrics.FLOOR_OF) <= set(metrics.METRIC_NAMES)
    assert set(metrics.FLOOR_OF.values()) <= set(metrics.METRIC_NAMES)
    cheap = {m for m in metrics.FLOOR_OF if m in metrics.NORM_METRIC_NAMES}
    assert {metrics.FLOOR_OF[m] for m in cheap} <= set(metrics.NORM_METRIC_NAMES)
    # exactly rank one in float64: sigma_min is far below its floor and is flagged
    X = torch.ones(5, 3, dtype=f64) * torch.tensor([1.0, 2.0, 3.0], dtype=f64)
    out = metrics.all_metrics(X)
    assert out["numerical_rank"].item() == 1
    assert metrics.below_floor(out["sigma_min"], out["sigma_min_floor"]).item()
    assert not metrics.below_floor(out["relative_mu"] + 1e-3, out["relative_floor"]).item()


def test_full_rank_and_collapsed_float32_states_need_no_svd(monkeypatch):
    gen = torch.Generator().manual_seed(5)
    full = torch.randn(3, 16, 24, generator=gen)
    collapsed = (torch.randn(3, 1, 24, generator=gen).repeat(1, 16, 1)
                 + 1e-9 * torch.randn(3, 16, 24, generator=gen))
    monkeypatch.setattr(metrics, "_singular_values", lambda X: pytest.fail(f"SVD of {X.shape[0]} samples"))
    assert metrics.all_metrics(full)["numerical_rank"].tolist() == [16, 16, 16]
    out = metrics.all_metrics(collapsed)  # sigma_min certified below its floor: no SVD needed
    assert out["numerical_rank"].tolist() == [1, 1, 1]
    assert metrics.below_floor(out["sigma_min"], out["sigma_min_floor"]).all()


def test_the_small_lapack_problems_run_on_one_cpu_thread_and_the_count_is_restored(monkeypatch):
    """eigvalsh and svdvals of the batched 128 x 128 problems run single-threaded on CPU (two threads only
    wait on each other when the cores are shared); the caller's thread count comes back, even on error."""
    seen = []
    eigvalsh, svdvals = torch.linalg.eigvalsh, torch.linalg.svdvals
    monkeypatch.setattr(torch.linalg, "eigvalsh",
                        lambda *a, **k: seen.append(torch.get_num_threads()) or eigvalsh(*a, **k))
    monkeypatch.setattr(torch.linalg, "svdvals",
                        lambda *a, **k: seen.append(torch.get_num_threads()) or svdvals(*a, **k))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        X = torch.randn(3, 16, 8, dtype=torch.float32)
        metrics.all_metrics(X)
        metrics.all_metrics(X.double())  # float64 states: the SVD route
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
        monkeypatch.setattr(torch.linalg, "svdvals", lambda *a, **k: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            metrics.all_metrics(X.double())
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
