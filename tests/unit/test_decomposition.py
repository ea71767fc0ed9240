"""The decomposition of each layer's change of mu (value gain x attention contraction x the rest) and the
attention statistics, against references computed from the mask alone (uniform attention) and closed forms."""

import dataclasses

import numpy as np
import pytest
import torch

from rankcollapse import engine
from rankcollapse.core import masks, metrics

N_TOKENS, D_MODEL, N_HEADS = 12, 16, 4


def _uniform_layers(n_layers: int) -> list[engine.AttentionLayer]:
    """Random layers (with biases) whose queries and keys are 0: every row attends uniformly to its allowed
    keys."""
    return [dataclasses.replace(la, W_Q=torch.zeros_like(la.W_Q), W_K=torch.zeros_like(la.W_K))
            for la in engine.random_layers(n_layers, D_MODEL, N_HEADS, seed=3)]


def _x0(n_samples: int = 3) -> torch.Tensor:
    return torch.randn(n_samples, N_TOKENS, D_MODEL, generator=torch.Generator().manual_seed(5),
                       dtype=torch.float64)


def _reference_contractions(x0: torch.Tensor, layers: list[engine.AttentionLayer],
                            mask: torch.Tensor) -> np.ndarray:
    """Per layer and sample, ||P A Y|| / ||P Y|| with A the row-normalized mask and Y = P X sum_h W_V^h
    W_O^h, in plain numpy; P X is rescaled to unit norm every layer, so the values stay meaningful far below
    any floor.

    Shapes: x0 [sample, token, d_model] -> [layer, sample].
    """
    a = mask.numpy().astype(np.float64)
    a = a / a.sum(1, keepdims=True)  # [token, token]
    p = np.eye(N_TOKENS) - np.ones((N_TOKENS, N_TOKENS)) / N_TOKENS
    out = np.zeros((len(layers), x0.shape[0]))
    for s, x in enumerate(x0.numpy()):
        r = p @ x
        for t, la in enumerate(layers):
            w_vo = sum(la.W_V[h].numpy() @ la.W_O[h].numpy() for h in range(N_HEADS))  # [d_model, d_model]
            y = p @ r @ w_vo
            attended = p @ a @ y
            out[t, s] = np.linalg.norm(attended) / np.linalg.norm(y)
            r = attended / np.linalg.norm(attended)
    return out


