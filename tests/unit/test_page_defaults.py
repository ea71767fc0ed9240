"""A page's defaults live in its ``parameters`` cell: the config dataclass of a page that computes in its own
module repeats them as field defaults (so the module runs alone), and this test pins every such field, one by
one, to the cell's value."""

import dataclasses

import pytest

from rankcollapse.book import registry
from rankcollapse.book.runner import page_parameters

from conftest import ROOT


def _lists(value: object) -> object:
    """Tuples as the parameters cell's lists (nested too)."""
    return [_lists(v) for v in value] if isinstance(value, (tuple, list)) else value


def _config_classes(name: str) -> list[type]:
    """The config dataclasses page ``name`` builds at its defaults (its own module's, not sweeps)."""
    configs = registry.configure(name, page_parameters(registry.page(name).path(ROOT))).values()
    return [type(c) for c in configs if dataclasses.is_dataclass(c) and type(c).__module__.startswith(
        "rankcollapse.book.pages")]


PAGES_WITH_CONFIGS = [name for name in registry.PAGES if _config_classes(name)]


def test_the_pages_that_compute_in_their_module_are_found():
    assert {"setup", "data", "theorem1", "theorem2", "counterexample", "equilibria", "reviewers"} <= set(
        PAGES_WITH_CONFIGS)


@pytest.mark.parametrize("name", PAGES_WITH_CONFIGS)
def test_every_config_default_is_the_parameters_cells(name):
    cell = page_parameters(registry.page(name).path(ROOT))
    for cls in _config_classes(name):
        for field in dataclasses.fields(cls):
            if field.default is dataclasses.MISSING or field.name not in cell:
                continue
            assert _lists(field.default) == _lists(cell[field.name]), (
                f"{name}: {cls.__name__}.{field.name} defaults to {field.default!r}, the page's parameters "
                f"cell to {cell[field.name]!r}")
        missing = {f.name for f in dataclasses.fields(cls)} - set(cell)
        assert not missing, f"{name}: {cls.__name__} has fields the parameters cell lacks: {sorted(missing)}"
