"""Soft locality: ALiBi's slopes, the decay bias in the engine's attention against a naive float64 loop, and
the linear case's |λ₂| under a decay bias against an independent symmetric eigen-solve and closed forms."""

import math
from dataclasses import replace

import numpy as np
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


# ------------------------------------------------------------------ the sweeps' decay_slope


def _sweep(**fields):
    """A tiny float64 sweep of the theory's SAN (MiniLM's sizes, 2 samples x 12 tokens, 3 layers), its table
    indexed by (mask, layer, metric)."""
    from rankcollapse.experiments import sweep
    from rankcollapse.experiments.config import ExperimentConfig
    from rankcollapse.experiments.store import ResultStore
    import tempfile

    config = ExperimentConfig(model="pkg:minilm", weights=("initialized_nobias",), n_layers=3, n_samples=2,
                              n_tokens=12, dtype="float64", **fields)
    with tempfile.TemporaryDirectory() as root:
        table = sweep.run_experiment("fig2", config, ResultStore(root)).table
    return table.set_index(["mask", "window", "layer", "metric"])["median"]


def test_a_zero_slope_changes_nothing_and_a_steep_one_leaves_each_token_on_itself():
    """decay_slope 0 gives the bias-free sweep's numbers exactly; a slope of 60 puts e^-60 of the weight on
    the next token, so the complete mask's μ/‖X‖_F follows the no-mixing ``self`` mask's to ~1e-20 relative
    (while without the bias it collapses)."""
    plain = _sweep(masks=("complete", "causal"))
    zero = _sweep(masks=("complete", "causal"), decay_slope=0.0)
    assert zero.equals(plain)
    steep = _sweep(masks=("complete",), decay_slope=60.0)
    alone = _sweep(masks=("self",))
    for layer in (1, 2, 3):
        got = steep.xs(("complete", layer, "relative_mu"), level=("mask", "layer", "metric")).iloc[0]
        want = alone.xs(("self", layer, "relative_mu"), level=("mask", "layer", "metric")).iloc[0]
        bare = plain.xs(("complete", layer, "relative_mu"), level=("mask", "layer", "metric")).iloc[0]
        assert got == pytest.approx(want, rel=1e-12) and bare < want / 10


def test_decay_slope_is_checked_and_stored_only_when_given():
    from rankcollapse.experiments.config import ExperimentConfig, stored_parameters

    assert "decay_slope" not in stored_parameters(ExperimentConfig())
    assert stored_parameters(ExperimentConfig(weights=("initialized_nobias",), decay_slope=0.5))[
        "decay_slope"] == 0.5
    with pytest.raises(ValueError, match=r"decay_slope must be a finite number >= 0 or None, got -1"):
        ExperimentConfig(weights=("initialized",), decay_slope=-1)
    with pytest.raises(ValueError, match=r"decay_slope applies to initialized layers only: weights must be "
                                         r"among initialized, initialized_nobias"):
        ExperimentConfig(decay_slope=0.1)  # the default weights include the pretrained ones


# ------------------------------------------------------------------ the page


def test_the_page_runs_each_slope_beside_the_hard_masks_and_the_matched_windows_per_weight_seed():
    from rankcollapse.book import registry
    from rankcollapse.theory.soft_locality import matched_window

    runs = registry.configure("soft_locality", {
        "model": "pkg:minilm", "slopes": [1.0, 0.1], "n_layers": 8, "n_samples": 2, "n_weight_seeds": 2,
        "n_tokens": 32, "seed": 3, "overlap": "disjoint", "dtype": "float64", "device": "cpu"})
    assert list(runs) == ["hard_0", "decay0_0", "decay1_0", "hard_1", "decay0_1", "decay1_1"]
    hard, steep = runs["hard_1"].config, runs["decay1_1"].config
    assert hard.masks == ("complete", "causal", "sliding_window") and hard.decay_slope is None
    assert hard.windows == (matched_window(32, 1.0), matched_window(32, 0.1)) == (2, 15)
    assert steep.masks == ("complete", "causal") and steep.decay_slope == 1.0  # slopes in increasing order
    assert {r.config.weight_seed for r in runs.values()} == {3, 4} and hard.weights == ("initialized_nobias",)
    for bad in ([], [0.1, 0.1], [0.0], ["a"], 0.3):
        with pytest.raises(ValueError, match="slopes must be a non-empty list of distinct numbers > 0"):
            registry.configure("soft_locality", {"slopes": bad, "n_weight_seeds": 1, "n_tokens": 32})


def test_the_stored_page_sets_each_measured_factor_beside_the_decays_own_linear_case():
    """At the page's defaults (stored): the table's |λ₂| are the decay's (an eigen-solve of its attention),
    its windows the matched ones; each measured factor with an interval agrees with the linear case over the
    same layers (the prediction claim: its interval covers the prediction, or their logs agree within half)
    and the claims name the theory's setting and its weight seeds."""
    from rankcollapse.book import registry
    from rankcollapse.book.pages import soft_locality as page
    from rankcollapse.book.runner import page_parameters, repo_root
    from rankcollapse.theory.soft_locality import decay_second_eigenvalue, matched_window

    found, _ = registry.claims_at_defaults("soft_locality", reuse_recorded=False)
    rows = found["soft_locality"]
    assert [r.claim.split(" ")[0:3] for r in rows][0] == ["Pure", "attention", "with"] and len(rows) == 4
    assert all(r.setting.startswith("the theory's SAN: initialized, no biases; ") for r in rows)
    defaults = page_parameters(registry.page("soft_locality").path(repo_root()))
    curves = page.Curves(registry.shown_results("soft_locality", defaults))
    table = page.slope_table(curves)
    for row in table.itertuples():
        assert row.lambda2 == decay_second_eigenvalue(curves.n_tokens, row.slope, row.mask == "causal")
        assert (row.window == matched_window(curves.n_tokens, row.slope)) if row.mask == "complete" \
            else math.isnan(row.window)  # no causal window matches a decay
        if row.low == row.low:  # a fitted factor with its interval
            assert row.low <= row.factor <= row.high
            assert row.low <= row.predicted <= row.high \
                or abs(math.log(row.factor) / math.log(row.predicted) - 1) < 0.5
