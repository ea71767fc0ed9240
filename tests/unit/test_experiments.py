"""Experiments: config validation, exact sample statistics, agreement with a naive attention layer, and
stored results that cannot drift from the code."""

import io
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.experiments.config import ExperimentConfig, stored_parameters
from rankcollapse.experiments.models import loaded_model, text_samples
from rankcollapse.experiments.table import TABLE_METRICS, summarize, value
from rankcollapse.core import metrics
from rankcollapse.book import registry
from rankcollapse import engine
from rankcollapse.experiments import sweep
from rankcollapse.experiments.store import TABLE_DIGITS, TABLE_SUFFIX, ResultStore

pytestmark = pytest.mark.models


@pytest.mark.parametrize("field, value, words", [
    ("masks", ("complete", "diagonal"), "masks must be a non-empty tuple"),
    ("norms", ("batchnorm",), "norms must be"),
    ("weights", ("trained",), "weights must be"),
    ("temperatures", (-1.0,), "temperatures must be a finite number > 0"),
    ("window", 32, r"window must be an integer in \[1, 31\]"),
    ("n_samples", 0, r"n_samples must be an integer in \[1, "),
    ("n_tokens", 1, r"n_tokens must be an integer in \[2, 8192\]"),
    ("dtype", "float16", "dtype must be one of 'float64', 'float32'"),
    ("device", "tpu", "device must be 'cpu' or 'cuda'"),
    ("overlap", "random", "overlap must be one of"),
])
def test_bad_config_names_the_parameter(field, value, words):
    with pytest.raises(ValueError, match=words):
        ExperimentConfig(**{field: value})


def test_window_is_only_checked_for_windowed_masks():
    assert ExperimentConfig(masks=("complete",), window=100, n_tokens=8).window == 100


def test_summarize_gives_exact_statistics():
    values = torch.tensor([1.0, 2.0, 3.0, 10.0], dtype=torch.float64)  # four samples
    metric = values[None, None, :].expand(2, 1, 4)  # [layer + 1, config, sample]
    rank = torch.tensor([[[3, 3, 2, 3]], [[3, 1, 1, 1]]])  # [layer + 1, config, sample]
    data = {name: metric for name in TABLE_METRICS if name != "full_rank"}  # all metrics present
    data["numerical_rank"] = rank
    table = summarize(data, [{"mask": "complete"}], n_tokens=3, d_model=8)
    mu = table[(table["metric"] == "mu") & (table["layer"] == 1)].iloc[0]
    assert mu["mean"] == 4.0 and mu["median"] == 2.5 and mu["min"] == 1.0 and mu["max"] == 10.0
    assert math.isclose(mu["q10"], 1.3) and math.isclose(mu["q90"], 7.9)
    assert math.isclose(mu["std"], float(np.std([1, 2, 3, 10])))
    full = table[table["metric"] == "full_rank"].set_index("layer")["mean"]
    assert full.tolist() == [0.75, 0.25] and set(table["n_samples"]) == {4}


def _naive_layer(x: np.ndarray, layer: engine.AttentionLayer, mask: np.ndarray) -> np.ndarray:
    """One attention sublayer and unit-norm LN for one sample, head by head, in numpy."""
    out = np.zeros_like(x)
    for h in range(layer.n_heads):
        q = x @ layer.W_Q[h].numpy() + layer.b_Q[h].numpy()
        k = x @ layer.W_K[h].numpy() + layer.b_K[h].numpy()
        v = x @ layer.W_V[h].numpy() + layer.b_V[h].numpy()
        logits = np.where(mask, q @ k.T / math.sqrt(q.shape[1]), -np.inf)
        weights = np.exp(logits - logits.max(1, keepdims=True))
        weights /= weights.sum(1, keepdims=True)
        out += weights @ v @ layer.W_O[h].numpy()
    out += layer.b_O.numpy()
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.mark.slow
def test_sweep_matches_a_naive_attention_layer():
    config = ExperimentConfig(weights=("initialized",), masks=("complete", "causal_sliding_window"), window=2,
                              norms=("none", "unit"), n_layers=2, n_samples=3, n_tokens=8, seed=3)
    table, provenance = sweep.compute(config)
    loaded = loaded_model(config.model)
    from rankcollapse.hf import extract

    ids = text_samples(config.model, 3, 8, 3, "disjoint").input_ids  # [sample, token]
    x0 = extract.embed(loaded.model, ids).to(torch.float64).numpy()  # [sample, token, d_model]
    layer = engine.random_layers(2, x0.shape[-1], loaded.model.config.num_attention_heads, seed=3)[0]
    mask = np.tril(np.ones((8, 8), dtype=bool)) & ~np.tril(np.ones((8, 8), dtype=bool), -3)  # 0 <= i-j <= 2
    naive = [_naive_layer(x, layer, mask) for x in x0]
    expected = np.mean([float(metrics.mu(torch.from_numpy(y))) for y in naive])
    row = table.query("mask == 'causal_sliding_window' and norm == 'unit' and metric == 'mu' and layer == 1")
    assert math.isclose(float(row["mean"].iloc[0]), expected, rel_tol=1e-10)
    start = table.query("metric == 'mu' and layer == 0")["mean"]
    assert np.allclose(start, np.mean([float(metrics.mu(torch.from_numpy(x))) for x in x0]), rtol=1e-12)
    assert provenance["depth"] == {"initialized": 2} and len(provenance["weight_sha256"]) == 64


