"""The four theory pages run under papermill at tiny parameters; their glued numbers are checked and every
figure's text reads at 9 px or more in the book's column."""

import math

import pytest

from rankcollapse.book.plotting.common import MIN_TEXT_PX
from glue import read_glue

from rankcollapse.book.runner import execute_page

pytestmark = pytest.mark.notebook


def _legible(sizes: dict[str, float], expected: set[str]) -> None:
    assert set(sizes) == expected
    assert min(sizes.values()) >= MIN_TEXT_PX, sizes


def _run(repo_root, tmp_path, page: str, parameters: dict) -> dict:
    return read_glue(execute_page(repo_root / "book" / "theory" / page, parameters,
                                  tmp_path / f"{page}.ipynb"))


def test_theorem1_page(repo_root, tmp_path, figure_dir, figure_text_px):
    glued = _run(repo_root, tmp_path, "theorem1.md", {
        "n_tokens": 8, "d_model": 4, "n_layers": 30, "n_samples": 3, "window": 1, "stride": 3,
        "dilation": 2, "random_density": 0.5, "sweep_windows": [1, 4], "temperatures": [1.0, 4.0],
    })
    assert glued["thm1_radius_causal"] == 1
    assert glued["thm1_radius_sliding_window"] == 4  # ceil(floor(8 / 2) / 1), by BFS on the page
    assert glued["thm1_radius_causal_sliding_window"] == 7
    assert glued["thm1_radius_global_window"] == 1
    # dilation 2 splits the tokens by parity: no center node, reported and still simulated
    assert glued["thm1_radius_dilated_window"] == "none" and "dilated_window" in glued["thm1_not_applicable"]
    assert glued["thm1_rate_dilated_window"] < glued["thm1_rate_sliding_window"]
    assert glued["thm1_linear_rate_causal"] == pytest.approx(math.log(2), rel=1e-3)
    assert glued["thm1_sweep_rate_wide"] > glued["thm1_sweep_rate_narrow"]
    assert glued["thm1_uni_vs_bi"] in ("faster", "slower")
    assert ((figure_dir / "fig-theorem1-masks.png").is_file()
            and (figure_dir / "fig-theorem1-rates.svg").is_file())
    assert (glued["thm1_shape_complete"] == "doubly exponential"
            and glued["thm1_shape_linear_causal"] == "exponential")
    _legible(figure_text_px(), {"fig-theorem1-masks", "fig-theorem1-rates", "fig-theorem1-linear",
                                "fig-theorem1-shape"})


def test_theorem2_page(repo_root, tmp_path, figure_dir, figure_text_px):
    glued = _run(repo_root, tmp_path, "theorem2.md", {
        "n_tokens": 6, "d_model": 4, "n_layers": 40, "n_samples": 3, "window": 1,
        "contrast_n_tokens": 4, "contrast_layers": 200, "contrast_samples": 40,
    })
    assert glued["thm2_rate_causal"] > 0.3
    assert glued["thm2_alive_causal_orthogonal"] == 0.0
    assert glued["thm2_contrast_d"] == 2 and glued["thm2_contrast_layers"] == 200
    assert glued["thm2_other_norms"].startswith("LayerNorm without affine")
    assert (figure_dir / "fig-theorem2-random.pdf").is_file()
    _legible(figure_text_px(), {"fig-theorem2-orthogonal", "fig-theorem2-random"})


