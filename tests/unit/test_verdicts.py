"""Verdict rules on synthetic curves: each verdict, and each flip across its threshold."""

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.core import stats
from rankcollapse.verdicts import rules as V
from rankcollapse.verdicts import tables as T
from rankcollapse.core.metrics import FLOOR_BAND

EPS = 2.0**-52


def geometric(rate: float, n_layers: int = 12, start: float = 0.5, x0: float = 0.9) -> list[float]:
    """X(0) value, then start * e^(-rate (layer - 1)) for layers 1..n_layers."""
    return [x0] + [start * math.exp(-rate * (k - 1)) for k in range(1, n_layers + 1)]


def noisy_samples(rate: float, n_layers: int, n_samples: int = 64, sd: float = 0.05,
                  seed: int = 0) -> np.ndarray:
    """Per-sample curves 0.5 e^(-rate t) with an independent log-normal factor per sample and layer.
    Shapes: -> [layer + 1, sample]."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_layers + 1)[:, None]
    return 0.5 * np.exp(-rate * t + sd * rng.normal(size=(n_layers + 1, n_samples)))


def test_geometric_decay_collapses_with_its_factor():
    curve = V.curve_verdict(geometric(0.7), EPS)
    assert curve.verdict == "collapses" and curve.floor_layer is None
    assert curve.rate == pytest.approx(0.7, rel=1e-9) and curve.factor == pytest.approx(math.exp(-0.7))
    assert curve.fit == (7, 12)  # the late half of the layers above the band
    assert curve.words == "collapses, factor 0.497 per layer, no interval (layers 7–12)"


def test_a_flat_curve_is_not_resolved_never_stable():
    curve = V.curve_verdict(geometric(0.0), EPS)
    assert curve.verdict == "not resolved" and not curve.collapses
    assert curve.words == "no collapse resolved in 12 layers: factor 1 per layer, no interval (layers 7–12)"


def test_without_an_interval_the_collapse_rate_decides():
    below = V.curve_verdict(geometric(0.9 * V.COLLAPSE_RATE), EPS)
    above = V.curve_verdict(geometric(1.1 * V.COLLAPSE_RATE), EPS)
    assert (below.verdict, above.verdict) == ("not resolved", "collapses")


def test_a_slow_collapse_is_resolved_at_depth_and_not_in_a_short_stack():
    """The same slowly decaying curve (0.01 per layer, noisy samples): its interval excludes 1 over 128
    layers — collapses — but not over the first 12, where it reads "no collapse resolved in 12 layers"."""
    samples = noisy_samples(0.01, 128, n_samples=32, sd=0.3)
    deep = V.curve_verdict(np.median(samples, axis=1), EPS, draws=stats.resampled_medians(samples))
    short = samples[:13]
    shallow = V.curve_verdict(np.median(short, axis=1), EPS, draws=stats.resampled_medians(short))
    assert deep.verdict == "collapses" and deep.high < 1
    assert deep.factor == pytest.approx(math.exp(-0.01), abs=2e-3)
    assert shallow.verdict == "not resolved" and shallow.low < 1 < shallow.high
    assert shallow.words.startswith("no collapse resolved in 12 layers: factor ")
    assert shallow.text.startswith("not resolved in 12 layers (×")


def test_only_the_late_layers_decide_the_factor():
    # a steep first half, then flat: not resolved; flat first half, steep second half: collapses
    values = [0.9] + [0.5 * 0.8**k for k in range(6)] + [0.5 * 0.8**5] * 6
    assert V.curve_verdict(values, EPS).verdict == "not resolved"
    values = [0.9] + [0.5] * 6 + [0.5 * 0.5**k for k in range(1, 7)]
    assert V.curve_verdict(values, EPS).verdict == "collapses"
    # a window of layers is read instead of the late ones (Fig. 3's "shallow layers")
    early = [0.9] + [0.5 * 0.5**k for k in range(6)] + [0.5 * 0.5**5] * 6
    assert V.curve_verdict(early, EPS).verdict == "not resolved"
    shallow = V.curve_verdict(early, EPS, window=(1, 6))
    assert shallow.verdict == "collapses" and shallow.fit == (1, 6)


def test_decay_to_the_floor_collapses_with_the_factor_fitted_above_the_band():
    values = geometric(3.0, n_layers=20)  # reaches 10 eps at layer 1 + ln(0.5 / 2.2e-15) / 3 = 12.02 -> 13
    curve = V.curve_verdict(values, EPS)
    k = int(np.flatnonzero(np.array(values) <= FLOOR_BAND * EPS)[0])
    assert curve.verdict == "collapses" and curve.floor_layer == k == 13
    assert curve.rate == pytest.approx(3.0) and curve.fit == (7, 12)  # above the band only
    assert curve.words.endswith("; reaches the rounding floor at layer 13")
    # what follows on the floor (LayerNorm blowing noise back up) is not read
    bounced = values[:k + 1] + [0.3] * (len(values) - k - 1)
    assert V.curve_verdict(bounced, EPS).floor_layer == k


def test_a_collapse_to_the_floor_in_fewer_than_the_fit_layers_is_a_bound_not_a_factor():
    curve = V.curve_verdict([0.9, 0.01, 1e-16] + [1e-16] * 10, EPS)
    assert curve.verdict == "reaches the floor" and curve.collapses and curve.factor is None
    assert curve.bound == pytest.approx((FLOOR_BAND * EPS / 0.9) ** 0.5)
    assert curve.text == "floor at layer 2"
    # at 3 fit layers the factor is fitted: MIN_FIT_LAYERS decides
    three = V.curve_verdict([0.9, 0.5, 0.05, 0.005, 1e-16] + [1e-16] * 8, EPS)
    assert three.verdict == "collapses" and three.fit == (1, 3)


def test_the_floor_band_flips_a_slow_curve_into_collapse():
    values = geometric(0.0, n_layers=12, start=1e-3)
    assert V.curve_verdict(values, 0.99e-3 / FLOOR_BAND * 0.9).verdict == "not resolved"
    assert V.curve_verdict(values, 1.01e-3 / FLOOR_BAND).verdict == "reaches the floor"


def test_a_curve_on_the_floor_from_x0_cannot_tell():
    curve = V.curve_verdict([1e-15] * 13, EPS)
    assert curve.verdict == "on the floor" and curve.words.startswith("cannot tell")
    assert V.curve_verdict([FLOOR_BAND * EPS * 1.01] + [1e-15] * 12, EPS).verdict == "reaches the floor"


def test_per_layer_floor_of_mu():
    norm = np.array([10.0 * 2.0**k for k in range(13)])  # ||X|| grows: mu's floor eps ||X|| grows with it
    mu = 1e-12 * norm  # relative mu flat at 1e-12, floor band at 10 eps = 2.2e-15: not resolved
    assert V.curve_verdict(mu, EPS * norm).verdict == "not resolved"
    assert V.curve_verdict(mu, 1e-13 * norm).verdict == "on the floor"


def test_claim_verdicts_and_the_prediction_that_decides_an_unresolved_curve():
    fast, flat = V.curve_verdict(geometric(0.7), EPS), V.curve_verdict(geometric(0.0), EPS)
    floor = V.curve_verdict([1e-15] * 13, EPS)
    assert V.claim_verdict([fast, fast]).verdict == "holds"
    assert V.claim_verdict([fast, flat]).verdict == "holds"  # the flat one decides nothing
    assert V.claim_verdict([flat, floor]).verdict == "cannot tell"
    grows = V.curve_verdict([0.9] + [0.1 * 1.2**k for k in range(12)], EPS)
    assert V.claim_verdict([fast, grows]).verdict == "holds partly"
    assert V.collapse_outcome(flat) == "cannot tell"
    # a prediction of 0.5 per layer would have been resolved: the flat curve then contradicts it
    assert V.collapse_outcome(flat, predicted=0.5) == "does not hold"
    assert V.collapse_outcome(flat, predicted=1.0) == "cannot tell"
    assert set(V.CLAIM_VERDICTS) == {"holds", "holds partly", "does not hold", "cannot tell"}


def test_factor_words_keep_the_digits_that_tell_it_from_one():
    assert V.factor_text(0.999534) == "0.99953" and V.factor_text(0.51234) == "0.512"
    assert V.factor_text(1.0) == "1" and V.factor_text(math.nan) == "n/a"


def _tidy(curves: dict[str, list[float]], eps: float, exact: float | None = None) -> pd.DataFrame:
    rows = []
    for mask, values in curves.items():
        for layer, v in enumerate(values):
            norm = 100.0
            metrics = [("relative_mu", v), ("mu", v * norm), ("norm", norm), ("floor", eps * norm)]
            if exact is not None:
                metrics.append(("exact", exact))
            for metric, x in metrics:
                rows.append({"weights": "initialized", "variant": "SAN", "mask": mask, "window": None,
                             "temperature": None, "norm": "none", "skip": False, "layer": layer,
                             "metric": metric, "mean": 2 * x, "median": x, "q10": x, "q90": x,
                             "n_samples": 8})
    return pd.DataFrame(rows)


def test_table_verdicts_from_a_tidy_table_without_relative_floor():
    table = _tidy({"complete": geometric(0.7), "sliding_window": geometric(0.0)}, EPS)
    out = T.table_verdicts(table)
    assert list(out["mask"]) == ["complete", "sliding_window"]
    assert list(out["verdict"]) == ["collapses", "not resolved"]
    assert out["floor_layer"].isna().all() and str(out["floor_layer"].dtype) == "Int64"
    # the relative floor is eps (median floor / median norm), not eps ||X||: a curve at 1e-13 is above it
    low = T.table_verdicts(_tidy({"causal": [1e-13] * 13}, EPS))
    assert low["verdict"].item() == "not resolved"
    with_floor = pd.concat([table,
                            table[table["metric"] == "norm"].assign(metric="relative_floor", median=1.0)])
    assert set(T.table_verdicts(with_floor)["verdict"]) == {"on the floor"}  # the recorded floor is used
    assert list(T.table_verdicts(table, metric="mu")["verdict"]) == ["collapses", "not resolved"]


def test_a_curve_tracked_exactly_has_no_floor_but_underflow():
    deep = [0.9] + [0.5 * 0.5**k for k in range(60)]  # 4e-19 at layer 60: far below 10 eps
    direct = T.table_verdicts(_tidy({"causal": deep}, EPS, exact=0.0))
    exact = T.table_verdicts(_tidy({"causal": deep}, EPS, exact=1.0))
    assert direct["floor_layer"].item() == 49 and exact["floor_layer"].isna().item()
    assert exact["curve"].item().fit == (31, 60)


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="values must be a 1-D sequence"):
        V.curve_verdict([1.0, 0.5], EPS)
    with pytest.raises(ValueError, match="values must be finite"):
        V.curve_verdict([1.0, -0.5, 0.1], EPS)
    with pytest.raises(ValueError, match="floor must be finite"):
        V.curve_verdict([1.0, 0.5, 0.1], -1.0)
    with pytest.raises(ValueError, match="window must be"):
        V.curve_verdict(geometric(0.7), EPS, window=(0, 4))
    with pytest.raises(ValueError, match="curves must be a non-empty"):
        V.claim_verdict([])
    with pytest.raises(ValueError, match="metric must be one of"):
        T.table_verdicts(pd.DataFrame(), metric="numerical_rank")
    with pytest.raises(ValueError, match="min_fit_layers must be an integer >= 2"):
        V.Thresholds(min_fit_layers=1)