@pytest.mark.slow
def test_pages_store_and_reload(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    small = dict(n_samples=2, n_tokens=8, n_layers=2, window=2, temperatures=[1 / 64, 1.0, 64.0])
    first = registry.compute("fig3", **small)["main"]
    again = registry.compute("fig3", **small)["main"]
    assert not first.loaded and again.loaded
    assert sorted(set(first.table["temperature"])) == [1 / 64, 1.0, 64.0]
    pd.testing.assert_frame_equal(first.table.reset_index(drop=True), again.table, check_dtype=False)
    assert value(first.table, "mu", layer=0, mask="complete", temperature=1.0, weights="initialized") > 0
    with pytest.raises(ValueError, match="rows of 'mu' at layer 0 match"):
        value(first.table, "mu", layer=0, mask="complete")


def _stored_entries(limit: int) -> list[dict]:
    """The smallest stored result of each page, the ``limit`` cheapest pages (Fig. 2 always among them)."""
    store = ResultStore()
    names = sorted(p.name for p in store.root.iterdir() if p.is_dir() and p.name in registry.EXPERIMENT_PAGES)
    cost = lambda r: r["parameters"]["n_samples"] * r["parameters"]["n_tokens"] * r["parameters"]["n_layers"]
    smallest = [min(store.entries(name), key=cost) for name in names if store.entries(name)]
    smallest.sort(key=lambda r: (r["page"] != "fig2", cost(r)))
    return smallest[:limit]


@pytest.mark.slow
@pytest.mark.parametrize("record", _stored_entries(3), ids=lambda r: f"{r['page']}-{r['key']}")
def test_stored_results_match_a_recomputation_of_their_first_layers(record):
    """Recompute the first two layers of a committed result: layer stacks are prefix-stable, so the
    stored rows of layers 0-2 must come back (SAN rows; within the stored digits)."""
    parameters = {k: tuple(v) if isinstance(v, list) else v for k, v in record["parameters"].items()}
    config = replace(ExperimentConfig(**parameters), n_layers=2, full_transformer=False)
    fresh, _ = sweep.compute(config)
    fresh = pd.read_csv(io.StringIO(fresh.to_csv(index=False)))  # the dtypes a stored table has (None -> NaN)
    stored = pd.read_csv(ResultStore().root / record["page"] / f"{record['key']}{TABLE_SUFFIX}")
    keys = ["weights", "mask", "temperature", "norm", "skip", "layer", "metric", "n_samples"]
    pick = lambda t: t[(t["variant"] == "SAN") & (t["layer"] <= 2)
                       & t["metric"].isin(["mu", "norm", "mean_abs_cosine", "full_rank"])]
    merged = pick(stored).merge(pick(fresh), on=keys, suffixes=("_stored", "_fresh"))
    assert len(merged) == len(pick(fresh)) > 0
    for stat in ("mean", "median", "q90"):
        # stored at TABLE_DIGITS significant digits: within half a unit of the last, plus rounding-level noise
        assert np.allclose(merged[f"{stat}_stored"], merged[f"{stat}_fresh"], rtol=10.0 ** (1 - TABLE_DIGITS),
                           atol=1e-12)


def test_model_windows_is_stored_only_when_dropped():
    assert "model_windows" not in stored_parameters(ExperimentConfig())  # earlier keys unchanged
    assert stored_parameters(ExperimentConfig(model_windows=False))["model_windows"] is False
    with pytest.raises(ValueError, match="model_windows must be one of False, True"):
        ExperimentConfig(model_windows="no")