def test_counterexample_page(repo_root, tmp_path, figure_dir, figure_text_px):
    glued = _run(repo_root, tmp_path, "counterexample.md", {
        "n_layers": 40, "n_angles": 48, "basin_layers": 80, "mc_samples": 2000, "mc_layers": 80,
    })
    assert (glued["ce_B_x"], glued["ce_B_y"]) == pytest.approx((-0.2585, -0.9660), abs=1e-4)
    assert (glued["ce_U_x"], glued["ce_U_y"]) == pytest.approx((-0.6827, 0.7307), abs=1e-4)
    assert glued["ce_B_multiplier"] < 1 < glued["ce_U_multiplier"]
    assert glued["ce_mc_low"] < glued["ce_mc_fraction"] < glued["ce_mc_high"]
    assert 0.07 < glued["ce_mc_fraction"] < 0.14
    assert glued["ce_rotation_gap"] < 1e-12 and glued["ce_gap_plain"] < 1e-6
    assert glued["ce_arc_fraction"] == pytest.approx((270 - math.degrees(math.atan2(0.7307, -0.6827))) / 360,
                                                     abs=1e-3)
    assert (figure_dir / "fig-counterexample-fig1.png").is_file()
    _legible(figure_text_px(), {"fig-counterexample-fig1", "fig-counterexample-basins",
                                "fig-counterexample-rotation"})


def test_equilibria_page(repo_root, tmp_path, figure_dir, figure_text_px):
    glued = _run(repo_root, tmp_path, "equilibria.md", {"n_samples": 600, "n_layers": 60,
                                                        "sweep_factors": [0.9, 1.5], "sweep_samples": 200,
                                                        "sweep_layers": 200})
    assert glued["eq_max_rank"] == 3
    assert glued["eq_max_residual"] < 1e-12
    assert all(glued[f"eq_low_rank{k}"] > 0 for k in (1, 2, 3))
    assert sum(glued[f"eq_fraction_rank{k}"] for k in (1, 2, 3)) == pytest.approx(1.0)
    assert glued["eq_threshold"] == pytest.approx(math.sqrt(0.2 * 1.8 / 2))  # c* at d = 3, a = 0.2
    assert glued["eq_sweep_max_below"] == 0 and glued["eq_sweep_min_above"] > 0
    assert ((figure_dir / "fig-equilibria-ranks.png").is_file()
            and (figure_dir / "fig-equilibria-threshold.svg").is_file())
    _legible(figure_text_px(), {"fig-equilibria-ranks", "fig-equilibria-threshold"})


@pytest.mark.parametrize("argv, words", [
    (["theorem1", "-p", "n_layers", "10"],
     "not converged at this depth (n_layers = 10, N = 16): the linear causal"),
    (["theorem1", "-p", "n_layers", "20", "-p", "n_tokens", "12"],
     "not converged at this depth (n_layers = 20, N = 12)"),
    (["theorem2", "-p", "contrast_layers", "50"],
     "not converged at this depth (contrast_layers = 50): with an orthogonal W_V, 42.5 % of the "
     "causal_sliding_window seeds"),
    (["counterexample", "-p", "n_layers", "5", "-p", "n_angles", "48", "-p", "basin_layers", "80",
      "-p", "mc_samples", "2000", "-p", "mc_layers", "80"],
     "not converged at this depth (n_layers = 5): without LayerNorm the pictured"),
    (["equilibria", "-p", "n_layers", "1", "-p", "n_samples", "10"],
     "not converged at this depth (n_layers = 1): after a kick of 0.0001 the rank-1 equilibrium has rank"),
    (["equilibria", "-p", "c", "5.0", "-p", "n_samples", "100", "-p", "sweep_samples", "20"],
     "too few samples (sweep_samples = 20): at the sweep's largest c / c* some width d has no start that "
     "stays apart"),
], ids=["theorem1-10-layers", "theorem1-20-layers-12-tokens", "theorem2-contrast-50",
        "counterexample-5-layers", "equilibria-1-layer", "equilibria-20-sweep-samples"])
def test_accepted_parameters_the_claim_needs_more_of_say_so(argv, words, tmp_path, capsys):
    """Parameters the page accepts but at which a claim is not yet visible: the page runs to its end and says
    which check does not hold, with its numbers (the command line repeats it), where an empty assert stopped
    it."""
    from rankcollapse.book import cli

    assert cli.main(["run", *argv, "--output", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and f"note: {words}" in out, out
    assert read_glue(tmp_path / "out" / f"{argv[0]}.ipynb")  # every glue of the page is there
