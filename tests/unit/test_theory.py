"""Unit tests for the pages that compute in their own module (rankcollapse.book.pages: setup, data, theorem1,
theorem2, counterexample, equilibria): each config's defaults are its page's parameters cell, each bad
parameter is named in its error, and the page functions on tiny configs."""

import math
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from rankcollapse.theory import counterexample as ce
from rankcollapse.theory.dynamics import log10_bound_rate
from rankcollapse.book import registry
from rankcollapse.book.pages import counterexample, data, equilibria, setup, theorem1, theorem2
from rankcollapse.book.runner import page_parameters

ROOT = Path(__file__).resolve().parents[2]
PAGES = {
    setup.SetupConfig: "book/setup.md",
    data.DataConfig: "book/data.md",
    theorem1.Theorem1Config: "book/theory/theorem1.md",
    theorem2.Theorem2Config: "book/theory/theorem2.md",
    counterexample.CounterexampleConfig: "book/theory/counterexample.md",
    equilibria.EquilibriaConfig: "book/theory/equilibria.md",
}


def _plain(value):
    """Tuples (a config's lists) back to lists, as the parameters cell writes them."""
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


@pytest.mark.parametrize("config_class", PAGES, ids=lambda c: c.__name__)
def test_config_defaults_are_the_page_parameters(config_class):
    cell = page_parameters(ROOT / PAGES[config_class])
    defaults = {k: _plain(v) for k, v in asdict(config_class()).items()}
    assert defaults == cell
    name = next(n for n, page in registry.PAGES.items() if page.source == PAGES[config_class])
    assert registry.configure(name, cell)["main"] == config_class()  # through the registry; lists: tuples


BAD = [
    (setup.SetupConfig, {"window": 16}, "window must be an integer in \\[1, 15\\]"),
    (setup.SetupConfig, {"table_windows": []}, "table_windows must be a non-empty list"),
    (data.DataConfig, {"model_specs": ["pkg:bert"]},
     "model_specs must be a non-empty tuple of distinct values"),
    (theorem1.Theorem1Config, {"dtype": "float16"}, "dtype must be one of 'float64', 'float32'"),
    (theorem1.Theorem1Config, {"temperature": 0.0}, "temperature must be a finite number > 0"),
    (theorem1.Theorem1Config, {"value_weights": "haar"}, "value_weights must be one of"),
    (theorem1.Theorem1Config, {"paper_masks": ["full"]}, "paper_masks must be a non-empty tuple"),
    (theorem1.Theorem1Config, {"sweep_windows": [1, 16]},
     "every entry of sweep_windows must be an integer in \\[1, 15\\]"),
    (theorem1.Theorem1Config, {"random_density": 0.0}, "random_density must be a number in \\(0.0, 1.0\\]"),
    (theorem1.Theorem1Config, {"y_min": 0.0}, "y_min must be a number in \\(0.0, 1.0\\)"),
    (theorem2.Theorem2Config, {"norms": ["layernorm", "unit"]}, "norms must start with 'unit'"),
    (theorem2.Theorem2Config, {"norms": ["unit", "sphere"]}, "norms must be a non-empty tuple"),
    (theorem2.Theorem2Config, {"contrast_window": 8}, "contrast_window must be an integer in \\[1, 7\\]"),
    (theorem2.Theorem2Config, {"collapse_tol": -1.0}, "collapse_tol must be a number in \\(0.0, 1.0\\]"),
    (counterexample.CounterexampleConfig, {"W_V": [[1.0, 0.0]]},
     "W_V must be a 2 x 2 list of finite numbers"),
    (counterexample.CounterexampleConfig, {"W_V": [[1.0, 0.0], [0.0, 1.0]]},
     "W_V=.*has no stable fixed point B"),
    (counterexample.CounterexampleConfig, {"W_V": [[0.5, 0.5], [0.0, 1.0]]}, "c\\^2 \\+ \\(1 - a\\)\\^2 > 1"),
    (counterexample.CounterexampleConfig, {"n_angles": 2}, "n_angles must be an integer in \\[8,"),
    (counterexample.CounterexampleConfig, {"starts_token2": []}, "starts_token2 must be a non-empty list"),
    (equilibria.EquilibriaConfig, {"a": 1.0}, "a must be a number in \\(0.0, 1.0\\)"),
    (equilibria.EquilibriaConfig, {"c": 0.4}, "c must be a number in \\[0.428"),  # c* = 0.4243 at d = 3
    (equilibria.EquilibriaConfig, {"d_model": 7}, "d_model must be an integer in \\[2, 6\\]"),
    (equilibria.EquilibriaConfig, {"sweep_factors": [1.1, 1.5]},
     "sweep_factors must hold values below and above 1"),
]


@pytest.mark.parametrize("config_class, change, message", BAD, ids=[str(c) for _, c, _ in BAD])
def test_bad_parameter_is_named(config_class, change, message):
    with pytest.raises(ValueError, match=message):
        config_class(**change)


