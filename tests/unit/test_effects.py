"""Effect sizes with paired bootstrap intervals, and the robustness of verdicts over the thresholds' grid."""

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.book.claims_table import claims_markdown
from rankcollapse.book.pages._common import against, paired_sides
from rankcollapse.core import stats
from rankcollapse.experiments.sample_values import CURVE_COLUMNS, SampleValues, from_bytes, to_bytes
from rankcollapse.verdicts import claims, effects, robustness
from rankcollapse.verdicts.rules import DEFAULTS, Thresholds

EPS = np.finfo(np.float64).eps
LAYERS = np.arange(13)


def _result(curves: dict[str, np.ndarray],
            scale: np.ndarray | None = None) -> tuple[pd.DataFrame, SampleValues]:
    """A tidy table (medians per layer, computed here with numpy) and the SampleValues of the same curves.

    Shapes: each curve [layer + 1, sample] of μ; ``scale`` [layer + 1, sample] the norm of every curve
    (default 1, so μ = μ/‖X‖_F).
    """
    rows, labels = [], []
    scale = np.ones_like(next(iter(curves.values()))) if scale is None else scale
    for norm, curve in curves.items():
        label = {"weights": "initialized", "variant": "SAN", "mask": "causal", "window": None,
                 "temperature": None, "norm": norm, "skip": False}
        labels.append(label)
        for metric, values in (("relative_mu", curve / scale), ("relative_floor", np.full_like(curve, EPS)),
                               ("mu", curve), ("norm", scale), ("floor", np.full_like(curve, EPS))):
            for layer in LAYERS:
                median = float(np.median(values[layer]))
                rows.append({**label, "layer": int(layer), "metric": metric, "mean": median, "median": median,
                             "q10": median, "q90": median, "n_samples": curve.shape[1]})
    stacked = np.stack(list(curves.values()))  # [curve, layer + 1, sample]
    samples = SampleValues(pd.DataFrame(labels, columns=list(CURVE_COLUMNS)),
                           {"relative_mu": stacked / scale, "mu": stacked,
                            "norm": np.broadcast_to(scale, stacked.shape).copy()})
    return pd.DataFrame(rows), samples


def _noisy(rate: float, n_samples: int = 200, seed: int = 1) -> np.ndarray:
    """Per-sample curves 0.5 e^(-rate layer) times a per-sample, per-layer log-normal factor (sd 0.3)."""
    rng = np.random.default_rng(seed)
    return 0.5 * np.exp(-rate * LAYERS)[:, None] * np.exp(0.3 * rng.normal(size=(len(LAYERS), n_samples)))


def test_resampled_medians_are_paired_across_curves():
    base = _noisy(0.2)
    scaled = base * np.exp(-0.1 * LAYERS)[:, None]  # every sample scaled by the same per-layer factor
    a, b = stats.resampled_medians(base, resamples=50), stats.resampled_medians(scaled, resamples=50)
    assert a.shape == (50, 13)
    # same indices: the factor passes through
    np.testing.assert_allclose(b, a * np.exp(-0.1 * LAYERS), rtol=1e-12)


def test_paired_late_factor_is_exact_when_the_configuration_is_the_baseline_times_a_factor():
    base = _noisy(0.2)
    table, samples = _result({"none": base, "model": base * np.exp(0.15 * LAYERS)[:, None]})
    config = effects.side(table, samples, "LN", norm="model")
    baseline = effects.side(table, samples, "pure", norm="none")
    effect = effects.late_factor(config, baseline)
    # per-layer factors e^-0.05 over e^-0.2: e^0.15 on the full sample and in every resample (a paired
    # bootstrap)
    assert effect.estimate == pytest.approx(math.exp(0.15), rel=1e-9)
    assert (effect.low == pytest.approx(math.exp(0.15), rel=1e-9)
            and effect.high == pytest.approx(math.exp(0.15), rel=1e-9))
    assert effects.outcome(effect, +1) == "holds" and effects.outcome(effect, -1) == "does not hold"


