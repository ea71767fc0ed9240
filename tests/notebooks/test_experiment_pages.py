"""Every experiment page runs under papermill at tiny parameters, its asserts hold and its glued numbers
follow the parameters. One results store per module: the pretrained-panels page must reuse the Fig. 2
and Fig. 3 results (loaded, not recomputed)."""

import json

import pytest

from glue import read_glue

from rankcollapse.book.runner import execute_page

pytestmark = [pytest.mark.notebook, pytest.mark.models]

TINY = {"n_samples": 2, "n_tokens": 8, "n_layers": 4, "window": 2}


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("results")


@pytest.fixture(autouse=True)
def isolated_store(results_dir, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(results_dir))


def _run(repo_root, tmp_path, page, parameters):
    out = execute_page(repo_root / "book" / f"{page}.md", parameters, tmp_path / "page.ipynb")
    return read_glue(out)


def test_fig2(repo_root, tmp_path, figure_dir, results_dir):
    glued = _run(repo_root, tmp_path, "experiments/fig2", TINY)
    assert glued["fig2_n_layers"] == 4
    assert glued["fig2_pure_complete"] < glued["fig2_pure_window"]
    assert glued["fig2_ln_complete_over_floor"] == pytest.approx(glued["fig2_ln_complete"]
                                                                 / glued["fig2_floor_complete"])
    meta = json.loads((figure_dir / "fig-fig2-mu.json").read_text())
    assert meta["parameters"]["n_tokens"] == 8 and "pretrained" in meta["parameters"]["weights"]
    assert {p.suffix for p in figure_dir.glob("fig-fig2-mu.*")} == {".png", ".svg", ".pdf", ".json", ".csv"}
    # the main sweep, its controls, the pretrained no-mixing control, four more weight seeds, the HF init, the
    # pretrained components and the decomposition, each with its per-sample values
    assert (len(list((results_dir / "fig2").glob("*.csv.gz"))) == 10
            == len(list((results_dir / "fig2").glob("*.samples.npz"))))
    assert glued["fig2_n_seeds"] == 5 and "fig-fig2-controls" in {p.stem for p in figure_dir.glob("*.json")}
    assert "fig2_controls_claims" in glued  # and the clauses of the controls paragraph, from the same numbers
    # the finding's clauses, and where the verdict differs by setting, in words chosen by the numbers
    assert glued["fig2_finding_collapse"] and glued["fig2_finding_layernorm"] and glued["fig2_controls_scale"]
    assert isinstance(glued["fig2_setting_differences"], str)
    assert "fig-fig2-decomposition" in {p.stem for p in figure_dir.glob("*.json")}
    assert "fig2_decomp_claims" in glued and "fig_fig2_decomposition_notes" in glued
    assert glued["fig2_decomp_local"].startswith("initialized with biases, ")


def test_fig3(repo_root, tmp_path):
    glued = _run(repo_root, tmp_path, "experiments/fig3", TINY)
    assert glued["fig3_ratio_init"] > 1 and glued["fig3_ratio_pre"] > 1


def test_pretrained_panels_reuse_fig2_and_fig3(repo_root, tmp_path, figure_dir, results_dir):
    glued = _run(repo_root, tmp_path, "response/pretrained_panels", TINY)
    assert glued["panels_gap_fig2"] > 1.01 and glued["panels_gap_fig3"] > 1.01
    assert not (results_dir / "pretrained_panels").exists()  # loaded the Fig. 2 / 3 results
    meta = json.loads((figure_dir / "fig-pretrained-panels-fig2.json").read_text())
    assert meta["parameters"]["weights"]["pretrained"].startswith("pretrained: all-MiniLM-L6-v2")
    assert len(meta["parameters"]["pretrained_weight_sha256"]) == 64


def test_fig4(repo_root, tmp_path):
    glued = _run(repo_root, tmp_path, "experiments/fig4", {k: v for k, v in TINY.items() if k != "window"})
    assert glued["fig4_full_rank_full"] == 100.0 and glued["fig4_full_rank_pure"] == 0.0
    assert 0 < glued["fig4_cos_first"] < 1


def test_appendix_g1(repo_root, tmp_path, figure_dir, results_dir):
    glued = _run(repo_root, tmp_path, "experiments/appendix_g1", {**TINY, "n_layers": 6, "n_weight_seeds": 3})
    assert glued["g1_n_masks"] == 4 and 1 <= glued["g1_masks_at_floor"] <= 4
    assert (figure_dir / "fig-appendix-g1-fig3.pdf").is_file()
    # the two sweeps of the figures and, per weight seed, both again with and without biases
    weights = sorted(tuple(json.loads(p.read_text())["parameters"]["weights"])
                     for p in (results_dir / "appendix_g1").glob("*.json"))
    assert weights == [("initialized",)] * 2 + [("initialized", "initialized_nobias")] * 6
    assert glued["g1_n_seeds"] == 3 and "pure attention collapses under every mask" in glued[
        "g1_finding_initialized_nobias"]


def test_sample_size(repo_root, tmp_path):
    glued = _run(repo_root, tmp_path, "response/sample_size",
                 {**TINY, "n_samples": 4, "n_samples_small": 2})
    assert 1 <= glued["sample_size_median_mean_ratio"] <= glued["sample_size_max_mean_ratio"]
    assert 1 <= glued["sample_size_max_median_ratio"] < 10 and glued["sample_size_small"] == 2


def test_skip_connections(repo_root, tmp_path, results_dir):
    glued = _run(repo_root, tmp_path, "response/skip_connections",
                 {k: v for k, v in {**TINY, "n_layers_deep": 8}.items() if k != "window"})
    assert glued["skip_deep_skip_over_floor"] > 1e3 and glued["skip_deep_pure_over_floor"] < 10
    # the shallow and deep parts with biases, and of each of the 5 bias-free weight seeds
    depths = sorted(max(json.loads(p.read_text())["depth"].values())
                    for p in (results_dir / "skip_connections").glob("*.json"))
    assert depths == [4] * 6 + [8] * 6


def test_fig3_takes_the_readers_temperatures(repo_root, tmp_path):
    glued = _run(repo_root, tmp_path, "experiments/fig3", {**TINY, "temperatures": [0.5, 2.0]})
    assert glued["fig3_cold"] == 0.5 and glued["fig3_warm"] == 2.0
