"""Which stored results a page shows: its parts move together to the largest scale at which all are stored."""

from dataclasses import replace

import pandas as pd
import pytest

from rankcollapse.book import registry, report, shown
from rankcollapse.book.plotting import results as layer_results
from rankcollapse.book.pages import sample_size
from rankcollapse.experiments.config import stored_parameters
from rankcollapse.experiments.table import STATISTICS, TABLE_COLUMNS
from rankcollapse.experiments.store import ResultStore


def _store(store: ResultStore, config, page: str = "fig2"):
    """A stored result of ``config`` whose table is one row per configuration (enough for check_table)."""
    parameters = stored_parameters(config)
    rows = [dict(weights=w, variant="SAN", mask=m, window=config.window, temperature=None, norm=n, skip=s,
                 layer=0, metric="mu", **{k: 1.0 for k in STATISTICS}, n_samples=config.n_samples)
            for w in config.weights for m in config.masks for n in config.norms for s in config.skips]
    rows += [dict(weights=w, variant="full transformer", mask="model", window=None, temperature=None,
                  norm="model", skip=True, layer=0, metric="mu", **{k: 1.0 for k in STATISTICS},
                  n_samples=config.n_samples) for w in config.weights if config.full_transformer]
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    return store.save(page, parameters, table, {"model_layers": 12})


@pytest.fixture
def pair():
    runs = registry.configure("sample_size", {"model": "pkg:minilm", "n_samples": 8, "n_samples_small": 4,
                                           "n_tokens": 16, "n_layers": 2})
    return runs["large"].config, runs["small"].config


def test_the_parts_of_a_page_move_to_the_largest_scale_where_all_are_stored(tmp_path, pair):
    store = ResultStore(tmp_path)
    large, small = pair
    shown = {"large": _store(store, large), "small": _store(store, small)}
    assert report.largest_stored(shown, store) == shown  # nothing larger stored
    # larger, but its small is missing
    _store(store, replace(large, n_samples=64, n_tokens=32, dtype="float32"))
    assert report.largest_stored(shown, store) == shown
    _store(store, replace(small, n_tokens=32, dtype="float32"))
    moved = report.largest_stored(shown, store)
    assert moved["large"].provenance["parameters"]["n_samples"] == 64
    assert moved["small"].provenance["parameters"]["n_samples"] == 4  # the small sample keeps its count
    assert {r.provenance["parameters"]["dtype"] for r in moved.values()} == {"float32"}
    assert {r.provenance["parameters"]["n_tokens"] for r in moved.values()} == {32}
    _store(store, replace(large, n_samples=640, temperatures=(2.0,)))  # another experiment: never shown
    assert report.largest_stored(shown, store)["large"].provenance["parameters"]["n_samples"] == 64


def test_a_part_stored_only_in_its_own_dtype_moves_in_it(tmp_path, pair):
    """The skip page's deep bias-free seeds are always float64: at a float32 scale they are found in float64,
    also when the page's parameters (and so every part at its own scale) are float64."""
    store = ResultStore(tmp_path)
    large, small = pair
    shown = {"large": _store(store, large), "small": _store(store, small)}
    _store(store, replace(large, n_samples=64, n_tokens=32, dtype="float32"))
    _store(store, replace(small, n_tokens=32))  # float64, as its page fixes it
    moved = report.largest_stored(shown, store)
    assert [(r.provenance["parameters"]["n_tokens"], r.provenance["parameters"]["dtype"])
            for r in moved.values()] == [(32, "float32"), (32, "float64")]
    _store(store, replace(small, n_tokens=32, dtype="float32"))  # the scale's own dtype comes first
    assert report.largest_stored(shown, store)["small"].provenance["parameters"]["dtype"] == "float32"


def test_parts_on_the_same_samples_move_together(tmp_path, pair):
    store = ResultStore(tmp_path)
    large, _ = pair
    other = replace(large, norms=("none",))  # a second part, e.g. appendix_g1's Fig. 3 sweep
    shown = {"a": _store(store, large), "b": _store(store, other)}
    _store(store, replace(large, n_samples=32))
    _store(store, replace(other, n_samples=32))
    moved = report.largest_stored(shown, store)
    assert [r.provenance["parameters"]["n_samples"] for r in moved.values()] == [32, 32]


def test_a_part_stored_only_on_another_device_joins_the_scale(tmp_path, pair):
    """The skip-connection page: the deep part from a GPU bundle, the shallow (pretrained) part from a CPU."""
    store = ResultStore(tmp_path)
    large, _ = pair
    deep = replace(large, n_layers=24)
    shown = {"shallow": _store(store, large), "deep": _store(store, deep)}
    _store(store, replace(large, n_samples=32))  # the shallow part, larger, on the CPU
    assert report.largest_stored(shown, store) == shown  # no deep part at 32 samples anywhere
    _store(store, replace(deep, n_samples=32, device="cuda"))
    moved = report.largest_stored(shown, store)
    assert [(r.provenance["parameters"]["n_samples"], r.provenance["parameters"]["device"])
            for r in moved.values()] == [(32, "cpu"), (32, "cuda")]