def test_independent_noise_gives_an_interval_that_covers_the_true_factor_and_tightens_with_samples():
    widths = []
    for n in (50, 800):
        table, samples = _result({"none": _noisy(0.2, n, seed=2), "model": _noisy(0.1, n, seed=3)})
        effect = effects.late_factor(effects.side(table, samples, "LN", norm="model"),
                                     effects.side(table, samples, "pure", norm="none"))
        assert effect.low < math.exp(0.1) < effect.high
        widths.append(effect.high - effect.low)
    assert widths[1] < widths[0] / 2  # 16x the samples: about a quarter of the width


def test_a_tiny_effect_with_a_tight_interval_is_tiny_and_one_across_1_is_no_effect():
    tight = effects.Effect("x", 1.03, 1.02, 1.04)
    assert effects.outcome(tight, +1) == "tiny" and effects.outcome(tight, -1) == "tiny"
    assert effects.outcome(effects.Effect("x", 1.3, 0.9, 1.6), +1) == "no effect"
    assert effects.outcome(effects.Effect("x", 1.03, 1.02, 1.04), +1,
                           Thresholds(tiny_effect=1.025)) == "holds"
    assert effects.outcome(effects.Effect("x", 3.5, None, None), 0) == "does not hold"  # outside SAME_SCALE
    assert effects.outcome(effects.Effect("x", 1.5, 1.2, 1.9), 0) == "holds"


def test_without_samples_the_effect_has_no_interval_and_says_so():
    base = _noisy(0.2)
    table, _ = _result({"none": base, "model": base * np.exp(0.15 * LAYERS)[:, None]})
    effect = effects.late_factor(effects.side(table, None, "LN", norm="model"),
                                 effects.side(table, None, "pure", norm="none"))
    assert effect.low is None and effect.estimate == pytest.approx(math.exp(0.15), rel=1e-9)
    assert "[" not in effect.text and effects.NO_INTERVAL in effect.words  # the legend says it once
    cell = claims.effect_cell("causal", effect, +1)
    assert claims.effect_claim("c", "s", "m", [cell]).verdict == "holds"


def test_the_change_over_depth_is_the_last_layer_over_the_embeddings_paired_with_its_scale():
    """σ_min over ‖X‖_F where every sample's norm is its σ_min times e^(0.05 layer): the scale-free change is
    e^(-0.6) in every resample (paired), while σ_min's own change varies; the metric missing from the stored
    samples gives no interval, a curve in the floor band no number."""
    sigma = _noisy(0.1)
    table, samples = _result({"none": sigma}, scale=sigma * np.exp(0.05 * LAYERS)[:, None])
    curve, norm = (effects.side(table, samples, "σ_min", metric=m, norm="none") for m in ("mu", "norm"))
    plain = effects.depth_change(curve, "σ_min")
    assert plain.estimate == pytest.approx(np.median(sigma[-1]) / np.median(sigma[0]), rel=1e-12)
    assert plain.low < plain.estimate < plain.high and plain.high / plain.low > 1.1
    free = effects.depth_change(curve, "σ_min / ‖X‖_F", norm)
    assert (free.estimate, free.low, free.high) == pytest.approx((math.exp(-0.6),) * 3, rel=1e-9)
    assert free.name == "σ_min / ‖X‖_F, last layer over the embeddings"
    bare = SampleValues(samples.labels, {"norm": samples.values["norm"]})  # no per-sample μ
    unpaired = effects.side(table, bare, "σ_min", metric="mu", norm="none")
    assert effects.depth_change(unpaired, "σ_min").low is None
    table, samples = _result({"none": np.full((13, 20), 2 * EPS)})
    on_floor = effects.depth_change(effects.side(table, samples, "flat", metric="mu", norm="none"), "μ")
    assert math.isnan(on_floor.estimate) and "flat on the rounding floor" in on_floor.reason


