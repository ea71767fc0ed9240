"""The SAN engine against an independent per-sample, per-configuration loop (float64, tiny model)."""

import math

import pytest
import torch

from rankcollapse.core import masks
from rankcollapse.core import metrics
from rankcollapse.core import norms
from rankcollapse import engine

FLOAT_METRICS = ("mu", "relative_mu", "norm", "sigma_min", "mean_abs_cosine", "floor")


def naive_layer(x: torch.Tensor, layer: engine.AttentionLayer, mask: torch.Tensor,
                scale: float) -> torch.Tensor:
    """One sample, one head at a time, explicit formulas.  x [token, d_model] -> [token, d_model]."""
    n_tokens = x.shape[0]
    group = layer.n_heads // layer.W_K.shape[0]
    out = torch.zeros_like(x) if layer.b_O is None else layer.b_O.expand_as(x).clone()
    heads = []
    for h in range(layer.n_heads):
        q = x @ layer.W_Q[h] + (0 if layer.b_Q is None else layer.b_Q[h])
        k = x @ layer.W_K[h // group] + (0 if layer.b_K is None else layer.b_K[h // group])
        v = x @ layer.W_V[h // group] + (0 if layer.b_V is None else layer.b_V[h // group])
        if layer.q_gain is not None:
            q = q / torch.sqrt((q * q).mean(-1, keepdim=True) + layer.qk_norm_eps) * layer.q_gain
            k = k / torch.sqrt((k * k).mean(-1, keepdim=True) + layer.qk_norm_eps) * layer.k_gain
        if layer.rope_inv_freq is not None:  # rotate pairs (m, m + d/2) by angle pos * inv_freq[m]
            half = q.shape[-1] // 2
            for t in range(n_tokens):
                ang = t * layer.rope_inv_freq.to(torch.float64)
                c, s = torch.cos(ang), torch.sin(ang)
                for w in (q, k):
                    a, b = w[t, :half].clone(), w[t, half:].clone()
                    w[t, :half], w[t, half:] = a * c - b * s, b * c + a * s
        allowed = mask.clone()
        if layer.window is not None:
            for i in range(n_tokens):
                for j in range(n_tokens):
                    allowed[i, j] &= abs(i - j) <= layer.window
        A = torch.zeros(n_tokens, n_tokens, dtype=x.dtype)
        for i in range(n_tokens):
            s = (q[i] @ k.T) * scale
            if layer.score_bias is not None:
                s = s + layer.score_bias[h, i, :n_tokens]
            s = s[allowed[i]]
            w = torch.exp(s - s.max())
            A[i, allowed[i]] = w / w.sum()
        ctx = A @ v
        heads.append(ctx)
        if layer.W_O is not None:
            out = out + ctx @ layer.W_O[h]
    return torch.cat(heads, dim=-1) if layer.W_O is None else out


def naive_trained(y: torch.Tensor, trained: norms.TrainedNorm) -> torch.Tensor:
    """A model's own norm, written out: LayerNorm with gain and bias, or RMSNorm with its gain."""
    if trained.kind == "layernorm":
        c = y - y.mean(-1, keepdim=True)
        return c / torch.sqrt((c * c).mean(-1, keepdim=True) + trained.eps) * trained.weight + trained.bias
    return y / torch.sqrt((y * y).mean(-1, keepdim=True) + trained.eps) * trained.weight


def naive_step(x, layer, mask, scale, norm, skip):
    """One layer of one configuration; "model" at the layer's own position."""
    if norm == "model" and layer.norm_position == "pre":
        y = naive_layer(naive_trained(x, layer.norm), layer, mask, scale)
        y = y if layer.output_norm is None else naive_trained(y, layer.output_norm)
        return y + x if skip else y
    y = naive_layer(x, layer, mask, scale) + (x if skip else 0)
    return naive_trained(y, layer.norm) if norm == "model" else naive_norm(y, norm)


def naive_norm(y: torch.Tensor, norm: str) -> torch.Tensor:
    if norm == "unit":
        return y / y.norm(dim=-1, keepdim=True)
    if norm == "rms":
        return y / torch.sqrt((y * y).mean(-1, keepdim=True))
    if norm == "layernorm":
        c = y - y.mean(-1, keepdim=True)
        return c / torch.sqrt((c * c).mean(-1, keepdim=True) + norms.LAYERNORM_EPS)
    return y


def naive_run(x0, layers, configs):
    """metrics[name] [layer + 1, config, sample] from a plain loop."""
    out = {k: torch.zeros(len(layers) + 1, len(configs), x0.shape[0], dtype=torch.float64)
           for k in FLOAT_METRICS}
    for c, cfg in enumerate(configs):
        mask = cfg.build_mask(x0.shape[1])
        for s in range(x0.shape[0]):
            x = x0[s].clone()
            for t in range(len(layers) + 1):
                if t:
                    la = layers[t - 1]
                    scale = (la.scaling or 1 / math.sqrt(la.d_head)) if cfg.temperature is None \
                        else 1 / math.sqrt(cfg.temperature)
                    x = naive_step(x, la, mask, scale, cfg.norm, cfg.skip)
                m = metrics.all_metrics(x, dtype=torch.float64)
                for k in FLOAT_METRICS:
                    out[k][t, c, s] = m[k]
    return out


def assert_agree(result, reference, tol=1e-12):
    for k in FLOAT_METRICS:
        ref = reference[k]
        err = (result.metrics[k] - ref).abs().max().item()
        assert err <= tol * max(ref.abs().max().item(), 1e-300), (k, err)


@pytest.fixture
def x0():
    gen = torch.Generator().manual_seed(3)
    return torch.randn(3, 6, 8, generator=gen, dtype=torch.float64)  # [sample, token, d_model]


@pytest.mark.slow
def test_engine_matches_naive_loop_float64(x0):
    layers = engine.random_layers(3, 8, 2, seed=1)
    configs = engine.config_grid(masks=(("complete", None), ("causal_sliding_window", 2)),
                                 temperatures=(None, 0.25), norms=norms.NORM_NAMES, skips=(False, True))
    assert len(configs) == 40
    result = engine.run_san(x0, layers, configs)
    assert result.metrics["mu"].shape == (4, 40, 3)
    assert_agree(result, naive_run(x0, layers, configs))
    assert (result.metrics["numerical_rank"][0] == 6).all()


def test_family_features_match_naive_loop(x0):
    """GQA, RoPE, QK-norm, the model's own window, an additive score bias, no W_O."""
    gen = torch.Generator().manual_seed(5)
    r = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.5
    layer = engine.AttentionLayer(W_Q=r(4, 8, 2), W_K=r(2, 8, 2), W_V=r(2, 8, 2), b_Q=r(4, 2), b_K=r(2, 2),
                                  b_V=r(2, 2), scaling=0.7, q_gain=1 + r(2), k_gain=1 + r(2),
                                  rope_inv_freq=torch.tensor([1.0]), window=2, score_bias=r(4, 10, 10))
    configs = (engine.SANConfig(mask="causal"),
               engine.SANConfig(mask="complete", temperature=3.0, norm="rms", skip=True))
    result = engine.run_san(x0, [layer, layer], configs)
    assert_agree(result, naive_run(x0, [layer, layer], configs))
    unwindowed = engine.run_san(x0, [layer, layer], configs, use_model_windows=False)
    assert (unwindowed.metrics["mu"][1] - result.metrics["mu"][1]).abs().max() > 1e-6


def test_chunking_changes_nothing(x0):
    layers = engine.random_layers(2, 8, 2, seed=2)
    configs = engine.config_grid(norms=("none", "layernorm"))
    whole = engine.run_san(x0, layers, configs)
    chunked = engine.run_san(x0, layers, configs, memory_budget=1)
    assert chunked.samples_per_chunk == 1 and whole.samples_per_chunk >= 3
    # GEMM rounding varies with rows
    floor = 8 * torch.finfo(torch.float64).eps * whole.metrics["norm"].max().item()
    for k in FLOAT_METRICS:
        torch.testing.assert_close(chunked.metrics[k], whole.metrics[k], rtol=1e-13, atol=floor)


def test_mu_is_invariant_to_biases_under_pure_attention(x0):
    """A is row-stochastic: b_K shifts each logit row (no effect at any depth); b_V and b_O add one row to
    every token, which leaves mu unchanged after that layer but changes the next layer's logits."""
    with_bias = engine.random_layers(4, 8, 2, seed=4, bias=True)
    strip = lambda names: [engine.AttentionLayer(**{**la.__dict__, **dict.fromkeys(names)})
                           for la in with_bias]
    configs = engine.config_grid(masks=(("complete", None), ("causal", None)))
    a = engine.run_san(x0, with_bias, configs)
    no_key = engine.run_san(x0, strip(("b_K",)), configs)
    no_value = engine.run_san(x0, strip(("b_V", "b_O")), configs)
    floor = 1e-12 * a.metrics["norm"].max().item()  # complete-mask mu reaches the float64 floor
    torch.testing.assert_close(no_key.metrics["mu"], a.metrics["mu"], rtol=1e-12, atol=floor)
    torch.testing.assert_close(no_value.metrics["mu"][:2], a.metrics["mu"][:2], rtol=1e-12, atol=floor)
    assert (no_value.metrics["norm"][1] - a.metrics["norm"][1]).abs().min() > 1e-3  # the states differ
    assert (no_value.metrics["mu"][2:] - a.metrics["mu"][2:]).abs().max() > 1e-6  # and so does the next layer


def test_random_init_schemes_are_seeded_and_scaled():
    a, b = engine.random_layers(2, 64, 4, seed=7), engine.random_layers(2, 64, 4, seed=7)
    assert torch.equal(a[1].W_V, b[1].W_V) and not torch.equal(a[0].W_V, a[1].W_V)
    bound = 1 / math.sqrt(64)
    assert a[0].W_Q.abs().max() <= bound and a[0].W_Q.abs().max() > 0.95 * bound
    assert abs(a[0].W_Q.std().item() - bound / math.sqrt(3)) < 0.01 * bound * 64 ** 0.5 / 8
    hf = engine.random_layers(1, 64, 4, init="hf", seed=7)[0]
    assert abs(hf.W_K.std().item() - 0.02) < 0.001 and torch.count_nonzero(hf.b_Q) == 0


def test_float32_run_and_floor():
    x0 = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    r32 = engine.run_san(x0, engine.random_layers(2, 8, 2), (engine.SANConfig(),), dtype=torch.float32)
    r64 = engine.run_san(x0, engine.random_layers(2, 8, 2), (engine.SANConfig(),))
    assert r32.dtype == torch.float32
    torch.testing.assert_close(r32.metrics["floor"], r32.metrics["norm"] * torch.finfo(torch.float32).eps)
    floor = r32.metrics["floor"].max().item()  # complete-mask mu sinks towards the float32 floor
    torch.testing.assert_close(r32.metrics["mu"], r64.metrics["mu"], rtol=1e-4, atol=10 * floor)
    assert (r32.metrics["mu"] - r64.metrics["mu"]).abs().max() > 1e-12  # float32 really ran in float32


@pytest.mark.parametrize("kwargs, word", [
    (dict(norm="batchnorm"), "norm"), (dict(mask="star"), "mask"), (dict(temperature=-1.0), "temperature")])
def test_bad_config_names_the_parameter(kwargs, word):
    with pytest.raises(ValueError, match=word):
        engine.SANConfig(**kwargs)


def test_bad_run_arguments():
    x0 = torch.zeros(1, 4, 8, dtype=torch.float64)
    layers = engine.random_layers(1, 8, 2)
    with pytest.raises(ValueError, match="dtype"):
        engine.run_san(x0, layers, (engine.SANConfig(),), dtype=torch.float16)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            engine.run_san(x0, layers, (engine.SANConfig(),), device="cuda")
    with pytest.raises(ValueError, match="init"):
        engine.random_layers(1, 8, 2, init="xavier")


def test_attention_sublayer_matches_naive():
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    layer = engine.random_layers(1, 8, 4, seed=3)[0]
    mask = masks.causal_mask(5)
    got = engine.attention_sublayer(x, layer, mask)
    for s in range(2):
        torch.testing.assert_close(got[s], naive_layer(x[s], layer, mask, 1 / math.sqrt(2)), rtol=1e-12,
                                   atol=1e-14)


def test_cheap_metric_subset_equals_the_full_set(x0):
    layers = engine.random_layers(2, 8, 2, seed=6)
    configs = engine.config_grid(masks=(("causal", None),), norms=("none", "unit"))
    full = engine.run_san(x0, layers, configs)
    cheap = engine.run_san(x0, layers, configs, metric_names=metrics.NORM_METRIC_NAMES)
    assert set(cheap.metrics) == {*metrics.NORM_METRIC_NAMES, engine.EXACT_METRIC}
    # none, unit
    assert (cheap.metrics["exact"][:, 0] == 1).all() and (cheap.metrics["exact"][:, 1] == 0).all()
    for k in metrics.NORM_METRIC_NAMES:
        torch.testing.assert_close(cheap.metrics[k], full.metrics[k], rtol=1e-14, atol=0)
    with pytest.raises(ValueError, match="metric_names"):
        engine.run_san(x0, layers, configs, metric_names=("rank",))


def test_model_norm_on_fresh_layers_equals_layernorm(x0):
    """A fresh layer's own norm is LayerNorm with γ = 1, β = 0: norm "model" is norm "layernorm" there."""
    layers = engine.random_layers(3, 8, 2, seed=8)
    assert all(torch.equal(la.norm.weight, torch.ones(8, dtype=torch.float64)) for la in layers)
    configs = engine.config_grid(masks=(("causal", None),), norms=("model", "layernorm"), skips=(False, True))
    result = engine.run_san(x0, layers, configs)
    for k in FLOAT_METRICS:
        torch.testing.assert_close(result.metrics[k][:, :2], result.metrics[k][:, 2:], rtol=0, atol=0)


def test_pre_norm_layers_with_output_norm_match_naive_loop(x0):
    """norm "model" on pre-norm layers: X' = O(Attn(N(X))) [+ X], with trained gains and an output norm."""
    gen = torch.Generator().manual_seed(11)
    r = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.5
    rms = lambda: norms.TrainedNorm("rms", 1 + r(8), None, 1e-6)
    layers = [engine.AttentionLayer(W_Q=r(4, 8, 2), W_K=r(2, 8, 2), W_V=r(2, 8, 2), W_O=r(4, 2, 8), b_O=r(8),
                                    rope_inv_freq=torch.tensor([0.5]), norm=rms(), norm_position="pre",
                                    output_norm=rms() if i else None) for i in range(2)]
    post = engine.AttentionLayer(**{**layers[0].__dict__,
                                    "norm": norms.TrainedNorm("layernorm", 1 + r(8), r(8), 1e-5),
                                    "norm_position": "post"})
    configs = engine.config_grid(masks=(("complete", None), ("causal", None)), norms=("model",),
                                 skips=(False, True))
    stack = [*layers, post]
    assert_agree(engine.run_san(x0, stack, configs), naive_run(x0, stack, configs))


def test_model_norm_needs_layers_with_their_own_norm(x0):
    bare = [engine.AttentionLayer(**{**la.__dict__, "norm": None}) for la in engine.random_layers(1, 8, 2)]
    with pytest.raises(ValueError, match="norm 'model' needs layers"):
        engine.run_san(x0, bare, (engine.SANConfig(norm="model"),))
    with pytest.raises(ValueError, match="output_norm"):
        engine.AttentionLayer(**{**bare[0].__dict__, "output_norm": norms.fresh_layernorm(8)})


def _deep_run(mask, dtype, exact_mu, n_layers=60):
    """A float32/float64 pure-attention run of 60 random layers (d_model 32, 16 tokens, 3 samples)."""
    x0 = torch.randn(3, 16, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    layers = engine.random_layers(n_layers, 32, 4, seed=1)
    config = engine.SANConfig(mask=mask, window=2 if "window" in mask else None, exact_mu=exact_mu)
    return engine.run_san(x0, layers, (config,), dtype=dtype, metric_names=metrics.NORM_METRIC_NAMES).metrics


@pytest.mark.parametrize("mask", ["causal", "sliding_window"])
def test_exact_tracking_agrees_with_float64_and_keeps_decaying_below_the_floor(mask):
    exact32, direct32 = _deep_run(mask, torch.float32, True), _deep_run(mask, torch.float32, False)
    exact64, direct64 = _deep_run(mask, torch.float64, True), _deep_run(mask, torch.float64, False)
    assert (exact32["exact"] == 1).all() and (direct32["exact"] == 0).all()
    floor32 = direct32["floor"]  # eps(float32) ||X||
    above = direct64["mu"] > 10 * floor32  # [layer + 1, 1, sample]
    assert above[:4].all() and not above[-1].any()
    # above the float32 floor: float32 exact mu = float64 direct mu to a few float32 ulps
    rel = (exact32["mu"] / direct64["mu"] - 1).abs()[above]
    assert rel.max() <= 16 * torch.finfo(torch.float32).eps, rel.max()
    # below it: direct float32 mu sits on its floor, exact mu decays geometrically, like float64's exact mu
    assert (direct32["mu"][-10:] > 0.1 * floor32[-10:]).all()
    assert (exact32["mu"][-1] < 1e-12 * floor32[-1]).all()
    steps = exact32["mu"][31:].log().diff(dim=0)  # [layer, 1, sample] log contraction per layer
    assert (steps < 0).all() and (steps.mean(0) < -0.3).all()
    torch.testing.assert_close(exact32["mu"], exact64["mu"], rtol=1e-3, atol=0)
    torch.testing.assert_close(exact32["relative_mu"], exact32["mu"] / exact32["norm"], rtol=1e-12, atol=0)


def test_complete_mask_without_positions_stays_direct():
    """There the collapse runs through A itself (mu' ~ mu^2), lost with X's centred part: no exact flag."""
    run = _deep_run("complete", torch.float32, True, n_layers=4)
    assert (run["exact"] == 0).all() and (run["mu"][-1] <= 10 * run["floor"][-1]).all()  # on the floor


def test_exact_tracking_with_padding_biases_gqa_and_score_bias(x0):
    """Exact tracking equals the direct float64 run above the floor, whatever the layer adds to A and V."""
    gen = torch.Generator().manual_seed(12)
    r = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.5
    layer = engine.AttentionLayer(W_Q=r(4, 8, 2), W_K=r(2, 8, 2), W_V=r(2, 8, 2), W_O=r(4, 2, 8), b_Q=r(4, 2),
                                  b_K=r(2, 2), b_V=r(2, 2), b_O=r(8), q_gain=1 + r(2), k_gain=1 + r(2),
                                  rope_inv_freq=torch.tensor([1.0]), score_bias=r(4, 6, 6))
    token_mask = torch.ones(3, 6, dtype=torch.bool)
    token_mask[1, 4:] = False
    configs = (engine.SANConfig(mask="complete"), engine.SANConfig(mask="complete", exact_mu=False))
    result = engine.run_san(x0, [layer] * 4, configs, token_mask=token_mask)
    assert (result.metrics["exact"][:, 0] == 1).all() and (result.metrics["exact"][:, 1] == 0).all()
    for k in ("mu", "relative_mu"):
        torch.testing.assert_close(result.metrics[k][:, 0], result.metrics[k][:, 1], rtol=1e-10, atol=0)


@pytest.mark.slow
def test_settled_configurations_stop_on_the_floor_with_the_same_values_and_verdicts():
    """settle=3: a configuration not tracked exactly stops on a chunk once every sample sat within the floor
    band for 3 layers; every computed layer is bit-identical to the full run, the held layers repeat the last
    computed one and are flagged, exactly tracked curves run on, and the curve verdicts do not change."""
    from rankcollapse.experiments.table import config_labels, held_from, summarize
    from rankcollapse.verdicts.tables import table_verdicts

    x0 = torch.randn(6, 12, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    layers = engine.random_layers(40, 16, 4, seed=0)
    configs = (*engine.config_grid(masks=(("complete", None), ("causal", None)),
                                   norms=("none", "unit", "layernorm")),
               engine.SANConfig(mask="causal", exact_mu=False))  # pure attention not tracked: it underflows
    budget = 2 * engine.bytes_per_sample(12, layers[0], torch.float32)  # chunks of 2 samples: 3 chunks
    kw = dict(dtype=torch.float32, memory_budget=budget, metric_names=metrics.NORM_METRIC_NAMES)
    full = engine.run_san(x0, layers, configs, **kw)
    short = engine.run_san(x0, layers, configs, settle=3, **kw)
    held = short.metrics[engine.SETTLED_METRIC] == 1  # [layer + 1, config, sample]
    assert engine.SETTLED_METRIC not in full.metrics and short.samples_per_chunk == 2
    for k, values in full.metrics.items():
        assert torch.equal(short.metrics[k][~held], values[~held]), k  # computed layers: bit-identical
    settled_configs = {c for c in range(len(configs)) if held[:, c].any()}
    exact = {c for c in range(len(configs)) if (full.metrics[engine.EXACT_METRIC][:, c] == 1).all()}
    # some stop; exactly tracked ones never do
    assert settled_configs and exact and not settled_configs & exact
    for c in settled_configs:
        for s in range(6):
            first = int(held[:, c, s].int().argmax())  # the first held layer of this sample
            if not held[first, c, s]:
                continue
            assert held[first:, c, s].all()  # once stopped, stopped to the last layer
            assert torch.equal(short.metrics["mu"][first:, c, s],
                               short.metrics["mu"][first - 1, c, s].expand(41 - first))
            window = slice(first - 3, first)  # the 3 layers before: every sample of its chunk in the band
            chunk = slice(s - s % 2, s - s % 2 + 2)
            assert metrics.below_floor(short.metrics["mu"][window, c, chunk],
                                       short.metrics["floor"][window, c, chunk]).all()
    labels = config_labels(configs, "initialized")
    tables = [summarize(r.metrics, labels, 12, 16) for r in (full, short)]
    verdicts = [table_verdicts(t)[["verdict", "floor_layer"]] for t in tables]
    assert verdicts[0].equals(verdicts[1])
    named = [{k: v for k, v in c.items() if v is not None} for c in labels]
    unique = [c for c in range(len(configs)) if named.count(named[c]) == 1]  # causal pure shares its labels
    for c in unique:  # the pages' words: the first layer a configuration was held
        first = int(held[:, c].any(dim=1).int().argmax()) if held[:, c].any() else None
        assert held_from(tables[1], **named[c]) == first and held_from(tables[0], **named[c]) is None
    assert any(held_from(tables[1], **named[c]) for c in unique)  # the case the words are for occurs
    with pytest.raises(ValueError, match="settle must be None or an integer >= 1"):
        engine.run_san(x0, layers[:1], configs, settle=0)
    with pytest.raises(ValueError, match="settle cannot be combined with attention_stats"):
        engine.run_san(x0, layers[:1], configs, settle=2, attention_stats=True)


def test_mu_over_the_norm_is_no_number_once_the_states_underflow():
    """Exact tracking keeps μ (here e^-200) below the dtype's range, but ‖X‖_F comes from the states: once
    float32 states underflow to 0 the ratio is NaN (the sweep refuses it), not μ over the smallest float64."""
    from rankcollapse.engine.exact import exact_values

    R = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]], dtype=torch.float64) / math.sqrt(2)  # centred, unit norm
    log_scale = torch.tensor([-200.0], dtype=torch.float64)
    for scale, finite in ((0.0, False), (1e-39, False), (1e-30, True)):  # 1e-39: below float32's tiny
        X = torch.full((1, 2, 2), scale, dtype=torch.float32)
        norm = metrics.frobenius_norm(X.to(torch.float64), None)
        values = {"mu": torch.zeros(1), "relative_mu": torch.zeros(1), "norm": norm}
        out = exact_values(values, X, R, log_scale, None)
        assert math.isclose(float(out["mu"][0]), math.exp(-200), rel_tol=1e-12)
        assert bool(torch.isfinite(out["relative_mu"]).all()) is finite, scale
        if finite:
            assert math.isclose(float(out["relative_mu"][0]), math.exp(-200) / float(norm[0]), rel_tol=1e-12)