def test_the_scale_note_counts_every_session_of_a_resumed_run(tmp_path, pair):
    large, _ = pair
    common = {"model_layers": 12, "model_description": "MiniLM", "hardware": "CPU x86_64, 2 cores",
              "device": "cpu", "wall_time_s": 1201.8, "git_commit": "67f324776d9ae82e"}
    one = ResultStore(tmp_path / "one").save("fig2", stored_parameters(large),
                                             _store(ResultStore(tmp_path / "t"), large).table,
                                             {**common, "compute_time_s": 1190.0, "units_resumed": 0})
    # one definition of a run's time, the units' seconds (compute_time_s), on the scale note
    # and the re-run block
    assert "in 1190 s at commit 67f324776d9a;" in shown.scale_note(one)
    assert "took 1190 s" in report.rerun_result_block("fig2", {}, {"main": one})
    resumed = ResultStore(tmp_path / "two").save("fig2", stored_parameters(large), one.table,
                                                 {**common, "compute_time_s": 4410.4, "units_resumed": 68})
    assert ("in 4410 s, over several sessions (68 units resumed from checkpoints) at commit"
            in shown.scale_note(resumed))
    assert "took 4410 s" in report.rerun_result_block("fig2", {}, {"main": resumed})


def test_the_sample_ratio_is_the_small_mean_over_the_large_mean_per_curve_and_layer():
    rows = [dict(weights="initialized", variant="SAN", mask=mask, window=window, temperature=None,
                 norm="none", skip=False, layer=layer, metric="mu", mean=mean, std=0.0, median=mean,
                 q10=mean / 2, q90=mean * 2, min=0.0, max=1.0, n_samples=n)
            for mask, window in (("complete", None), ("sliding_window", 4))
            for layer in (0, 1, 2)
            for n, mean in ((32, 3.0 * (layer + 1) * (2 if mask == "complete" else 1)),
                            (3000, 1.5 * (layer + 1)))]
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    ratios = sample_size.mean_ratios(table)
    assert len(ratios) == 4 and set(ratios["layer"]) == {1, 2}  # layer 0 (X(0)) has no place on the log axis
    assert dict(zip(ratios["mask"], ratios["mean"])) == {"complete": 4.0, "sliding_window": 2.0}
    # a line, no band
    assert (ratios[["median", "q10", "q90"]].to_numpy() == ratios[["mean"]].to_numpy()).all()
    assert sample_size.numbers(table)["max_mean_ratio"] == 4.0


def test_the_rerun_block_states_the_cost_of_every_part(tmp_path, pair):
    large, small = pair
    table = _store(ResultStore(tmp_path / "t"), large).table
    common = {"hardware": "CPU x86_64, 2 cores", "git_commit": "abc"}
    store = ResultStore(tmp_path / "s")
    results = {"large": store.save("fig2", stored_parameters(large), table,
                                   {**common, "wall_time_s": 100.0, "compute_time_s": 3000.0,
                                    "units_resumed": 9}),
               "small": store.save("fig2", stored_parameters(small), table, {**common, "wall_time_s": 20.0})}
    block = report.rerun_result_block("sample_size", {"n_samples": 8}, results)
    # the resumed part counts every session (3000 s), the other its wall time: 3020 s in all, split by part
    assert "Its computation took 3020 s on CPU x86_64, 2 cores (50.3 min), in all, over its 2 runs " \
           "(large: 3000 s, small: 20 s)" in block
    # the status page shows the same words (glued as <page>_compute_time)
    assert report.compute_time(results) == "3020 s on CPU x86_64, 2 cores (50.3 min)"
    computed = {"main": registry.Computed(None, None, 11.4)}  # a page that computes in its own module
    assert report.compute_time(computed) == "11 s on the build machine"
    assert f"Its computation took {report.compute_time(computed)};" in report.rerun_result_block(
        "theorem1", {}, computed)


def test_the_rerun_block_has_no_myst_role_and_no_zero_seconds(tmp_path, pair):
    """Markdown output is not parsed for roles: "(see {ref}`sec-reproduce`)" showed raw on ten pages."""
    large, _ = pair
    table = _store(ResultStore(tmp_path / "t"), large).table
    result = ResultStore(tmp_path / "s").save("fig2", stored_parameters(large), table,
                                              {"hardware": "CPU", "wall_time_s": 0.2, "git_commit": "abc"})
    block = report.rerun_result_block("fig2", {"n_samples": 8}, {"main": result})
    assert "{ref}" not in block and "took under 1 s" in block and " 0 s " not in block


