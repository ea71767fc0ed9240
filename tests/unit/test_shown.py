"""Each page's ``show`` on the results its page shows at its parameters cell's defaults, without papermill:
every glued name the page's Markdown pastes is one that ``show`` (or ``report.present``) provides, and its
claims tables are those the registry gives without figures (what the verdicts page lists)."""

import re

import matplotlib.pyplot as plt
import pytest

from rankcollapse.book import registry, report
from rankcollapse.book.runner import page_parameters
from rankcollapse.book.shown import Shown

PASTED = re.compile(r"\{glue(?::\w+)?\}`([\w]+)(?::[^`]*)?`|^```\{glue(?::\w+)?\}\s+([\w]+)", re.M)
# they compute; fig2 and pretrained_panels take over 3 s
SLOW = {"theorem1", "theorem2", "counterexample", "equilibria", "reviewers", "data", "large_models", "fig2",
        "pretrained_panels", "verdicts"}


def pasted_names(name: str, root) -> set[str]:
    """The glued names page ``name``'s Markdown pastes (roles and directives)."""
    text = registry.page(name).path(root).read_text()
    return {a or b for a, b in PASTED.findall(text)}


def provided_names(name: str, shown: Shown, results: dict) -> set[str]:
    """The names :func:`report.present` glues for ``shown``: its values, Markdown, claims tables and
    headlines, tables, figures and their notes, the banner (pages of stored results) and the re-run block."""
    names = {*shown.values, *shown.markdown, *shown.tables, f"{name}_rerun"}
    names |= {f"{prefix}_{what}" for prefix in shown.claims for what in ("claims", "headline")}
    names |= {f.key for f in shown.figures} | {f"{f.key}_notes" for f in shown.figures if f.notes}
    if all(not isinstance(r, registry.Computed) for r in results.values()):
        names.add(f"{name}_banner")
    return names


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in sorted(registry.PAGES)])
def test_show_provides_every_name_its_page_pastes(name, repo_root):
    parameters = page_parameters(registry.page(name).path(repo_root))
    results = registry.shown_results(name, parameters)
    shown = registry.show(name, results, parameters)
    for figure in shown.figures:
        plt.close(figure.figure)
    missing = pasted_names(name, repo_root) - provided_names(name, shown, results)
    assert not missing, f"{name}: the page pastes {sorted(missing)}, which show does not provide"
    assert registry.claims(name, results, parameters) == shown.claims
