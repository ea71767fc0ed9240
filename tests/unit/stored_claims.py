"""The claims tables of the experiment, response and beyond pages, built from the results each page shows at
its parameters cell's defaults (the largest stored run, as the book shows it, ``show_largest_stored``), for
tests/unit/test_claims.py.

``page_claims()``: page -> {glue prefix: its list of Claim}, every result verified on load.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from rankcollapse.book import registry, report
from rankcollapse.book.runner import page_parameters, repo_root

# the pages whose claims are decided on stored sweeps (the others compute in their own module)
STORED_PAGES = ("fig2", "fig3", "fig4", "appendix_g1", "theory_san", "pretrained_panels", "skip_connections",
                "rmsnorm_decoders", "sliding_window_model")


def page_claims(pages: tuple[str, ...] = STORED_PAGES) -> dict[str, dict[str, list]]:
    """Every page's claims tables, from the results it shows."""
    out = {}
    for name in pages:
        parameters = page_parameters(registry.page(name).path(repo_root()))
        results = report.largest_stored(registry.compute(name, **parameters))
        shown = registry.show(name, results, parameters)
        for figure in shown.figures:
            plt.close(figure.figure)
        out[name] = shown.claims
    return out