def test_the_banner_is_empty_unless_the_page_shows_another_run(tmp_path, pair):
    large, _ = pair
    result = _store(ResultStore(tmp_path), large)
    same = {k: v for k, v in stored_parameters(large).items() if k in ("model", "n_samples", "n_tokens")}
    assert shown.banner("fig2", same, {"main": result}) == ""
    banner = shown.banner("fig2", {**same, "n_samples": 999}, {"main": result})
    assert "largest stored run" in banner and "n_samples = 8" in banner


def _with_provenance(store: ResultStore, config, page: str = "fig2"):
    table = _store(ResultStore(store.root / "tables"), config, page).table
    return store.save(page, stored_parameters(config), table,
                      {"model_description": "owner/MiniLM (a tiny one)", "weight_sha256": "w",
                       "git_commit": "c0ffee"})


def test_a_figure_names_the_data_it_draws_and_only_parameters_its_masks_use(tmp_path, pair):
    large, _ = pair
    result = _with_provenance(ResultStore(tmp_path), large)
    assert shown.figure_data([result]) == [{"result": f"results/fig2/{result.provenance['key']}.csv.gz",
                                             "computed_at_commit": "c0ffee"}]
    assert "window" in layer_results._figure_parameters(result)  # Fig. 2's windows take it
    complete_only = _with_provenance(ResultStore(tmp_path / "c"), replace(large, masks=("complete",)))
    # no mask of the run takes a window
    assert "window" not in layer_results._figure_parameters(complete_only)


def test_a_figure_of_several_runs_lists_the_values_they_differ_in(tmp_path, pair):
    large, _ = pair
    store = ResultStore(tmp_path)
    runs = [_store(store, replace(large, masks=(m,), window=w), page="mask_design")
            for m, w in (("complete", 4), ("sliding_window", 2), ("sliding_window", 8))]
    combined = shown.combined_parameters(runs)
    assert combined["masks"] == ["complete", "sliding_window"] and combined["window"] == [2, 4, 8]
    assert combined["n_samples"] == large.n_samples  # shared values stay as they are
    random = _store(store, replace(large, masks=("random",), mask_options=(("density", 0.15), ("seed", 0))),
                    page="mask_design")
    dilated = _store(store, replace(large, masks=("dilated_window",), mask_options=(("dilation", 2),)),
                     page="mask_design")
    options = shown.combined_parameters([*runs, random, dilated])["mask_options"]  # pairs: lists in JSON
    assert options == ['["density", 0.15]', '["dilation", 2]', '["seed", 0]']


def test_fig2_controls_move_to_the_largest_count_stored_for_all_of_them(tmp_path):
    """Fig. 2 (``grows_own_counts``): its controls and seed replicates, on their own sample count, are shown
    at the largest count stored for every one of them at the main sweep's scale; a count missing for one part
    is skipped, and on a page without the flag (the sample-size page's small part) the count stays its own."""
    store = ResultStore(tmp_path)
    page = {"model": "pkg:minilm", "n_samples": 8, "n_tokens": 16, "n_layers": 2, "n_samples_controls": 2,
            "n_weight_seeds": 2}
    runs = registry.configure("fig2", page)
    shown = {part: _store(store, run.config) for part, run in runs.items()}
    assert report.largest_stored(shown, store) == shown  # nothing larger stored
    for count in (4, 6):
        for part, run in runs.items():
            if part != "main" and not (count == 6 and part == "seed_1"):  # seed_1 is missing at 6
                _store(store, replace(run.config, n_samples=count))
    moved = report.largest_stored(shown, store)
    assert moved["main"] is not shown["main"] and moved["main"].provenance["parameters"]["n_samples"] == 8
    assert {part: r.provenance["parameters"]["n_samples"] for part, r in moved.items() if part != "main"} == \
        {part: 4 for part in runs if part != "main"}
    assert not registry.page("sample_size").grows_own_counts


def test_glued_words_paste_as_text_and_as_markdown(monkeypatch):
    """A page's finding clause is a value in words holding Markdown (its bold verdict): glued, it has the
    text/plain that ``{glue:text}`` reads and the text/markdown that ``{glue:md}`` reads (a build with
    warnings as errors failed on 'No text/markdown found'); numbers stay as they are."""
    from IPython.core.formatters import DisplayFormatter

    glued = {}
    monkeypatch.setattr(report, "glue", lambda key, value, display: glued.setdefault(key, value))
    report.glue_shown(shown.Shown(values={"p_finding": "**holds**, 3 of 4", "p_n": 3}), "p")
    bundle = DisplayFormatter().format(glued["p_finding"])[0]
    assert bundle == {"text/plain": "'**holds**, 3 of 4'", "text/markdown": "**holds**, 3 of 4"}
    assert glued["p_n"] == 3 and type(glued["p_n"]) is int