def test_a_curve_on_the_floor_gives_no_effect_to_tell():
    table, samples = _result({"none": np.full((13, 20), 2 * EPS), "model": _noisy(0.1, 20)})
    effect = effects.late_factor(effects.side(table, samples, "LN", norm="model"),
                                 effects.side(table, samples, "pure", norm="none"))
    assert math.isnan(effect.estimate) and "on the rounding floor" in effect.reason
    assert effects.outcome(effect, +1) == "cannot tell"


def test_no_effect_is_computed_from_a_fit_window_that_reaches_the_band():
    """A curve that falls into the band after two layers has no factor: the effect cannot tell (it used to be
    read as a mean rate down to the floor, a ratio of rounding noise)."""
    fast = np.repeat(np.array([0.9, 0.01, 1e-12] + [1e-16] * 10)[:, None], 20, axis=1)
    table, samples = _result({"none": fast, "model": _noisy(0.1, 20)})
    effect = effects.late_factor(effects.side(table, samples, "LN", norm="model"),
                                 effects.side(table, samples, "pure", norm="none"))
    assert math.isnan(effect.estimate) and "pure on the rounding floor from layer 3 on" in effect.reason


def _slow_decay_claim(ratio: float) -> claims.Claim:
    """A claim "the curve collapses" on a curve that ends at ``ratio`` of its layer-1 value, without
    per-sample values (so the published COLLAPSE_RATE decides: a factor below e^-0.05 collapses)."""
    rate = -math.log(ratio) / 11
    table, _ = _result({"model": np.repeat((0.5 * np.exp(-rate * (LAYERS - 1)))[:, None], 3, axis=1)})
    curve = effects.side(table, None, "LN", norm="model")
    return robustness.robust(lambda t: claims.collapse_claim("it collapses", "test", "m", {"causal": curve},
                                                             t))


def test_moving_one_threshold_flips_a_synthetic_verdict_and_the_table_says_borderline():
    assert _slow_decay_claim(0.2).verdict == "holds"  # rate -log(0.2)/11 = 0.146 > 0.05: collapses
    # rate 0.046 < 0.05: not resolved (cannot tell), but collapses at a cut of 0.025
    claim = _slow_decay_claim(0.6)
    assert claim.verdict == "cannot tell"
    assert claim.robustness == "borderline — flips when COLLAPSE_RATE = 0.025 (→ holds)"
    assert 'title="borderline — flips when COLLAPSE_RATE = 0.025 (→ holds)">borderline<' in \
        claims_markdown([claim])


def test_a_verdict_far_from_every_threshold_is_robust():
    claim = _slow_decay_claim(0.02)
    assert claim.verdict == "holds" and claim.robustness == "robust"


def _seed_results(n_seeds: int, seed_sd: float, n_samples: int = 40) -> list:
    """Stored results of ``n_seeds`` weight seeds on the same samples: each seed's curves decay at its own
    rate (0.2 + seed_sd x a normal draw), the samples add a small noise (sd 0.02 per layer)."""
    from rankcollapse.experiments.store import StoredResult

    rng = np.random.default_rng(7)
    out = []
    for k in range(n_seeds):
        rate = 0.2 + seed_sd * rng.normal()
        curve = 0.5 * np.exp(-rate * LAYERS[:, None] + 0.02 * rng.normal(size=(13, n_samples)))
        table, samples = _result({"none": curve})
        out.append(StoredResult(table, {"sample_ids_sha256": "same"}, None, True, samples))
    return out


def test_weight_seeds_are_the_outer_level_of_the_interval():
    """Seeds that differ much more than samples do: the interval over 5 seeds is several times the width of
    one seed's (its samples only), and it covers the spread of the seeds' own factors."""
    results = _seed_results(5, seed_sd=0.05)
    one = claims.side_verdict(effects.side(results[0], label="one seed", norm="none"))
    five = effects.side(results, label="five seeds", norm="none")
    pooled = claims.side_verdict(five)
    assert five.resampled == "5 weight seeds and 40 samples"
    assert (pooled.high - pooled.low) > 3 * (one.high - one.low)
    own = [claims.side_verdict(effects.side(r, label="s", norm="none")).factor for r in results]
    assert pooled.low < np.median(own) < pooled.high
    with pytest.raises(ValueError, match="the same samples"):
        effects.side([results[0], type(results[1])(results[1].table, {"sample_ids_sha256": "other"}, None,
                                                    True, results[1].samples)], norm="none")


