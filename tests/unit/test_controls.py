"""The controls of Fig. 2: the no-mixing mask, initialized weights without biases and with their own seed,
per-sample values stored beside a result (hashed, verified, refused when damaged), and the Fig. 2 page's parts
and words about them."""

import hashlib
import io
import json

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse import engine
from rankcollapse.book.pages import _fig2_controls, fig2
from rankcollapse.book.plotting import palette
from rankcollapse.core import masks, metrics
from rankcollapse.experiments.config import ExperimentConfig, experiment_config, stored_parameters
from rankcollapse.experiments import sample_values
from rankcollapse.experiments.store import DamagedResultError, ResultStore, result_key


def test_self_mask_is_the_identity_and_has_no_center():
    mask = masks.build_mask("self", 5)
    assert torch.equal(mask, torch.eye(5, dtype=torch.bool)) and "self" in masks.MASK_NAMES
    graph = masks.describe_mask(mask)
    assert (graph.centers == () and graph.radius is None and graph.diameter == 0
            and not graph.quasi_strongly_connected)
    assert masks.describe_mask(masks.build_mask("self", 1)).radius == 0  # one token is its own center


def test_self_mask_leaves_only_the_value_maps():
    """Under the no-mixing mask a layer is X -> sum_h X W_V[h] W_O[h] (+ biases): μ after one layer equals
    that map's μ, computed here without the engine's attention."""
    x0 = torch.randn(3, 6, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    layers = engine.random_layers(1, 8, 2, seed=3)
    out = engine.run_san(x0, layers, engine.config_grid(masks=(("self", None),)))
    la = layers[0]
    # [head, sample, token, d_head]
    values = torch.einsum("std,hde->hste", x0, la.W_V) + la.b_V[:, None, None, :]
    y = torch.einsum("hste,hef->stf", values, la.W_O) + la.b_O  # [sample, token, d_model]
    torch.testing.assert_close(out.metrics["mu"][1, 0], metrics.mu(y), rtol=1e-12, atol=0)


def test_no_bias_stack_is_the_same_draw_without_biases():
    with_bias = engine.random_layers(2, 8, 2, seed=5)
    without = engine.random_layers(2, 8, 2, seed=5, bias=False)
    for a, b in zip(with_bias, without):
        assert torch.equal(a.W_V, b.W_V) and torch.equal(a.W_O, b.W_O) and torch.equal(a.W_Q, b.W_Q)
        assert a.b_V is not None and b.b_V is None and b.b_O is None


def test_new_fields_keep_stored_keys_and_are_checked():
    plain = ExperimentConfig()
    assert plain.weights == ("initialized", "pretrained")  # the default every stored result was keyed with
    assert "weight_seed" not in stored_parameters(plain) and plain.initial_seed == plain.seed
    seeded = ExperimentConfig(weight_seed=7)
    assert stored_parameters(seeded)["weight_seed"] == 7 and seeded.initial_seed == 7
    with pytest.raises(ValueError, match="weight_seed"):
        ExperimentConfig(weight_seed=-1)
    with pytest.raises(ValueError, match="initialized_nobias"):
        ExperimentConfig(weights=("initialized_nobias",), full_transformer=True)


def _samples(n_curves: int = 2, n_samples: int = 5) -> sample_values.SampleValues:
    rng = np.random.default_rng(0)
    labels = pd.DataFrame([{"weights": "initialized", "variant": "SAN", "mask": m, "window": w,
                            "temperature": None, "norm": "none", "skip": False}
                           for m, w in (("complete", None), ("sliding_window", 4))][:n_curves],
                          columns=list(sample_values.CURVE_COLUMNS))
    values = {k: rng.random((n_curves, 4, n_samples)).astype(np.float32)
              for k in sample_values.STORED_METRICS}
    values["mu"][0, 3] = np.nan  # a shallower curve
    values["relative_mu"] = values["mu"] / values["norm"]
    return sample_values.SampleValues(labels, values, np.array([0, 1, 0, 2, 1][:n_samples]))


def test_per_sample_values_round_trip_through_the_store(tmp_path):
    store, samples = ResultStore(tmp_path), _samples()
    store.save("fig2", {"n": 1}, pd.DataFrame({"a": [1.0]}), {}, samples=samples)
    path = tmp_path / "fig2" / f"{result_key('fig2', {'n': 1})}{sample_values.SAMPLES_SUFFIX}"
    record = json.loads(store.paths("fig2", {"n": 1})[1].read_text())
    assert record["samples_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded = store.load("fig2", {"n": 1}).samples
    _assert_as_stored(loaded, samples)
    for name in sample_values.SAMPLE_METRICS:
        assert loaded.values[name].dtype == np.float64
    np.testing.assert_array_equal(loaded.groups, [0, 1, 0, 2, 1])
    assert loaded.curve("mu", mask="complete").shape == (3, 5)  # cut after its last layer
    assert loaded.curve("relative_mu", mask="sliding_window", window=4).shape == (4, 5)
    store.save("fig2", {"n": 2}, pd.DataFrame({"a": [1.0]}), {})
    assert store.load("fig2", {"n": 2}).samples is None  # results stored without them


def _half_step(exact: np.ndarray) -> np.ndarray:
    """Half of each curve-layer's step as the store quantizes logs: 1/131064 of the finite logs' range over
    samples.  Shapes: [curve, layer + 1, sample] -> [curve, layer + 1, 1]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.log(np.asarray(exact, dtype=np.float64))
        finite = np.isfinite(b)
        spread = np.where(finite, b, -np.inf).max(-1) - np.where(finite, b, np.inf).min(-1)
    return np.where(np.isfinite(spread), spread, 0.0)[..., None] / 131064 * (1 + 1e-9) + 1e-12


def _assert_within_half_a_step(stored: np.ndarray, exact: np.ndarray,
                               bound: np.ndarray | None = None) -> None:
    """``stored`` is ``exact`` rounded as the store keeps it: each log within half of its curve-layer's step
    (or within ``bound``), NaN, 0 and inf exactly.  Shapes: both [curve, layer + 1, sample]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = np.log(stored), np.log(np.asarray(exact, dtype=np.float64))
        finite = np.isfinite(b)
        error = np.where(finite, a - b, 0.0)
    assert (np.abs(error) <= (_half_step(exact) if bound is None else bound)).all()
    np.testing.assert_array_equal(a[~finite], b[~finite])  # NaN, log 0 = -inf and inf kept as they were


def _assert_as_stored(stored: sample_values.SampleValues, exact: sample_values.SampleValues) -> None:
    """mu and norm within half a step of their exact values; relative_mu, not stored, is their ratio, its log
    within the sum of their half steps of the exact ratio."""
    for name in sample_values.STORED_METRICS:
        _assert_within_half_a_step(stored.values[name], exact.values[name])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = stored.values["mu"] / stored.values["norm"]
        np.testing.assert_array_equal(stored.values["relative_mu"], ratio)
    _assert_within_half_a_step(stored.values["relative_mu"], exact.values["relative_mu"],
                               _half_step(exact.values["mu"]) + _half_step(exact.values["norm"]))


def test_per_sample_values_are_stored_as_logs_quantized_within_each_curve_layers_range(tmp_path):
    """Two bytes per value: each log within half a step of 1/65532 of its curve-layer's range, whatever the
    scale (values tracked exactly far below float32's smallest number, spreads of e^-40 across samples),
    NaN (a shallower curve), 0 (underflowed) and inf kept; a result just saved reads exactly as it loads."""
    rng = np.random.default_rng(3)
    samples = _samples(n_samples=5)
    wide = {k: np.exp(rng.uniform(-40, 0, samples.values[k].shape)) * 1e-200 for k in ("mu", "norm")}
    wide["mu"][1, 3] = 0.0  # underflowed: stays exactly 0
    wide["norm"][0, 2, 1], wide["mu"][1, 1] = np.inf, 7.5  # one curve-layer with one value: no spread
    wide["mu"][0, 3] = np.nan
    wide["relative_mu"] = wide["mu"] / wide["norm"]
    values = sample_values.SampleValues(samples.labels, wide, None)
    data = sample_values.to_bytes(values)
    assert sample_values.stored_encoding(data) == sample_values.ENCODING == "log16_ratio_derived"
    with np.load(io.BytesIO(data)) as archive:  # the ratio is not stored
        assert not [name for name in archive.files if name.startswith("relative_mu")]
    back = sample_values.from_bytes(data)
    _assert_as_stored(back, values)
    assert back.values["relative_mu"][1, 3, 0] == 0.0 and back.values["relative_mu"][0, 2, 1] == 0.0
    assert back.values["mu"][1, 1, 0] == pytest.approx(7.5, rel=1e-15)
    assert np.abs(np.log(back.values["mu"][0, :3]) - np.log(wide["mu"][0, :3])).max() > 1e-5  # not lossless
    store = ResultStore(tmp_path)
    saved = store.save("fig2", {"n": 1}, pd.DataFrame({"a": [1.0]}), {}, samples=values).samples
    for name in sample_values.SAMPLE_METRICS:
        np.testing.assert_array_equal(saved.values[name], store.load("fig2", {"n": 1}).samples.values[name])


def test_a_ratio_that_mu_over_norm_cannot_give_is_stored_with_them():
    """Where mu and norm overflowed (inf) while their ratio was measured, the ratio is
    stored too and read back as measured; elsewhere it is mu over norm."""
    samples = _samples()
    values = {k: v.astype(np.float64) for k, v in samples.values.items()}
    values["mu"][1, 3, :2] = values["norm"][1, 3, :2] = np.inf  # a pretrained decoder's stack at depth
    measured = sample_values.SampleValues(samples.labels, values)
    assert not sample_values.derives_ratio(values) and sample_values.derives_ratio(samples.values)
    data = sample_values.to_bytes(measured)
    with np.load(io.BytesIO(data)) as archive:
        assert "relative_mu" in archive.files
    back = sample_values.from_bytes(data)
    _assert_within_half_a_step(back.values["relative_mu"], values["relative_mu"])
    assert np.isfinite(back.values["relative_mu"][1, 3]).all() and np.isinf(back.values["mu"][1, 3, :2]).all()


def _legacy_bytes(samples: sample_values.SampleValues, encoding: str | None) -> bytes:
    """Per-sample values as files stored before today's encoding held them, all three metrics: the values as
    float32 (no encoding entry, no groups), their logs as float32 (``"log"``) or as today's codes
    (``"log16"``)."""
    buffer = io.BytesIO()
    labels = np.array(json.dumps(samples.labels.astype(object).where(samples.labels.notna(), None)
                                 .to_dict("records")))
    if encoding is None:
        np.savez(buffer, labels=labels, **{k: v.astype(np.float32) for k, v in samples.values.items()})
    elif encoding == "log":
        with np.errstate(divide="ignore"):
            logs = {k: np.log(v).astype(np.float32) for k, v in samples.values.items()}
        np.savez_compressed(buffer, labels=labels, encoding=np.array(encoding), **logs)
    else:
        codes = {name + part: array for name, values in samples.values.items()
                 for part, array in sample_values.encode_logs(values).items()}
        np.savez_compressed(buffer, labels=labels, encoding=np.array(encoding), **codes)
    return buffer.getvalue()


@pytest.mark.parametrize("encoding", [None, "log", "log16"])
def test_files_of_the_earlier_encodings_read_back_and_are_rewritten_in_todays(tmp_path, encoding):
    """Files written before (float32 values; float32 logs; all three metrics as codes) read as they did;
    ``compact_samples`` rewrites them in today's encoding (mu and norm) with the record's SHA-256 anew, once,
    and the values stay within half a step (the ratio within its two parts' half steps)."""
    from rankcollapse.experiments.store_upgrade import compact_samples

    samples = _samples()
    data = _legacy_bytes(samples, encoding)
    legacy = sample_values.from_bytes(data)
    _assert_within_half_a_step(legacy.values["norm"], samples.values["norm"], 1e-6 + _half_step(
        samples.values["norm"]) * (encoding == "log16"))
    assert legacy.groups is None and sample_values.stored_encoding(data) == encoding
    store = ResultStore(tmp_path)
    store.save("fig2", {"n": 1}, pd.DataFrame({"a": [1.0]}), {}, samples=samples)
    path = tmp_path / "fig2" / f"{result_key('fig2', {'n': 1})}{sample_values.SAMPLES_SUFFIX}"
    json_path = store.paths("fig2", {"n": 1})[1]
    path.write_bytes(data)
    json_path.write_text(json.dumps({**json.loads(json_path.read_text()),
                                     "samples_sha256": hashlib.sha256(data).hexdigest()}))
    assert compact_samples(store) == [path] and compact_samples(store) == []
    assert sample_values.stored_encoding(path.read_bytes()) == sample_values.ENCODING
    # the ratio is now the stored mu over the stored norm, not the ratio the file held
    parts = {"mu": legacy.values["mu"], "norm": legacy.values["norm"]}
    _assert_as_stored(store.load("fig2", {"n": 1}).samples,
                      sample_values.SampleValues(legacy.labels, sample_values.with_ratio(parts)))


def test_each_samples_article_is_its_group():
    ids = ("Ada Lovelace#0", "Alan Turing#2", "Ada Lovelace#5", "Paris+1", "Paris+3")
    assert sample_values.article_groups(ids).tolist() == [0, 1, 0, 2, 3]
    assert sample_values.article_groups(()) is None


@pytest.mark.parametrize("damage", ["edit", "truncate", "delete"])
def test_damaged_per_sample_values_are_refused(tmp_path, damage):
    store = ResultStore(tmp_path)
    store.save("fig2", {"n": 1}, pd.DataFrame({"a": [1.0]}), {}, samples=_samples())
    path = tmp_path / "fig2" / f"{result_key('fig2', {'n': 1})}{sample_values.SAMPLES_SUFFIX}"
    data = path.read_bytes()
    if damage == "delete":
        path.unlink()
    else:
        path.write_bytes(data[:-7] + b"xxxxxxx" if damage == "edit" else data[: len(data) // 2])
    with pytest.raises(DamagedResultError, match=r"per-sample values .*(missing|not the ones recorded)"):
        store.load("fig2", {"n": 1})


@pytest.mark.slow
def test_per_sample_values_of_a_sweep_match_its_table(tmp_path, monkeypatch):
    """The stored per-sample values are the samples the table's statistics summarize (float32), for every
    weight source, the no-bias control and the no-mixing mask included."""
    from rankcollapse.experiments import sweep

    monkeypatch.setenv("RANKCOLLAPSE_BLOCK_SAMPLES", "2")  # two units per weight source, put back together
    config = ExperimentConfig(weights=("initialized", "initialized_nobias"), masks=("causal", "self"),
                                          n_samples=3, n_tokens=6, n_layers=2)
    result = sweep.run_experiment("fig2", config, ResultStore(tmp_path))
    reloaded = ResultStore(tmp_path).load("fig2", stored_parameters(config))
    table = reloaded.table
    for row in reloaded.samples.labels.itertuples():
        curve = reloaded.samples.curve("relative_mu", weights=row.weights, mask=row.mask, norm=row.norm)
        rows = table[(table["weights"] == row.weights) & (table["mask"] == row.mask)
                     & (table["metric"] == "relative_mu")]
        # rtol: the stored form (mu and norm each within 1/131064 of their logs' spread over the samples)
        np.testing.assert_allclose(np.median(curve, axis=-1), rows.sort_values("layer")["median"], rtol=1e-5)
    no_bias = reloaded.samples.curve("relative_mu", weights="initialized_nobias", mask="causal", norm="none")
    assert not np.allclose(no_bias, reloaded.samples.curve("relative_mu", weights="initialized",
                                                           mask="causal", norm="none"))
    assert result.samples.values["mu"].shape == (4, 3, 3)


@pytest.mark.slow
def test_weight_seed_changes_the_weights_not_the_samples(tmp_path):
    from rankcollapse.experiments import sweep

    runs = {s: ExperimentConfig(weights=("initialized",), masks=("self",), n_samples=2, n_tokens=6,
                                            n_layers=1, weight_seed=s) for s in (None, 0, 1)}
    out = {s: sweep.run_experiment("fig2", c, ResultStore(tmp_path)).samples.values["mu"]
           for s, c in runs.items()}
    np.testing.assert_array_equal(out[None], out[0])  # None: the sample seed, 0
    np.testing.assert_array_equal(out[0][:, 0], out[1][:, 0])  # the same X(0)
    assert not np.allclose(out[0][:, 1], out[1][:, 1])  # other weights


PAGE = dict(model="pkg:minilm", window=2, n_layers=3, n_samples=4, n_tokens=8, seed=0, overlap="disjoint",
            dtype="float64", device="cpu", show_largest_stored=True, n_samples_controls=2, n_weight_seeds=3)


def test_fig2_keeps_its_main_sweep_and_adds_controls():
    runs = fig2.configure(PAGE)
    old = experiment_config({k: v for k, v in PAGE.items() if k in ExperimentConfig.__dataclass_fields__},
                                        **fig2.FIXED)
    assert stored_parameters(runs["main"].config) == stored_parameters(old)
    assert set(runs) == {"main", "controls", "pretrained_self", "seed_1", "seed_2", "hf", "components",
                         "decomposition"}
    assert runs["decomposition"].config.attention_stats and runs["decomposition"].config.norms == ("none",)
    assert runs["controls"].config.weights == ("initialized", "initialized_nobias")
    assert runs["controls"].config.n_samples == 2 and "self" in runs["controls"].config.masks
    assert [runs[f"seed_{k}"].config.initial_seed for k in (1, 2)] == [1, 2]
    # every seed runs the page's three norms: the seeds are the outer level of every initialized interval
    assert {runs[f"seed_{k}"].config.norms for k in (1, 2)} == {runs["controls"].config.norms}
    assert runs["hf"].config.init == "hf" and runs["hf"].config.weights == ("initialized",)
    assert runs["components"].config.full_transformer and runs["components"].config.skips == (False, True)
    with pytest.raises(ValueError, match="n_weight_seeds"):
        fig2.configure({**PAGE, "n_weight_seeds": 0})


def test_the_first_paragraph_names_the_claims_whose_verdict_depends_on_the_setting():
    from rankcollapse.verdicts.claims import Claim

    theory, biases = _fig2_controls.SETTING_WORDS["theory"][1], _fig2_controls.SETTING_WORDS["biases"][1]
    rows = [Claim("LayerNorm stops it", "s", "m", "cannot tell", "n", setting=f"{theory}; 5 weight seeds"),
            Claim("LayerNorm stops it", "s", "m", "holds", "n", setting=f"{biases}; 5 weight seeds"),
            Claim("It collapses", "s", "m", "holds", "n", setting=f"{theory}; 5 weight seeds"),
            Claim("It collapses", "s", "m", "holds", "n", setting=f"{biases}; 5 weight seeds")]
    found = _fig2_controls.setting_clauses(rows)
    assert found["n_setting_differences"] == 1
    assert found["setting_differences"] == ("The verdict depends on the setting: “LayerNorm stops it” (m) "
                                            "cannot tell in the theory's SAN (no biases), holds with "
                                            "PyTorch's biases.")
    assert _fig2_controls.setting_clauses(rows[2:])["setting_differences"].startswith("Every claim reads")


def test_a_control_keeps_its_norms_line_style_and_takes_the_grey_of_its_weights():
    """A control was drawn dashed in its variant's colour (dashed now means the paper's LayerNorm)."""
    table = pd.DataFrame({"label": ["+ LayerNorm D", "+ LayerNorm D, no biases", "pure", "pure, no biases"],
                          "weights": ["initialized", "initialized_nobias"] * 2,
                          "norm": ["unit"] * 2 + ["none"] * 2, "mask": ["causal"] * 4})
    styles = palette.curve_styles(table, "label")
    assert {s.dims["colour_encodes"] for s in styles.values()} == {"weights"}
    assert (styles["+ LayerNorm D"].linestyle == styles["+ LayerNorm D, no biases"].linestyle
            == palette.NORM_STYLES["unit"])
    assert styles["+ LayerNorm D"].colour == styles["pure"].colour != styles["pure, no biases"].colour
    assert not {s.colour for s in styles.values()} & palette.MASK_COLOURS
    assert {s.marker for s in styles.values()} == {palette.MASK_STYLES["causal"].marker}


