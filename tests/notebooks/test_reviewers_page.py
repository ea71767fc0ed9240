"""The reviewers' questions page runs under papermill at small parameters (Fig. 2's stored sweep for the
first question); its glued answers are checked and every figure's text reads at 9 px or more."""

import math

import pytest
from glue import read_glue

from rankcollapse.book.plotting.common import MIN_TEXT_PX
from rankcollapse.book.runner import execute_page

pytestmark = pytest.mark.notebook


def test_reviewers_page(repo_root, tmp_path, figure_dir, figure_text_px):
    glued = read_glue(execute_page(repo_root / "book" / "response" / "reviewers.md", {
        "n_samples": 4, "complete_layers": 6, "linear_layers": 60, "rotations": [0.7, 1.9], "pair_layers": 20,
        "path_points": 9, "path_depths": [30, 300], "bisection_rounds": 3, "widths": [8, 16],
        "width_layers": 12, "width_seeds": 2, "width_masks": ["causal", "complete"],
    }, tmp_path / "reviewers.ipynb"))
    assert abs(glued["rv_causal_ratio_40"] - 0.5) < 1e-6
    assert glued["rv_complete_loglog_slope"] > 0.5 > glued["rv_linear_loglog_slope"]
    assert glued["rv_jordan_algebraic"] == 14 and glued["rv_jordan_geometric"] == 1
    assert glued["rv_rotation_max_gap"] < 1e-12 and glued["rv_rotation_min_coordinate"] > 0.1
    assert abs(glued["rv_path_s_analytic"] - 1 / math.sqrt(4.25)) < 1e-3
    assert glued["rv_width_largest"] == 16
    assert glued["rv_q1_normed_to_zero"] == 0 and glued["rv_q1_normed"] == 16  # Fig. 2's LayerNorm curves
    assert glued["rv_q1_pure_collapse_to_zero"] + glued["rv_q1_pure_collapse_to_a_common_nonzero_vector"] \
        + glued["rv_q1_pure_no_collapse"] + glued["rv_q1_pure_cannot_tell"] == glued["rv_q1_pure"] == 8
    sizes = figure_text_px()
    assert set(sizes) == {"fig-reviewers-limits", "fig-reviewers-decay", "fig-reviewers-linear",
                          "fig-reviewers-rotation", "fig-reviewers-path", "fig-reviewers-width",
                          "fig-reviewers-temperature",
                          "fig-reviewers-local", "fig-reviewers-samples"}
    assert -1 <= glued["rv_temp_initialized_correlation"] <= 1
    # every section has its claims row; the 32-samples one is the sample-size page's rule on Fig. 2's pair
    assert "rv_claim_samples" in glued and "Results on the large sample are similar" in (
        tmp_path / "reviewers.ipynb").read_text()  # glued as Markdown: its plain text is the object's repr
    assert min(sizes.values()) >= MIN_TEXT_PX, sizes
