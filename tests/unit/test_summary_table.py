"""The reproduce page's results table: one distinguishable row per stored result, few columns."""

import pandas as pd

from rankcollapse.experiments.store import ResultStore
from rankcollapse.experiments.store_summary import summary_by_page, summary_table

TABLE = pd.DataFrame({"layer": [0], "value": [1.0]})
BASE = {"n_samples": 4, "n_tokens": 32, "n_layers": 8, "model": "pkg:minilm", "masks": ["complete", "causal"]}


def _store(tmp_path) -> ResultStore:
    store = ResultStore(tmp_path)
    provenance = {"hardware": "CPU x, 2 cores", "dtype": "float64", "wall_time_s": 1.5, "git_commit": "abc"}
    store.save("pageA", {**BASE, "norms": ["none"], "temperatures": [1.0, 64.0]}, TABLE, provenance)
    store.save("pageA", {**BASE, "norms": ["none", "layernorm"], "temperatures": [None]}, TABLE, provenance)
    store.save("pageB", {**BASE, "n_samples": 16}, TABLE, provenance)
    return store


def test_runs_differing_only_in_configuration_are_told_apart(tmp_path):
    table = summary_table(_store(tmp_path))
    shown = table.drop(columns=["result"])
    assert not shown.duplicated().any(), shown
    settings = set(table.loc[table["page"] == "pageA", "settings"])
    assert settings == {"norms: none; temperatures: 1.0, 64.0",
                        "norms: none, layernorm; temperatures: default"}
    # a setting shared by all runs of a page (masks) is not repeated; a page with one run shows a dash
    assert table.loc[table["page"] == "pageB", "settings"].tolist() == ["–"]


def test_columns_fit_a_text_column(tmp_path):
    table = summary_table(_store(tmp_path))
    assert list(table.columns) == ["page", "result", "scale", "model", "settings", "ran on",
                                   "compute time (s)", "commit"]
    assert table.loc[table["page"] == "pageB", "scale"].tolist() == ["16×32×8"]


def test_a_page_without_layers_shows_the_scale_it_has_not_none(tmp_path):
    """A page whose runs have no n_layers (or no n_samples) showed "None×128×None"."""
    store = ResultStore(tmp_path)
    store.save("pageC", {"n_tokens": 128, "model": "pkg:minilm"}, TABLE,
               {"hardware": "CPU", "dtype": "float64"})
    assert summary_table(store)["scale"].tolist() == ["128"]


def test_a_result_without_a_dtype_says_where_it_ran_without_none(tmp_path):
    """The data page's result records no dtype: the reproduce page showed "CPU x86_64, 2 cores, None"."""
    store = ResultStore(tmp_path)
    store.save("data", {"n_tokens": 128}, TABLE, {"hardware": "CPU x86_64, 2 cores"})
    store.save("fig2", {"n_tokens": 16}, TABLE, {"hardware": "CPU x86_64, 2 cores", "dtype": "float32"})
    assert summary_table(store)["ran on"].tolist() == ["CPU x86_64, 2 cores", "CPU x86_64, 2 cores, float32"]


def test_resumed_runs_show_their_whole_compute_time(tmp_path):
    store = _store(tmp_path)
    resumed = {"hardware": "CPU x, 2 cores", "dtype": "float32", "wall_time_s": 10.0, "compute_time_s": 250.0,
               "units_resumed": 3, "git_commit": "abc"}
    store.save("pageC", BASE, TABLE, resumed)
    times = summary_table(store).set_index("page")["compute time (s)"]
    assert times["pageC"] == 250.0  # every session's units, not the last session's 10 s
    assert times["pageB"] == 1.5  # a result without compute_time_s shows its wall time


def test_rows_are_sorted_by_page_then_by_scale_as_numbers(tmp_path):
    """The reproduce page listed 105 results in the store's key order (ten screens, scales mixed)."""
    store = ResultStore(tmp_path)
    provenance = {"hardware": "CPU", "dtype": "float64"}
    for page, n_samples, n_tokens in [("pageB", 8, 32), ("pageA", 128, 32), ("pageA", 16, 128),
                                      ("pageA", 16, 32), ("pageA", 3000, 128)]:
        store.save(page, {**BASE, "n_samples": n_samples, "n_tokens": n_tokens}, TABLE, provenance)
    table = summary_table(store)
    assert table["page"].tolist() == ["pageA"] * 4 + ["pageB"]
    assert table["scale"].tolist() == ["16×32×8", "16×128×8", "128×32×8", "3000×128×8", "8×32×8"]
    groups = summary_by_page(table)
    assert [(page, words) for page, words, _ in groups] == [("pageA", "4 results, 16×32×8 to 3000×128×8"),
                                                           ("pageB", "1 result, 8×32×8")]
    assert list(groups[0][2].columns) == ["scale", "model", "settings", "ran on", "compute time (s)",
                                          "commit"]
