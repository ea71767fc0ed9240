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

from rankcollapse.book.pages._common import FIG2, computing, times_floor
from rankcollapse.core import masks
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import INITIALIZED, MAX_SAMPLES, Run, experiment_config, value
from rankcollapse.verdicts.claims import COLLAPSES, FAILS, HOLDS, STABLE, Claim, count_curves, mean_rate, select_curves

FIXED = FIG2  # the norms the page is about
CONTROL_MASKS = (*masks.PAPER_MASKS, "self")  # the paper's four and the no-mixing control
CONTROL_PAGE_PARAMETERS = ("n_samples_controls", "n_weight_seeds")  # the controls' own parameters
SEED_NORMS = ("none", "unit")  # the norms of the seed replicates: pure attention and the paper's D


def configure(parameters: dict) -> dict[str, Run]:
    """The main sweep (the paper's Fig. 2, stored as before), its controls and their seed replicates.

    ``controls``: the first ``n_samples_controls`` of the same samples, weights initialized with and without
    biases (the same draws), the paper's masks and the no-mixing ``self`` mask, the page's norms;
    ``pretrained_self``: the pretrained weights under the ``self`` mask. ``seed_<k>`` for
    k = 1 .. n_weight_seeds - 1: the initialized stacks of ``controls`` again with weight seed ``seed + k``
    (the samples stay those of ``seed``), pure attention and the paper's D only.
    """
    own = computing(parameters, *CONTROL_PAGE_PARAMETERS)
    n_controls, n_seeds = parameters.get("n_samples_controls"), parameters.get("n_weight_seeds")
    check_int("n_samples_controls", n_controls, 1, MAX_SAMPLES)
    check_int("n_weight_seeds", n_seeds, 1, 100)
    controls = {**own, "n_samples": n_controls}
    runs = {"main": Run(experiment_config(own, **FIXED)),
            "controls": Run(experiment_config(controls, **FIXED, weights=INITIALIZED, masks=CONTROL_MASKS)),
            "pretrained_self": Run(experiment_config(controls, **FIXED, weights=("pretrained",), masks=("self",)))}
    for k in range(1, n_seeds):
        runs[f"seed_{k}"] = Run(experiment_config({**controls, "weight_seed": own.get("seed", 0) + k},
                                                  weights=INITIALIZED, masks=CONTROL_MASKS, norms=SEED_NORMS))
    return runs


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
        pure = select_curves(table, weights=weights, variant="SAN", norm="none")
        verdict, number = count_curves(pure, COLLAPSES, "masks collapse")
        rows.append(Claim("Pure masked attention collapses exponentially", "Fig. 2 caption",
                          f"{weights} weights, pure attention: late-layer rate of μ/‖X‖_F per mask", verdict, number))
    pure = select_curves(table, weights="initialized", variant="SAN", norm="none")
    rates = {r.mask: mean_rate(r.curve) for r in pure.itertuples()}
    spread = max(rates.values()) / min(rates.values()) if min(rates.values()) > 0 else math.inf
    rows.append(Claim("... at a rate that depends on the mask", "Fig. 2 caption",
                      "initialized pure attention: fastest over slowest mean rate (per layer, to the floor or the "
                      "last layer)", HOLDS if spread > 2 else FAILS,
                      f"{spread:.3g}× ({', '.join(f'{m}: {r:.3g}' for m, r in rates.items())})"))
    rows.append(_radius_claim(pure, rates, n_tokens))
    for norm, words in (("unit", "the paper's D (unit norm)"), ("model", "LayerNorm as a fresh model has it (no affine)")):
        ln = select_curves(table, weights="initialized", variant="SAN", norm=norm)
        verdict, number = count_curves(ln, STABLE, "masks keep μ/‖X‖_F")
        rows.append(Claim("Adding LayerNorm alone stops μ → 0 at random initialization", "Fig. 2 caption",
                          f"initialized, {words}: μ/‖X‖_F stays away from 0", verdict, number))
    ln = select_curves(table, weights="pretrained", variant="SAN", norm="model")
    verdict, number = count_curves(ln, STABLE, "masks keep μ/‖X‖_F")
    rows.append(Claim("In pretrained models LayerNorm helps (together with the other components)", "Fig. 2 caption",
                      "pretrained, the model's own trained LayerNorm (γ, β): μ/‖X‖_F stays away from 0", verdict, number))
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
