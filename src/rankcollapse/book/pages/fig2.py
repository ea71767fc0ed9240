"""The Fig. 2 page (book/experiments/fig2.md): the paper's four masks with pure attention, the paper's
LayerNorm D (``unit``) and each layer's own LayerNorm (``model``), initialized and pretrained weights.

:func:`configure` turns the page's parameters into its one sweep; :func:`numbers` are the values its prose
states, :func:`claims` its claims table, both read from the tidy table the page shows.

Used by: book/experiments/fig2.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_claims.py.
"""

from __future__ import annotations

import math

import pandas as pd

from rankcollapse.book.pages._common import FIG2, curves_claim, experiment, times_floor
from rankcollapse.core import masks
from rankcollapse.experiments.config import value
from rankcollapse.verdicts.claims import COLLAPSES, FAILS, HOLDS, STABLE, Claim, mean_rate, select_curves

FIXED = FIG2  # the norms the page is about
configure = experiment(FIXED)


def numbers(table: pd.DataFrame) -> dict[str, float | int]:
    """Last-layer μ of the initialized complete and uni-directional-window masks, and LayerNorm's μ at the
    complete mask against its rounding floor (initialized and pretrained)."""
    init = dict(weights="initialized", variant="SAN")
    pre = dict(weights="pretrained", variant="SAN")
    over_floor = lambda labels, norm: (value(table, "mu", mask="complete", norm=norm, **labels)  # noqa: E731
                                       / value(table, "floor", mask="complete", norm=norm, **labels))
    return {
        "n_layers": int(table.loc[table["weights"] == "initialized", "layer"].max()),
        "pure_complete": value(table, "mu", mask="complete", norm="none", **init),
        "pure_window": value(table, "mu", mask="causal_sliding_window", norm="none", **init),
        "ln_complete": value(table, "mu", mask="complete", norm="unit", **init),
        "floor_complete": value(table, "floor", mask="complete", norm="unit", **init),
        "ln_complete_over_floor": over_floor(init, "unit"),
        "ln_complete_floor_words": times_floor(over_floor(init, "unit")),
        "model_ln_complete_over_floor": over_floor(init, "model"),
        "pre_ln_complete_over_floor": over_floor(pre, "unit"),
        "pre_model_ln_complete": value(table, "mu", mask="complete", norm="model", **pre),
    }


def claims(table: pd.DataFrame, n_tokens: int) -> list[Claim]:
    """Fig. 2's caption, claim by claim (``n_tokens`` gives the masks' radii)."""
    rows = []
    for weights in ("initialized", "pretrained"):
        rows.append(curves_claim("Pure masked attention collapses exponentially", "Fig. 2 caption",
                                 f"{weights} weights, pure attention: late-layer rate of μ/‖X‖_F per mask", table,
                                 COLLAPSES, "masks collapse", weights=weights, variant="SAN", norm="none"))
    pure = select_curves(table, weights="initialized", variant="SAN", norm="none")
    rates = {r.mask: mean_rate(r.curve) for r in pure.itertuples()}
    spread = max(rates.values()) / min(rates.values()) if min(rates.values()) > 0 else math.inf
    rows.append(Claim("... at a rate that depends on the mask", "Fig. 2 caption",
                      "initialized pure attention: fastest over slowest mean rate (per layer, to the floor or the "
                      "last layer)", HOLDS if spread > 2 else FAILS,
                      f"{spread:.3g}× ({', '.join(f'{m}: {r:.3g}' for m, r in rates.items())})"))
    rows.append(_radius_claim(pure, rates, n_tokens))
    for norm, words in (("unit", "the paper's D (unit norm)"), ("model", "LayerNorm as a fresh model has it (no affine)")):
        rows.append(curves_claim("Adding LayerNorm alone stops μ → 0 at random initialization", "Fig. 2 caption",
                                 f"initialized, {words}: μ/‖X‖_F stays away from 0", table, STABLE,
                                 "masks keep μ/‖X‖_F", weights="initialized", variant="SAN", norm=norm))
    rows.append(curves_claim("In pretrained models LayerNorm helps (together with the other components)", "Fig. 2 caption",
                             "pretrained, the model's own trained LayerNorm (γ, β): μ/‖X‖_F stays away from 0", table,
                             STABLE, "masks keep μ/‖X‖_F", weights="pretrained", variant="SAN", norm="model"))
    return rows


def _radius_claim(curves: pd.DataFrame, rates: dict[str, float], n_tokens: int) -> Claim:
    """Theorem 1's reading of Fig. 2: a larger radius slows collapse (slowest mean rate at the largest radius)."""
    radius = {r.mask: masks.graph_radius(masks.build_mask(r.mask, n_tokens, None if pd.isna(r.window) else int(r.window)))
              for r in curves.itertuples()}
    widest = max(radius, key=lambda m: (radius[m], -rates[m]))
    slowest = min(rates, key=rates.get)
    words = ", ".join(f"{m}: r = {radius[m]}, rate {rates[m]:.3g}" for m in rates)
    return Claim("A larger mask radius slows collapse", "Theorem 1",
                 "initialized pure attention: is the mask of largest radius the slowest?",
                 HOLDS if widest == slowest else FAILS, f"largest radius {widest}, slowest {slowest} ({words})")
