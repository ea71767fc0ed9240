"""The Appendix G.1 page (book/experiments/appendix_g1.md): the Fig. 2 and Fig. 3 sweeps on 128 freshly
initialized layers (the response: "the same trend as 12 layer models").

:func:`configure` turns the page's parameters into its two sweeps; :func:`show` is what the page shows of
them: :func:`numbers` (the values its prose states, from the Fig. 2 sweep), the layer figures of both sweeps,
the scale words and note, and :func:`claims`, its claims table: the curve verdicts of the Fig. 2 sweep, each
LayerNorm against pure attention (its baseline) and the smallest temperature of the Fig. 3 sweep against the
largest, as effects with intervals, robust or not over the thresholds' grid (medians over samples).

Used by: book/experiments/appendix_g1.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.book.labels import mask_label
from rankcollapse.book.pages._common import (FIG2, FIG3, against, curves_claim, fig2_and_fig3, mask_sides,
                                              stops_claim, temperature_range, temperature_sides, times_floor,
                                              verdict_words)
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core.metrics import FLOOR_BAND
from rankcollapse.engine.exact import EXACT_METRIC
from rankcollapse.experiments.table import held_from, value
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import Claim

_SHARED = dict(weights=("initialized",))  # both sweeps: initialized weights only
FIXED = {**_SHARED, "fig2": FIG2, "fig3": FIG3}
configure = fig2_and_fig3(**_SHARED)
_NORMS = (("unit", "the paper's D"), ("model", "LayerNorm without affine, as a fresh model has it"))


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``g1``), as :func:`show` shows it (no figures drawn)."""
    return {"g1": claims(results["fig2"], results["fig3"])}


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scale (``g1_*``, from the Fig. 2 sweep), claims table, the figures of μ and
    μ/‖X‖_F of the Fig. 2 sweep and of μ per temperature of the Fig. 3 sweep, and the scale note."""
    fig2, fig3 = results["fig2"], results["fig3"]
    rows = page_claims(results, parameters)["g1"]
    return Shown(values=prefixed("g1", {"scale": scale_words(fig2), **numbers(fig2.table),
                                        "finding": verdict_words(rows)}),
                 markdown={"g1_scale_note": scale_note(fig2)},
                 claims={"g1": rows},
                 figures=[layer_figure(fig2, "mu", "fig-appendix-g1-fig2"),
                          layer_figure(fig2, "relative_mu", "fig-appendix-g1-fig2-relative"),
                          layer_figure(fig3, "mu", "fig-appendix-g1-fig3", hue="temperature")])


def numbers(table: pd.DataFrame) -> dict[str, float | int | str]:
    """How many masks' pure-attention curves end within FLOOR_BAND x their rounding floor after the deep
    stack, and in words where each of those ends: tracked exactly below the floor (the engine's ``exact``
    metric), or read as exactly 0 (underflow) where it is not tracked."""
    masks = list(dict.fromkeys(table["mask"]))
    pure = {m: value(table, "mu", mask=m, norm="none", variant="SAN") for m in masks}
    floor = {m: value(table, "floor", mask=m, norm="none", variant="SAN") for m in masks}
    exact = {m: EXACT_METRIC in set(table["metric"]) and
             value(table, EXACT_METRIC, mask=m, norm="none", variant="SAN") == 1.0 for m in masks}
    low = [m for m in masks if pure[m] <= FLOOR_BAND * floor[m]]
    return {"masks_at_floor": len(low), "n_masks": len(masks),
            "window_final": pure.get("causal_sliding_window", float("nan")),
            "floor_words": "; ".join(_below_floor_words(mask_label(m), pure[m], floor[m], exact[m],
                                                        held_from(table, mask=m, norm="none", variant="SAN"))
                                     for m in low),
            "n_layers": int(table["layer"].max())}


def _below_floor_words(mask: str, mu: float, floor: float, exact: bool, held: int | None = None) -> str:
    """Where a curve near or below its rounding floor ends, in words that say how it was measured (``held``:
    the first layer not computed, the curve having settled on its floor).

    >>> _below_floor_words("causal", 5.6e-97, 9.9e-07, True)
    'causal: μ ≈ 5.6e-97, 1.8e+90 times below its rounding floor (9.9e-07), tracked exactly'
    >>> _below_floor_words("complete", 0.0, 9.9e-07, False)
    'complete: μ exactly 0, below its rounding floor (it underflowed)'
    """
    if mu == 0:
        return f"{mask}: μ {times_floor(0.0)}"
    if exact and mu < floor:
        return (f"{mask}: μ ≈ {mu:.1e}, {floor / mu:.1e} times below its rounding floor ({floor:.1e}), "
                "tracked exactly")
    return f"{mask}: μ ≈ {mu:.1e}, {times_floor(mu / floor, held)}, where μ is rounding noise"


SETTING = "initialized with PyTorch's default biases (the paper's setup); 1 weight seed"


def claims(fig2: StoredResult, fig3: StoredResult | None = None) -> list[Claim]:
    """The response on the 128-layer models: "the same trend as 12 layer models", in the paper's setting (with
    biases; the theory's bias-free SAN at depth, over weight seeds and beside the theory's prediction, is the
    theory's-SAN page's). ``fig3``: the temperature sweep (its row is left out without it). Intervals where
    the results stored their per-sample values."""
    source = "the response (App. G.1)"
    pure = mask_sides(fig2, None, "pure attention", variant="SAN", norm="none")
    rows = [curves_claim("Pure attention collapses under every mask (same trend as 12 layers)", source,
                         "128 initialized layers, pure attention: per-layer factor of μ/‖X‖_F over the late "
                         "layers", pure, setting=SETTING)]
    for norm, words in _NORMS:
        normed = mask_sides(fig2, None, words, variant="SAN", norm=norm)
        pairs = {m: (normed[m], pure[m]) for m in normed}
        rows.append(stops_claim("LayerNorm alone prevents collapse (same trend as 12 layers)", source,
                                f"128 initialized layers, {words} against pure attention on the same weights",
                                pairs, setting=SETTING))
        rows.append(against("... LayerNorm slows collapse against pure attention", source,
                            f"128 initialized layers, {words}: late per-layer factor of μ/‖X‖_F over "
                            "pure attention's", pairs, setting=SETTING))
    if fig3 is not None:
        cold, warm = temperature_range(fig3.table)
        rows.append(against("A smaller temperature slows rank collapse (same trend as 12 layers)", source,
                            f"128 initialized layers, pure attention: per-layer factor of μ/‖X‖_F over "
                            f"layers 1–6 at d_QK = {cold:g} over d_QK = {warm:g}",
                            temperature_sides(fig3, None, "initialized"), window=(1, 6), setting=SETTING))
    return rows
