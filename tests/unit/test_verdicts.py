"""Verdict rules on synthetic curves: each verdict, and each flip across its threshold."""

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.verdicts import rules as V
from rankcollapse.core.metrics import FLOOR_BAND

EPS = 2.0**-52


def geometric(rate: float, n_layers: int = 12, start: float = 0.5, x0: float = 0.9) -> list[float]:
    """X(0) value, then start * e^(-rate (layer - 1)) for layers 1..n_layers."""
    return [x0] + [start * math.exp(-rate * (k - 1)) for k in range(1, n_layers + 1)]


def test_geometric_decay_collapses_with_its_rate():
    curve = V.curve_verdict(geometric(0.7), EPS)
    assert curve.verdict == "collapses" and curve.floor_layer is None
    assert curve.rate == pytest.approx(0.7, rel=1e-9)
    assert curve.words == "collapses (rate 0.7/layer)"


def test_flat_curve_is_stable():
    curve = V.curve_verdict(geometric(0.0), EPS)
    assert curve.verdict == "stable" and curve.ratio == pytest.approx(1.0)
    assert curve.words.startswith("stable (rate 0/layer")


def test_rate_threshold_flips_collapse_and_stable():
    below = V.curve_verdict(geometric(0.9 * V.COLLAPSE_RATE, n_layers=12), EPS)  # x0.61 over 11 layers
    above = V.curve_verdict(geometric(1.1 * V.COLLAPSE_RATE, n_layers=12), EPS)
    assert (below.verdict, above.verdict) == ("stable", "collapses")


def test_slow_decay_below_the_rate_is_stable_until_it_falls_past_the_factor():
    rate = 0.9 * V.COLLAPSE_RATE
    fell_less = V.curve_verdict(geometric(rate, n_layers=40), EPS)  # e^-1.76 = 0.17 of layer 1
    fell_more = V.curve_verdict(geometric(rate, n_layers=60), EPS)  # e^-2.66 = 0.07 < 1/STABLE_FACTOR
    assert (fell_less.verdict, fell_more.verdict) == ("stable", "decays slowly")
    assert fell_more.ratio < 1 / V.STABLE_FACTOR < fell_less.ratio


def test_only_the_late_layers_decide_the_rate():
    # a steep first half, then flat: the early descent does not make it collapse (ratio stays within 10x)
    values = [0.9] + [0.5 * 0.8**k for k in range(6)] + [0.5 * 0.8**5] * 6
    assert V.curve_verdict(values, EPS).verdict == "stable"
    # flat first half, steep second half: collapses
    values = [0.9] + [0.5] * 6 + [0.5 * 0.5**k for k in range(1, 7)]
    assert V.curve_verdict(values, EPS).verdict == "collapses"


def test_decay_to_the_floor_collapses_and_names_the_layer():
    values = geometric(3.0, n_layers=20)  # reaches 10 eps at layer 1 + ln(0.5 / 2.2e-15) / 3 = 12.02 -> 13
    curve = V.curve_verdict(values, EPS)
    k = int(np.flatnonzero(np.array(values) <= FLOOR_BAND * EPS)[0])
    assert curve.verdict == "collapses" and curve.floor_layer == k == 13
    assert curve.words == "collapses (reaches the rounding floor within 13 layers)"
    assert curve.rate == pytest.approx(3.0)  # fitted above the band only
    # what follows on the floor (LayerNorm blowing noise back up) is not read
    bounced = values[:k + 1] + [0.3] * (len(values) - k - 1)
    assert V.curve_verdict(bounced, EPS).floor_layer == k


def test_the_floor_band_flips_a_slow_curve_into_collapse():
    values = geometric(0.0, n_layers=12, start=1e-3)
    assert V.curve_verdict(values, 0.99e-3 / FLOOR_BAND * 0.9).verdict == "stable"
    assert V.curve_verdict(values, 1.01e-3 / FLOOR_BAND).verdict == "collapses"


def test_collapse_within_one_layer_from_well_above():
    curve = V.curve_verdict([0.9, 1e-16] + [1e-16] * 10, EPS)
    assert curve.verdict == "collapses" and curve.floor_layer == 1
    assert curve.words == "collapses (reaches the rounding floor within 1 layer)"
    assert curve.ratio == pytest.approx(1e-16 / 0.9)


def test_a_curve_on_the_floor_from_x0_cannot_tell():
    curve = V.curve_verdict([1e-15] * 13, EPS)
    assert curve.verdict == "on the floor"
    assert curve.words.startswith("cannot tell")
    # just above the band at X(0): a collapse within one layer instead
    assert V.curve_verdict([FLOOR_BAND * EPS * 1.01] + [1e-15] * 12, EPS).verdict == "collapses"