def test_log10_bound_rate_survives_underflow():
    # epsilon^r = 1.1e-313 is subnormal: the old table printed the rate 2.76e-314; the log is exact
    assert log10_bound_rate(5.763252e-79, 4) == pytest.approx(4 * math.log10(5.763252e-79) - math.log10(4))
    assert log10_bound_rate(0.5, 1) == pytest.approx(math.log10(math.log(2)))
    assert math.isnan(log10_bound_rate(0.5, None)) and math.isnan(log10_bound_rate(0.0, 2))


def test_setup_radius_table():
    result = setup.compute(setup.SetupConfig(n_tokens=9, window=2, table_n_tokens=(8, 9),
                                             table_windows=(1, 2)))
    assert result.numbers["setup_radius_uni"] == 4 and result.numbers["setup_radius_sliding"] == 2
    assert result.radii.loc[9, ("uni-directional window", 1)] == 8


def test_theorem1_tiny():
    config = theorem1.Theorem1Config(n_tokens=8, d_model=4, n_layers=20, n_samples=2, window=1, stride=3,
                                     sweep_windows=(1, 4), temperatures=(1.0, 4.0),
                                     zoo_masks=("dilated_window",))
    result = theorem1.compute(config)
    assert result.numbers["thm1_radius_dilated_window"] == "none"
    assert result.table.loc["dilated_window", "Theorem 1 bound"] == "does not apply: no center node"
    assert (result.table.drop(index="dilated_window")["Theorem 1 bound"] == "holds at every layer").all()
    assert result.linear.loc["causal", "|lambda_2|"] == pytest.approx(0.5)
    assert result.exact_gap < 10 and result.numbers["thm1_uni_vs_bi"] in ("faster", "slower")


def test_faster_or_slower():
    assert theorem1.faster_or_slower(0.5, 0.1) == "faster" and theorem1.faster_or_slower(0.1, 0.5) == "slower"


def test_counterexample_fixed_points_and_measure():
    config = counterexample.CounterexampleConfig(n_layers=40, n_angles=48, basin_layers=80, mc_samples=500,
                                                 mc_layers=80)
    n = counterexample.compute(config).numbers
    assert (n["ce_B_x"], n["ce_B_y"]) == pytest.approx((-0.2585, -0.9660), abs=1e-4)
    assert n["ce_B_multiplier"] < 1 < n["ce_U_multiplier"] and n["ce_max_residual"] < 1e-12
    assert n["ce_mc_low"] > 0 and 0 < n["ce_n_full_rank_starts"] < n["ce_n_starts"]


@pytest.mark.parametrize("d_model", [2, 3, 4])
def test_every_rank_threshold_switches_uncollapsed_starts_on(d_model):
    threshold = ce.every_rank_threshold(d_model, 0.2)
    assert threshold == pytest.approx(math.sqrt(0.36 / (d_model - 1)))
    below = equilibria.uncollapsed_fraction(d_model, 0.2, 0.9 * threshold, 6, 300, 300, seed=1)
    above = equilibria.uncollapsed_fraction(d_model, 0.2, 1.5 * threshold, 6, 300, 300, seed=1)
    assert below.fraction == 0 and above.fraction > 0


def test_old_threshold_is_wrong_for_d3():
    # the page's old claim: every start collapses for c < sqrt(1 - (1 - a)^2) = 0.6 (a = 0.2); at d = 3 and
    # c = 0.59 many starts still keep rank 2 or 3
    assert equilibria.uncollapsed_fraction(3, 0.2, 0.59, 6, 400, 300, seed=0).low > 0.05


def test_equilibria_between_the_thresholds_use_tilted_planes():
    # d = 3, c* = 0.424 < c = 0.5 < sqrt(a (2 - a)) = 0.6: no point B on the axes, but every rank exists
    W_V = ce.every_rank_value_matrix(3, 0.2, 0.5)
    equilibria = ce.every_rank_equilibria(6, 3, 0.2, 0.5)
    assert [int(torch.linalg.matrix_rank(X)) for X in equilibria] == [1, 2, 3]
    for X in equilibria:
        torch.testing.assert_close(ce.star_map(X[None], W_V)[0], X, rtol=0, atol=1e-12)


def test_equilibria_page_tiny():
    config = equilibria.EquilibriaConfig(n_samples=300, n_layers=60, sweep_d_models=(3,),
                                         sweep_factors=(0.9, 1.5), sweep_samples=200, sweep_layers=200)
    result = equilibria.compute(config)
    assert (list(result.equilibria.index) == [1, 2, 3]
            and (result.equilibria["rank after a kick"] == [1, 2, 3]).all())
    assert (result.fractions["low"] > 0).all()
    assert result.numbers["eq_sweep_max_below"] == 0 and result.numbers["eq_sweep_min_above"] > 0
