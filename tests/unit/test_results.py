"""The results store: exact-parameter lookup, atomic writes, resumable sweeps."""

import json

import pandas as pd
import pytest

from rankcollapse.results import ResultStore, canonical_parameters, result_key


def _table(value: float) -> pd.DataFrame:
    return pd.DataFrame({"layer": [0, 1], "metric": ["mu", "mu"], "mean": [value, value / 3],
                         "temperature": [None, 0.015625], "skip": [True, False]})


def test_key_is_canonical_and_separates_pages_and_values():
    assert result_key("fig2", {"a": (1, 2), "b": None}) == result_key("fig2", {"b": None, "a": [1, 2]})
    assert result_key("fig2", {"a": 1}) != result_key("fig3", {"a": 1})
    assert result_key("fig2", {"a": 1}) != result_key("fig2", {"a": 2})
    assert canonical_parameters({"t": (1 / 64, None)}) == {"t": [0.015625, None]}


def test_round_trip_keeps_values_and_provenance(tmp_path):
    store = ResultStore(tmp_path)
    table = _table(1 / 3)
    store.save("fig2", {"n": 3}, table, {"dtype": "float64"})
    loaded = store.load("fig2", {"n": 3})
    assert loaded.loaded and loaded.provenance["dtype"] == "float64"
    assert loaded.provenance["parameters"] == {"n": 3} and loaded.provenance["page"] == "fig2"
    assert loaded.table["mean"].tolist() == table["mean"].tolist()  # bit-exact through %.17g
    assert loaded.table["skip"].tolist() == [True, False]
    assert pd.isna(loaded.table["temperature"].iloc[0]) and loaded.table["temperature"].iloc[1] == 0.015625
    assert store.load("fig2", {"n": 4}) is None


def test_lookup_confirms_parameters_not_only_the_hash(tmp_path):
    store = ResultStore(tmp_path)
    stored = store.save("fig2", {"n": 3}, _table(1.0), {})
    json_path = stored.csv_path.with_suffix(".json")
    record = json.loads(json_path.read_text())
    record["parameters"] = {"n": 5}  # a file under the right name but for other parameters
    json_path.write_text(json.dumps(record))
    assert store.load("fig2", {"n": 3}) is None


def test_load_or_compute_computes_once_and_records_provenance(tmp_path):
    store = ResultStore(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return _table(2.0), {"model_spec": "pkg:test"}

    first = store.load_or_compute("fig3", {"n": 1}, compute)
    second = store.load_or_compute("fig3", {"n": 1}, compute)
    assert len(calls) == 1 and not first.loaded and second.loaded
    for field in ("git_commit", "rankcollapse_version", "torch_version", "hardware", "wall_time_s", "model_spec"):
        assert field in second.provenance


def test_failed_compute_stores_nothing_and_csv_alone_is_invisible(tmp_path):
    store = ResultStore(tmp_path)

    def broken():
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        store.load_or_compute("fig2", {"n": 1}, broken)
    assert store.load("fig2", {"n": 1}) is None
    csv_path, _ = store.paths("fig2", {"n": 1})
    csv_path.parent.mkdir(parents=True)
    _table(1.0).to_csv(csv_path, index=False)  # a CSV whose JSON was never written
    assert store.load("fig2", {"n": 1}) is None and store.entries("fig2") == []
    assert not list(tmp_path.rglob(".*.tmp"))


def test_interrupted_sweep_resumes_at_the_first_missing_entry(tmp_path):
    store = ResultStore(tmp_path)
    entries = [{"n": i} for i in range(4)]
    done = []

    def compute(entry, fail_at=None):
        if entry["n"] == fail_at:
            raise KeyboardInterrupt
        done.append(entry["n"])
        return _table(float(entry["n"] + 1)), {}

    with pytest.raises(KeyboardInterrupt):
        store.sweep("sweep", entries, lambda e: compute(e, fail_at=2))
    assert done == [0, 1]
    results = store.sweep("sweep", entries, compute)
    assert done == [0, 1, 2, 3]  # 0 and 1 were loaded, not recomputed
    assert [r.loaded for r in results] == [True, True, False, False]
    assert [r.table["mean"].iloc[0] for r in results] == [1.0, 2.0, 3.0, 4.0]
    assert len(store.entries("sweep")) == 4


def test_bad_page_name_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="page must be a plain page name"):
        ResultStore(tmp_path).paths("../fig2", {})