@pytest.mark.parametrize("mask_name", masks.PAPER_MASKS)
def test_uniform_attention_contraction_equals_the_masks_own(mask_name):
    window = 2 if mask_name in masks.WINDOWED_MASKS else None
    layers = _uniform_layers(40)  # 40 layers of gain ~1/3: mu falls far below float64's floor
    config = engine.SANConfig(mask=mask_name, window=window)
    x0 = _x0()
    run = engine.run_san(x0, layers, (config,), attention_stats=True, metric_names=metrics.NORM_METRIC_NAMES)
    measured = run.metrics["attention_contraction"][1:, 0].numpy()  # [layer, sample]
    reference = _reference_contractions(x0, layers, config.build_mask(N_TOKENS))
    if mask_name == "complete":  # uniform attention over all tokens collapses X in one layer (c_A = 0)
        assert reference[0].max() < 1e-12
        measured, reference = measured[:1], reference[:1]  # after it only rounding noise is left to compare
    else:
        # below float64's floor
        assert (run.metrics["exact"] == 1).all() and run.metrics["mu"][-1].max() < 1e-18
    np.testing.assert_allclose(measured, reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize("mask_name,window", [("causal", None), ("sliding_window", 1),
                                              ("causal_sliding_window", 3)])
@pytest.mark.parametrize("exact_mu", [True, False])
def test_value_gain_times_contraction_is_the_layers_ratio_of_mu(mask_name, window, exact_mu):
    layers = engine.random_layers(4, D_MODEL, N_HEADS, seed=0)  # trained-like: queries and keys not 0
    config = engine.SANConfig(mask=mask_name, window=window, exact_mu=exact_mu)
    m = engine.run_san(_x0(), layers, (config,), attention_stats=True).metrics
    ratio = m["mu"][1:] / m["mu"][:-1]  # [layer, 1, sample]
    product = m["value_gain"][1:] * m["attention_contraction"][1:]
    torch.testing.assert_close(product, ratio, rtol=1e-10, atol=0)
    torch.testing.assert_close(m["norm_factor"][1:], torch.ones_like(ratio), rtol=1e-10, atol=0)
    assert (m["value_gain"][1:] < 0.8).all()  # the default init's value maps shrink token differences


@pytest.mark.parametrize("norm", ["unit", "layernorm"])
def test_norm_factor_is_the_norms_own_ratio_of_mu(norm):
    """Post-norm, no skip: X' = Norm(Attn(X)), so norm_factor = mu(Norm(Y)) / mu(Y) with Y = Attn(X)."""
    layers = engine.random_layers(3, D_MODEL, N_HEADS, seed=0)
    mask = masks.build_mask("causal", N_TOKENS)
    config = engine.SANConfig(mask="causal", norm=norm)
    x0 = _x0()
    m = engine.run_san(x0, layers, (config,), attention_stats=True).metrics
    x = x0
    for t, la in enumerate(layers, start=1):
        y = engine.attention_sublayer(x, la, mask)
        x = engine.attention_sublayer(x, la, mask, norm=norm)
        torch.testing.assert_close(m["norm_factor"][t, 0], metrics.mu(x) / metrics.mu(y), rtol=1e-10, atol=0)
    product = m["value_gain"] * m["attention_contraction"] * m["norm_factor"]
    torch.testing.assert_close(product[1:], m["mu"][1:] / m["mu"][:-1], rtol=1e-10, atol=0)


def test_uniform_causal_lambda2_is_one_half_and_complete_epsilon_is_one_over_n():
    configs = (engine.SANConfig(mask="causal"), engine.SANConfig(mask="complete"))
    m = engine.run_san(_x0(), _uniform_layers(2), configs, attention_stats=True).metrics
    causal, complete = (m[k][1:] for k in ("attention_lambda2", "attention_epsilon"))
    torch.testing.assert_close(causal[:, 0], torch.full_like(causal[:, 0], 0.5), rtol=1e-10, atol=0)
    torch.testing.assert_close(complete[:, 1], torch.full_like(complete[:, 1], 1 / N_TOKENS), rtol=1e-10,
                               atol=0)
    # causal: row i spreads 1/(i+1) over i+1 keys: epsilon 1/N, diagonal and largest weight the mean of
    # 1/(i+1)
    harmonic = sum(1 / (i + 1) for i in range(N_TOKENS)) / N_TOKENS
    for name, want in (("attention_epsilon", 1 / N_TOKENS), ("attention_diagonal", harmonic),
                       ("attention_max_weight", harmonic)):
        torch.testing.assert_close(m[name][1:, 0], torch.full_like(m[name][1:, 0], want), rtol=1e-10, atol=0)
    assert (m["attention_lambda2"][0] == 1).all()  # layer 0 reads as the identity layer


def test_attention_stats_leave_the_run_unchanged_and_are_off_by_default():
    layers = engine.random_layers(3, D_MODEL, N_HEADS, seed=0)
    configs = engine.config_grid(masks=(("causal", None), ("sliding_window", 1)), norms=("none", "layernorm"),
                                 skips=(False, True))
    plain = engine.run_san(_x0(), layers, configs).metrics
    stats = engine.run_san(_x0(), layers, configs, attention_stats=True).metrics
    assert not set(metrics.ATTENTION_METRIC_NAMES) & set(plain)
    for name, values in plain.items():
        # fused vs explicit softmax: rounding
        torch.testing.assert_close(stats[name], values, rtol=1e-9, atol=1e-14)


def test_attention_statistics_hand_example_and_bad_shape():
    A = torch.tensor([[[[0.5, 0.5, 0.0], [0.2, 0.8, 0.0], [0.1, 0.1, 0.8]]]])  # [sample, head, token, token]
    allowed = torch.tensor([[True, True, False], [True, True, False], [True, True, True]])
    s = metrics.attention_statistics(A, allowed)
    assert s["attention_epsilon"].item() == pytest.approx(0.1)
    assert s["attention_max_weight"].item() == pytest.approx((0.5 + 0.8 + 0.8) / 3)
    assert s["attention_diagonal"].item() == pytest.approx((0.5 + 0.8 + 0.8) / 3)
    # block lower-triangular: eigenvalues 0.8 and those of [[0.5, 0.5], [0.2, 0.8]] (1 and 0.3)
    assert s["attention_lambda2"].item() == pytest.approx(0.8)
    with pytest.raises(ValueError, match="A must have shape"):
        metrics.attention_statistics(torch.ones(3, 2))
