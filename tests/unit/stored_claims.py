"""The claims tables of the pages decided on stored sweeps, from the results each page shows at its parameters
cell's defaults (the largest stored run, as the book shows it), for tests/unit/test_claims.py.

``page_claims()``: page -> {glue prefix: its list of Claim}, every result verified on load, no figure drawn
(:func:`rankcollapse.book.registry.claims_at_defaults`, never a record a build left).
"""

from __future__ import annotations

from rankcollapse.book import registry

# the pages whose claims are decided on stored sweeps (the others compute in their own module)
STORED_PAGES = ("fig2", "fig3", "fig4", "appendix_g1", "theory_san", "pretrained_panels", "skip_connections",
                "rmsnorm_decoders", "sliding_window_model", "soft_locality")


def page_claims(pages: tuple[str, ...] = STORED_PAGES) -> dict[str, dict[str, list]]:
    """Every page's claims tables, from the results it shows."""
    return {name: registry.claims_at_defaults(name, reuse_recorded=False)[0] for name in pages}
