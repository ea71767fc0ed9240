"""verdicts.limits on three synthetic curves with known limits, and on a tidy table."""

import numpy as np
import pandas as pd
import pytest

from rankcollapse.verdicts import limits

T = np.arange(13)
EPS = 2.2e-16


def test_decaying_norm_is_a_collapse_to_zero():
    verdict = limits.limit_verdict(3.0 * 0.6 ** T, np.full(13, 0.4), EPS)  # tokens keep their spread, X -> 0
    assert verdict.limit == limits.TO_ZERO and verdict.norm.collapses and not verdict.relative.collapses


def test_aligned_nonzero_is_a_collapse_to_a_common_vector():
    verdict = limits.limit_verdict(np.full(13, 5.0), 0.4 * 0.3 ** T, EPS, cosine=1 - 0.3 ** T)
    assert verdict.limit == limits.TO_VECTOR and verdict.cosine_last == pytest.approx(1.0)
    assert "mean |cos| 1" in verdict.words


def test_stable_curves_do_not_collapse():
    verdict = limits.limit_verdict(np.full(13, 5.0) + 0.1 * np.sin(T), np.full(13, 0.4), EPS)
    assert verdict.limit == limits.NO_COLLAPSE


def test_growing_norm_with_aligned_tokens_is_a_common_vector_and_reads_grows():
    verdict = limits.limit_verdict(2.0 ** T, 0.4 * 0.3 ** T, EPS)
    assert verdict.limit == limits.TO_VECTOR and "grows (x2e+03 of layer 1" in verdict.words


def test_on_the_floor_and_bad_input():
    assert limits.limit_verdict(np.ones(13), np.full(13, 1e-16), EPS).limit == limits.ON_FLOOR
    with pytest.raises(ValueError, match="norm"):
        limits.limit_verdict(-np.ones(13), np.full(13, 0.4), EPS)


def _rows(norm_label, norm, relative):
    return [{"weights": "initialized", "mask": "causal", "norm": norm_label, "layer": t, "metric": metric,
             "median": value} for t in T for metric, value in
            (("norm", norm[t]), ("relative_mu", relative[t]), ("relative_floor", EPS))]


def test_table_limits_per_configuration():
    table = pd.DataFrame(_rows("none", 0.5 ** T, np.full(13, 0.4))
                         + _rows("unit", np.ones(13), 0.4 * 0.3 ** T))
    found = limits.table_limits(table).set_index("norm")
    assert found.loc["none", "limit"] == limits.TO_ZERO and found.loc["unit", "limit"] == limits.TO_VECTOR
    assert found.loc["none", "norm ratio"] == pytest.approx(0.5 ** 11)
    assert np.isnan(found.loc["unit", "cosine"])
    with pytest.raises(ValueError, match="dtype"):
        limits.table_limits(table, "float16")
