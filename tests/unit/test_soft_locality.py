"""Soft locality: ALiBi's slopes, the decay bias in the engine's attention against a naive float64 loop, and
the linear case's |λ₂| under a decay bias against an independent symmetric eigen-solve and closed forms."""

import math
from dataclasses import replace

import pytest
import torch

from rankcollapse import engine
from rankcollapse.core import masks
from rankcollapse.engine.attention import attend, attention_bias, logit_scale
from rankcollapse.theory import soft_locality


def test_alibi_slopes_are_the_papers_and_blooms():
    assert masks.alibi_slopes(8).tolist() == [2.0 ** -k for k in range(1, 9)]
    assert masks.alibi_slopes(16).tolist() == [2.0 ** (-k / 2) for k in range(1, 17)]
    # 12 heads, not a power of two: the 8 slopes of 8 heads, then every other slope of 16 heads
    twelve = masks.alibi_slopes(12).tolist()
    assert twelve[:8] == masks.alibi_slopes(8).tolist()
    assert twelve[8:] == pytest.approx([2.0 ** (-k / 2) for k in (1, 3, 5, 7)], rel=1e-15)
    with pytest.raises(ValueError, match="n_heads must be an integer >= 1, got 0"):
        masks.alibi_slopes(0)


def test_decay_bias_pattern_and_bad_slopes():
    bias = masks.decay_bias(4, [0.5, 2.0])
    assert bias.shape == (2, 4, 4) and bias[1, 3, 0] == -6.0 and bias[0, 0, 3] == -1.5
    assert torch.equal(bias, bias.transpose(1, 2)) and bool((bias.diagonal(dim1=1, dim2=2) == 0).all())
    for bad in ([], [-1.0], [math.inf]):
        with pytest.raises(ValueError, match="slopes must be a non-empty list of finite numbers >= 0"):
            masks.decay_bias(4, bad)


@pytest.mark.parametrize("causal", [False, True])
def test_decay_bias_attention_equals_a_naive_float64_loop(causal):
    n_tokens, d_model, n_heads = 7, 8, 2
    layer = engine.random_layers(1, d_model, n_heads, seed=3, bias=False)[0]
    slopes = masks.alibi_slopes(n_heads)
    layer = replace(layer, score_bias=masks.decay_bias(n_tokens, slopes))
    mask = masks.causal_mask(n_tokens) if causal else masks.complete_mask(n_tokens)
    X = torch.randn(2, n_tokens, d_model, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    scale = logit_scale(layer, None)
    got = attend(X, layer, attention_bias(layer, mask, X.dtype), scale)  # [sample, token, d_model]
    want = torch.zeros_like(got)
    for s in range(2):
        for h in range(n_heads):
            q, k, v = X[s] @ layer.W_Q[h], X[s] @ layer.W_K[h], X[s] @ layer.W_V[h]
            for i in range(n_tokens):
                keys = [j for j in range(n_tokens) if mask[i, j]]
                logits = torch.stack([q[i] @ k[j] * scale - slopes[h] * abs(i - j) for j in keys])
                weights = torch.exp(logits - logits.max())
                context = sum(w * v[j] for w, j in zip(weights / weights.sum(), keys))
                want[s, i] += context @ layer.W_O[h]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_decay_second_eigenvalue_against_a_symmetric_eigen_solve():
    """Bidirectional: A = D^-1 K with K = exp(-m|i - j|) symmetric, so A's eigenvalues are those of the
    symmetric D^-1/2 K D^-1/2 (eigvalsh, another solver than the package's)."""
    for n_tokens, slope in ((16, 0.3), (48, 0.05), (48, 1.7)):
        K = torch.exp(masks.decay_bias(n_tokens, [slope])[0])
        d = K.sum(-1).rsqrt()
        moduli = torch.linalg.eigvalsh(d[:, None] * K * d[None, :]).abs().sort(descending=True).values
        assert soft_locality.decay_second_eigenvalue(n_tokens, slope) == pytest.approx(float(moduli[1]),
                                                                                       rel=1e-10)


def test_causal_decay_has_the_second_tokens_weight_on_itself():
    for slope in (0.0, 0.1, 1.0, 5.0):
        assert soft_locality.decay_second_eigenvalue(40, slope, causal=True) == pytest.approx(
            1 / (1 + math.exp(-slope)), rel=1e-12)


def test_a_steeper_decay_acts_like_a_narrower_window():
    widths = [soft_locality.matched_window(32, m) for m in (0.0, 0.05, 0.2, 0.8, 3.0, 20.0)]
    assert widths[0] == 31 and widths[-1] == 1  # no decay: the complete mask; a steep one: the ±1 window
    assert widths == sorted(widths, reverse=True) and len(set(widths)) >= 4