def test_per_layer_floor_of_mu():
    norm = np.array([10.0 * 2.0**k for k in range(13)])  # ||X|| grows: mu's floor eps ||X|| grows with it
    mu = 1e-12 * norm  # relative mu flat at 1e-12, floor band at 10 eps = 2.2e-15: stable
    assert V.curve_verdict(mu, EPS * norm).verdict == "stable"
    assert V.curve_verdict(mu, 1e-13 * norm).verdict == "on the floor"


def test_claim_verdicts_and_their_flips():
    fast, flat = V.curve_verdict(geometric(0.7), EPS), V.curve_verdict(geometric(0.0), EPS)
    floor = V.curve_verdict([1e-15] * 13, EPS)
    assert V.claim_verdict("collapses", [fast, fast]).verdict == "holds"
    assert V.claim_verdict("collapses", [fast, flat]).verdict == "holds partly"
    assert V.claim_verdict("collapses", [flat, flat]).verdict == "does not hold"
    assert V.claim_verdict("stable", [flat, flat]).verdict == "holds"
    assert V.claim_verdict("collapses", [floor, floor]).verdict == "cannot tell: on the rounding floor"
    mixed = V.claim_verdict("collapses", {"a": fast, "b": floor, "c": fast})
    assert mixed.verdict == "holds" and mixed.words == "holds (2 of 2 curves collapse; 1 on the floor)"
    assert set(V.CLAIM_VERDICTS) == {"holds", "holds partly", "does not hold",
                                     "cannot tell: on the rounding floor"}


def test_speed_of_a_collapse_is_its_rate_or_the_layer_it_reaches_the_floor():
    # what a page compares two curves by: the fitted late rate, or the first layer on the floor
    rates = {r: V.curve_verdict(geometric(r), EPS) for r in (0.3, 0.1, 0.6)}
    assert [rates[r].rate for r in (0.1, 0.3, 0.6)] == pytest.approx([0.1, 0.3, 0.6], rel=1e-6)
    assert all(c.floor_layer is None for c in rates.values())
    at3 = V.curve_verdict([0.9, 1e-3, 1e-9, 1e-16] + [1e-16] * 9, EPS)
    at1 = V.curve_verdict([0.9] + [1e-16] * 12, EPS)
    assert (at3.floor_layer, at1.floor_layer) == (3, 1) and at3.collapses and at1.collapses
    assert V.curve_verdict([1e-16] * 13, EPS).verdict == "on the floor"


def _tidy(curves: dict[str, list[float]], eps: float) -> pd.DataFrame:
    rows = []
    for mask, values in curves.items():
        for layer, v in enumerate(values):
            norm = 100.0
            for metric, x in (("relative_mu", v), ("mu", v * norm), ("norm", norm), ("floor", eps * norm)):
                rows.append({"weights": "initialized", "variant": "SAN", "mask": mask, "window": None,
                             "temperature": None, "norm": "none", "skip": False, "layer": layer,
                             "metric": metric, "mean": 2 * x, "median": x, "q10": x, "q90": x,
                             "n_samples": 8})
    return pd.DataFrame(rows)


def test_table_verdicts_from_a_tidy_table_without_relative_floor():
    table = _tidy({"complete": geometric(0.7), "sliding_window": geometric(0.0)}, EPS)
    out = V.table_verdicts(table)
    assert list(out["mask"]) == ["complete", "sliding_window"]
    assert list(out["verdict"]) == ["collapses", "stable"]
    assert out["floor_layer"].isna().all() and str(out["floor_layer"].dtype) == "Int64"
    # the relative floor is eps (median floor / median norm), not eps ||X||: a curve at 1e-13 is above it
    low = V.table_verdicts(_tidy({"causal": [1e-13] * 13}, EPS))
    assert low["verdict"].item() == "stable"
    with_floor = pd.concat([table,
                            table[table["metric"] == "norm"].assign(metric="relative_floor", median=1.0)])
    assert set(V.table_verdicts(with_floor)["verdict"]) == {"on the floor"}  # the recorded floor is used
    assert list(V.table_verdicts(table, metric="mu")["verdict"]) == ["collapses", "stable"]


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="values must be a 1-D sequence"):
        V.curve_verdict([1.0, 0.5], EPS)
    with pytest.raises(ValueError, match="values must be finite"):
        V.curve_verdict([1.0, -0.5, 0.1], EPS)
    with pytest.raises(ValueError, match="floor must be finite"):
        V.curve_verdict([1.0, 0.5, 0.1], -1.0)
    with pytest.raises(ValueError, match="expected must be one of collapses, stable"):
        V.claim_verdict("holds", [V.curve_verdict(geometric(0.7), EPS)])
    with pytest.raises(ValueError, match="curves must be a non-empty"):
        V.claim_verdict("collapses", [])
    with pytest.raises(ValueError, match="metric must be one of"):
        V.table_verdicts(pd.DataFrame(), metric="numerical_rank")
