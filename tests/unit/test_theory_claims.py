"""The theory pages' checked statements as claims rows: one row per statement, sourced to the paper (or to
this book's construction), its verdict the very condition of the page's closing check, so a row says "does not
hold" exactly when the check note lists that statement."""

import pytest

from rankcollapse.book.pages import counterexample, equilibria, theorem1, theorem2
from rankcollapse.book.registry import Computed
from rankcollapse.book.shown import CHECK_HEADING

# (module, a tiny config, the rows that do not hold on it)
CASES = {
    "theorem1": (theorem1, theorem1.Theorem1Config(
        n_tokens=8, d_model=4, n_layers=20, n_samples=2, window=1, stride=3, sweep_windows=(1, 4),
        temperatures=(1.0, 4.0), zoo_masks=("dilated_window",)), [3]),  # 20 layers: linear rate not yet log 2
    "theorem2": (theorem2, theorem2.Theorem2Config(
        n_tokens=8, n_layers=20, n_samples=2, contrast_layers=3, contrast_samples=20), [2]),  # 3 layers
    "counterexample": (counterexample, counterexample.CounterexampleConfig(
        n_layers=3, n_angles=48, basin_layers=80, mc_samples=500, mc_layers=80), [1, 2]),  # 3 layers: apart
    "equilibria": (equilibria, equilibria.EquilibriaConfig(
        n_samples=300, n_layers=60, sweep_d_models=(3,), sweep_factors=(0.9, 1.5), sweep_samples=200,
        sweep_layers=200), []),
}


@pytest.fixture(scope="module", params=list(CASES))
def page(request):
    module, config, failing = CASES[request.param]
    result = module.compute(config)
    return module, config, result, failing


def test_each_checked_statement_is_a_row_that_fails_exactly_when_the_check_says_so(page):
    module, config, result, failing = page
    (prefix, rows), = module.page_claims({"main": Computed(config, result, 0.0)}, {}).items()
    assert rows == module.claims(config, result)
    assert [n for n, row in enumerate(rows, start=1) if row.verdict == "does not hold"] == failing
    assert all(row.verdict in ("holds", "does not hold") for row in rows)
    assert all(row.source.startswith(("the paper: ", "the response: ", "this book's")) for row in rows)
    note = module.check(config, result)
    if failing:
        assert note.startswith(CHECK_HEADING) and note.count("\n- ") == len(failing)
    else:
        assert note == "All of these checks hold on this run."


def test_the_bound_row_has_a_cell_per_mask_with_a_center():
    module, config, _ = CASES["theorem1"]
    result = module.compute(config)
    bound = module.claims(config, result)[0]
    assert [c.column for c in bound.cells] == ["complete", "causal", "sliding_window",
                                               "causal_sliding_window"]
    assert "not checked: dilated window (does not apply: no center node)" in bound.number
