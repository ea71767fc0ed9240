"""The claims tables of the experiment and response pages, built from the largest stored results of each page
(as the book shows them, ``show_largest_stored``), for tests/unit/test_claims.py.

``page_claims()``: page -> its list of Claim, from the store under ``results/`` (every result verified on
load).
"""

from __future__ import annotations

from rankcollapse.book.pages import (appendix_g1, fig2, fig3, fig4, pretrained_panels, rmsnorm_decoders,
                                     skip_connections, sliding_window_model)
from rankcollapse.experiments.store import ResultStore, StoredResult


def _largest(store: ResultStore, page: str, **wanted) -> StoredResult:
    """The stored result of ``page`` with the most samples x tokens among those whose parameters match
    ``wanted``."""
    found = []
    for key in store.keys(page):
        result = store.verify(page, key)
        parameters = result.provenance["parameters"]
        if all(parameters.get(k) == v for k, v in wanted.items()):
            found.append((parameters["n_samples"] * parameters["n_tokens"], result))
    if not found:
        raise LookupError(f"no stored {page} result matches {wanted}")
    return max(found, key=lambda pair: pair[0])[1]


def page_claims(store: ResultStore | None = None) -> dict[str, list]:
    """Every page's claims from its largest stored results."""
    store = store or ResultStore()
    fig2_result = _largest(store, "fig2")
    fig3_result = _largest(store, "fig3")
    g1_fig2 = _largest(store, "appendix_g1", norms=["none", "unit", "model"])
    g1_fig3 = _largest(store, "appendix_g1", norms=["none"])
    shallow = _largest(store, "skip_connections", n_layers=12)
    deep = _largest(store, "skip_connections", n_layers=128)
    decoders = {rmsnorm_decoders.CAUSAL: _largest(store, "rmsnorm_decoders", masks=["causal"])}
    for window in (4, 16):
        decoders[rmsnorm_decoders.window_part(window)] = _largest(
            store, "rmsnorm_decoders", masks=["causal_sliding_window"], window=window)
    sliding = {"as_trained": _largest(store, "sliding_window_model", full_transformer=True),
               "all_global": _largest(store, "sliding_window_model", model_windows=False),
               "all_local": _largest(store, "sliding_window_model", masks=["causal_sliding_window"])}
    return {
        "fig2": fig2.claims(fig2_result.table, fig2_result.provenance["parameters"]["n_tokens"],
                            fig2_result.samples),
        "fig3": fig3.claims(fig3_result.table, fig3_result.samples),
        "fig4": fig4.claims(_largest(store, "fig4").table),
        "appendix_g1": appendix_g1.claims(g1_fig2.table, g1_fig3.table, g1_fig2.samples, g1_fig3.samples),
        "pretrained_panels": pretrained_panels.claims(fig3_result.table, fig3_result.samples),
        "skip_connections": skip_connections.claims(shallow.table, deep.table,
                                                    skip_connections.numbers(shallow.table, deep.table),
                                                    shallow.samples, deep.samples),
        "rmsnorm_decoders": rmsnorm_decoders.claims(rmsnorm_decoders.rate_table(decoders)),
        "sliding_window_model": sliding_window_model.claims(sliding_window_model.rate_table(sliding)),
    }