def test_articles_not_samples_are_resampled():
    """Four samples cut from each article share its curve: resampled as articles the interval is that of
    the articles' spread (wider than if the 4 x 10 samples were independent)."""
    rng = np.random.default_rng(3)
    # [layer, article]
    per_article = 0.5 * np.exp(-(0.2 + 0.05 * rng.normal(size=10))[None, :] * LAYERS[:, None])
    curves = np.repeat(per_article, 4, axis=1)  # [layer + 1, 40 samples], 4 per article
    groups = np.repeat(np.arange(10), 4)
    as_samples = stats.resampled_medians(curves)
    as_articles = stats.resampled_medians(curves, groups)
    spread = lambda draws: np.ptp(np.quantile(draws[:, -1], [0.025, 0.975]))  # noqa: E731
    assert spread(as_articles) > 1.5 * spread(as_samples)


def test_the_grid_is_the_published_defaults_moved_one_at_a_time():
    points = robustness.grid_points()
    assert len(points) == 12
    for field, value, thresholds in points:
        moved = {f for f in DEFAULTS.__dataclass_fields__ if getattr(thresholds, f) != getattr(DEFAULTS, f)}
        assert moved == {field} and getattr(thresholds, field) == value
    assert robustness.grid_words()["grid_min_fit_layers"] == "2 / 3 / 5"
    assert robustness.grid_words()["grid_late_fraction"] == "1/3 / 0.5 / 2/3"


def test_invalid_thresholds_raise():
    with pytest.raises(ValueError, match="late_fraction"):
        Thresholds(late_fraction=0)
    with pytest.raises(ValueError, match="tiny_effect"):
        Thresholds(tiny_effect=0.9)
    with pytest.raises(ValueError, match="direction"):
        effects.outcome(effects.Effect("x", 1.0, None, None), 2)


def test_a_page_claim_with_per_sample_values_shows_its_interval_in_the_matrix():
    table, samples = _result({"none": _noisy(0.2, 100, seed=4), "model": _noisy(0.05, 100, seed=5)})
    sides = paired_sides(table, samples, dict(norm="model"), dict(norm="none"), ("LN", "pure"))
    claim = against("LayerNorm slows collapse", "test", "initialized: late per-layer factor", sides)
    text = claims_markdown([claim])
    effect = effects.late_factor(*sides["causal"])
    assert claim.verdict == "holds" and effect.low < math.exp(0.15) < effect.high
    interval = f"×{effect.estimate:.3g} [{effect.low:.3g}, {effect.high:.3g}]"
    assert f'✓ causal:</span> <span class="nw">{interval}</span>' in text
    assert "no interval" not in claim.cells[0].text


def test_the_stored_form_of_per_sample_values_moves_an_effect_and_its_interval_by_under_a_thousandth():
    """The same effect (late factor of two curves, 400 samples spread e^±4 about their medians) from the
    values as computed and as the store keeps them (logs quantized per curve and layer): estimate and
    interval ends within 0.1 %, while the values themselves did change."""
    rng = np.random.default_rng(5)
    curves = {norm: np.exp(-rate * LAYERS)[:, None] * np.exp(rng.normal(0, 1.3, (len(LAYERS), 400)))
              for norm, rate in (("none", 0.2), ("model", 0.1))}
    table, exact = _result(curves)
    stored = from_bytes(to_bytes(exact))
    assert not np.array_equal(stored.values["mu"], exact.values["mu"])
    found = [effects.late_factor(effects.side(table, s, "LN", norm="model"),
                                 effects.side(table, s, "pure", norm="none")) for s in (exact, stored)]
    assert found[0].low is not None and found[0].low < found[0].estimate < found[0].high
    for a, b in zip(*[(e.estimate, e.low, e.high) for e in found]):
        assert abs(b / a - 1) < 1e-3
