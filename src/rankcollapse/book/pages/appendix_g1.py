"""The Appendix G.1 page (book/experiments/appendix_g1.md): the Fig. 2 and Fig. 3 sweeps on 128 freshly
initialized layers (the response: "the same trend as 12 layer models").

:func:`configure` turns the page's parameters into its two sweeps; :func:`numbers` are the values its prose
states, :func:`claims` its claims table, both read from the Fig. 2 sweep.

Used by: book/experiments/appendix_g1.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.book.pages._common import FIG2, FIG3, fig2_and_fig3
from rankcollapse.experiments.config import value
from rankcollapse.verdicts.claims import COLLAPSES, STABLE, Claim, count_curves, select_curves

_SHARED = dict(weights=("initialized",))  # both sweeps: initialized weights only
FIXED = {**_SHARED, "fig2": FIG2, "fig3": FIG3}
configure = fig2_and_fig3(**_SHARED)


def numbers(table: pd.DataFrame) -> dict[str, float | int]:
    """How many masks' pure-attention curves end within 10x their rounding floor after the deep stack."""
    masks = list(dict.fromkeys(table["mask"]))
    pure = {m: value(table, "mu", mask=m, norm="none", variant="SAN") for m in masks}
    floor = {m: value(table, "floor", mask=m, norm="none", variant="SAN") for m in masks}
    return {"masks_at_floor": sum(pure[m] <= 10 * floor[m] for m in masks), "n_masks": len(masks),
            "window_final": pure.get("causal_sliding_window", float("nan")),
            "n_layers": int(table["layer"].max())}


def claims(fig2_table: pd.DataFrame) -> list[Claim]:
    """The response on the 128-layer models: "the same trend as 12 layer models"."""
    rows = []
    pure = select_curves(fig2_table, variant="SAN", norm="none")
    verdict, number = count_curves(pure, COLLAPSES, "masks collapse")
    rows.append(Claim("Pure attention collapses under every mask (same trend as 12 layers)", "response, App. G.1",
                      "128 initialized layers, pure attention: late-layer rate of μ/‖X‖_F", verdict, number))
    for norm, words in (("unit", "the paper's D"), ("model", "LayerNorm without affine, as a fresh model has it")):
        verdict, number = count_curves(select_curves(fig2_table, variant="SAN", norm=norm), STABLE,
                                       "masks keep μ/‖X‖_F")
        rows.append(Claim("LayerNorm alone prevents collapse (same trend as 12 layers)", "response, App. G.1",
                          f"128 initialized layers, {words}", verdict, number))
    return rows
