"""Claims tables: each verdict follows the numbers, and flips when a synthetic result is changed."""

import numpy as np
import pytest

from rankcollapse.book.pages import sample_size
from rankcollapse.verdicts import claims, rules
from rankcollapse.verdicts.effects import Side
from stored_claims import page_claims

EPS = np.finfo(np.float64).eps
LAYERS = np.arange(13)


def _side(label: str, curve: np.ndarray) -> Side:
    """A side without per-sample values: the curve, floor eps."""
    return Side(label, np.asarray(curve, dtype=np.float64), np.full(len(curve), EPS), None)


FAST, FLAT = 0.5 * np.exp(-0.7 * LAYERS), np.full(13, 0.5)


def test_layernorm_stops_a_collapse_only_where_pure_attention_collapses():
    pure, flat_pure = _side("pure", FAST), _side("pure", FLAT)
    ln_flat, ln_decaying = _side("LN", FLAT), _side("LN", 0.5 * np.exp(-0.5 * LAYERS))
    ln_floor = _side("LN", np.full(13, 2 * EPS))
    claim = claims.bounded_claim("LN stops it", "test", "m",
                                 {"a": (ln_flat, pure), "b": (ln_decaying, pure), "c": (ln_floor, pure),
                                  "d": (ln_flat, flat_pure)})
    assert [c.outcome for c in claim.cells] == ["holds", "does not hold", "cannot tell", "cannot tell"]
    assert claim.verdict == "holds partly"
    assert claim.number == "1 of the 2 decided stop the collapse; 2 cannot tell: c, d"
    # never "stable" from a short stack: with pure attention not collapsing there is nothing to stop
    only = claims.bounded_claim("LN stops it", "test", "m", {"d": (ln_flat, flat_pure)})
    assert only.verdict == "cannot tell"


def test_every_curve_collapses_beside_the_prediction():
    slow = _side("window", 0.5 * np.exp(-0.001 * LAYERS))
    claim = claims.collapse_claim("It collapses", "test", "m",
                                  {"fast": _side("complete", FAST), "slow": slow})
    assert [c.outcome for c in claim.cells] == ["holds", "cannot tell"] and claim.verdict == "holds"
    # the linear case predicts a collapse of 0.5 per layer over the same layers: the flat curve contradicts it
    predicted = {"slow": 0.5 ** LAYERS.astype(float)}
    against = claims.collapse_claim("It collapses", "test", "m", {"slow": slow}, predicted=predicted)
    assert against.verdict == "does not hold" and "the linear case predicts ×0.5" in against.cells[0].words
    agrees = claims.collapse_claim("It collapses", "test", "m", {"slow": slow},
                                   predicted={"slow": 0.5 * np.exp(-0.001 * LAYERS)})
    assert agrees.verdict == "cannot tell"


@pytest.fixture(scope="module")
def stored_pages():
    return page_claims()


def test_every_verdict_is_one_of_the_published_words_and_names_its_setting(stored_pages):
    for page, tables in stored_pages.items():
        for rows in tables.values():
            for row in rows:
                assert row.verdict in rules.CLAIM_VERDICTS, (page, row.claim)
                assert "issue" not in row.source and row.source.startswith(
                    ("the paper", "the response", "this book's control")), row.source


@pytest.mark.parametrize("ratio, verdict", [(1.5, "holds"), (4.0, "holds partly"), (20.0, "does not hold")])
def test_sample_size_claim_thresholds(ratio, verdict):
    assert sample_size.claims({"max_median_ratio": ratio, "small": 32, "large": 3000})[0].verdict == verdict


@pytest.mark.slow
def test_no_effect_on_any_stored_result_is_computed_from_layers_in_the_floor_band():
    """Over every stored result: every configuration's fit layers lie above the floor band, and the per-layer
    factor of any two configurations of one mask is a number only when both have at least MIN_FIT_LAYERS such
    layers (a curve that falls into the band first gives "cannot tell", never a ratio of rounding noise)."""
    from rankcollapse.experiments.store import ResultStore
    from rankcollapse.verdicts import effects, tables

    store, checked = ResultStore(), 0
    for page in sorted(p.name for p in store.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for key in store.keys(page):
            table = store.verify(page, key).table
            if "metric" not in table or not (table["metric"] == "relative_mu").any():
                continue
            curves = tables.table_verdicts(table)
            sides = [Side(str(i), r.values, r.floor, None) for i, r in enumerate(curves.itertuples())]
            for side, row in zip(sides, curves.itertuples()):
                layers, _ = rules.fit_layers(row.values, row.floor)
                above = row.values[layers] > rules.DEFAULTS.floor_band * row.floor[layers]
                assert above.all(), (page, key, row.mask, row.norm)
            rows = list(curves.itertuples())
            for (a, ra), (b, rb) in zip(zip(sides, rows), zip(sides[1:], rows[1:])):
                effect = effects.late_factor(a, b)
                enough = [len(rules.fit_layers(r.values, r.floor)[0]) >= rules.MIN_FIT_LAYERS
                          for r in (ra, rb)]
                assert np.isfinite(effect.estimate) == all(enough), (page, key, ra.mask, rb.mask)
                checked += 1
    assert checked > 100
