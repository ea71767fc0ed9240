"""The Appendix G.1 page (book/experiments/appendix_g1.md): the Fig. 2 and Fig. 3 sweeps on 128 freshly
initialized layers (the response: "the same trend as 12 layer models").

:func:`configure` turns the page's parameters into its two sweeps (the paper's setting, the figures) and
their weight-seed replicates, with and without biases; :func:`show` is what the page shows of them:
:func:`numbers` (the values its prose states, from the Fig. 2 sweep), the layer figures of both sweeps, the
scale words and note, and :func:`claims`, its claims table, decided on the replicates pooled over their
weight seeds (the outer level of every interval), in the theory's bias-free SAN and with biases: collapse
under every mask (beside the linear case's prediction where the biases are zero), each LayerNorm against
pure attention (its baseline) and the smallest temperature of the Fig. 3 sweep against the largest over
layers 1-6, as effects with intervals, robust or not over the thresholds' grid.

Used by: book/experiments/appendix_g1.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.book.labels import mask_label
from rankcollapse.book.pages._common import (BIASES_SETTING, FIG2, FIG3, THEORY_SETTING, against,
                                             curves_claim, fig2_and_fig3, linear_prediction, mask_sides,
                                             paired_sides, seed_parts, stops_claim, temperature_range,
                                             times_floor, verdict_words)
from rankcollapse.core.checks import check_int
from rankcollapse.core.masks import WINDOWED_MASKS
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core.metrics import FLOOR_BAND
from rankcollapse.engine.exact import EXACT_METRIC
from rankcollapse.experiments.config import INITIALIZED, MAX_SAMPLES, Run
from rankcollapse.experiments.table import held_from, value
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import Claim

_SHARED = dict(weights=("initialized",))  # both sweeps: initialized weights only
FIXED = {**_SHARED, "fig2": FIG2, "fig3": FIG3}
_figures = fig2_and_fig3(**_SHARED)  # the paper's setting: PyTorch's default biases, weight seed ``seed``
_replicates = fig2_and_fig3(weights=INITIALIZED)  # the same stacks with and without biases
SEED_PAGE_PARAMETERS = ("n_samples_seeds", "n_weight_seeds")  # the seed replicates' own parameters
_NORMS = (("unit", "the paper's D"), ("model", "LayerNorm without affine, as a fresh model has it"))
SETTINGS = {"initialized_nobias": THEORY_SETTING, "initialized": BIASES_SETTING}  # decided, then beside


def configure(parameters: dict) -> dict[str, Run]:
    """``fig2`` and ``fig3``: the two sweeps in the paper's setting (what the figures show), and for k = 0 ..
    n_weight_seeds - 1 ``fig2_seed_<k>`` and ``fig3_seed_<k>``: the same sweeps on the first
    ``n_samples_seeds`` samples, initialized with and without biases (without: the theory's SAN), weights
    drawn with seed ``seed + k`` — the outer level of every interval of the claims — in float64 whatever the
    page's dtype: a bias-free layer shrinks ‖X‖_F about threefold, so in float32 ‖X‖_F underflows near
    layer 80 of 128 and μ/‖X‖_F is no longer a number."""
    own = {k: v for k, v in parameters.items() if k not in SEED_PAGE_PARAMETERS}
    runs = dict(_figures(own))
    n_samples, n_seeds = parameters.get("n_samples_seeds"), parameters.get("n_weight_seeds")
    check_int("n_samples_seeds", n_samples, 1, MAX_SAMPLES)
    check_int("n_weight_seeds", n_seeds, 1, 100)
    for k in range(n_seeds):
        seeded = {**own, "n_samples": n_samples, "weight_seed": own.get("seed", 0) + k, "dtype": "float64"}
        runs.update({f"{part}_seed_{k}": run for part, run in _replicates(seeded).items()})
    return runs


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``g1``), as :func:`show` shows it (no figures drawn)."""
    return {"g1": claims(results)}


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scale (``g1_*``, from the Fig. 2 sweep), claims table, the figures of μ and
    μ/‖X‖_F of the Fig. 2 sweep and of μ per temperature of the Fig. 3 sweep, and the scale note."""
    fig2, fig3 = results["fig2"], results["fig3"]
    rows = page_claims(results, parameters)["g1"]
    seeds = seed_parts(results, "fig2_seed")
    findings = {f"finding_{weights}": verdict_words([r for r in rows if r.setting.startswith(words)])
                for weights, words in SETTINGS.items()}
    return Shown(values=prefixed("g1", {"scale": scale_words(fig2), **numbers(fig2.table), **findings,
                                        "seeds_scale": scale_words(seeds[0]), "n_seeds": len(seeds)}),
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


def predictions(result: StoredResult) -> dict[str, np.ndarray]:
    """The linear case's μ/‖X‖_F per mask of a Fig. 2 sweep, at its tokens, window and depth: the theory's
    prediction for the bias-free stacks. Shapes: per mask [layer + 1]."""
    p = result.provenance["parameters"]
    return {m: linear_prediction(m, p["n_tokens"], p["window"] if m in WINDOWED_MASKS else None,
                                 p["n_layers"]) for m in dict.fromkeys(result.table["mask"])}


def claims(results: dict) -> list[Claim]:
    """The response on the 128-layer models, "the same trend as 12 layer models", decided on the weight-seed
    replicates (pooled, seeds the outer level of every interval) in the theory's bias-free SAN — beside the
    linear case's prediction — and then with PyTorch's default biases (the paper's setting)."""
    source, same = "the response (App. G.1)", "(same trend as 12 layers)"
    fig2, fig3 = seed_parts(results, "fig2_seed"), seed_parts(results, "fig3_seed")
    cold, warm = temperature_range(fig3[0].table)
    deep = f"{fig2[0].provenance['parameters']['n_layers']} initialized layers"
    rows = []
    for weights, words in SETTINGS.items():
        setting = f"{words}; {len(fig2)} weight seeds"
        labels = dict(weights=weights, variant="SAN")
        pure = mask_sides(fig2, None, "pure attention", norm="none", **labels)
        predicted = predictions(fig2[0]) if weights == "initialized_nobias" else None
        rows.append(curves_claim(f"Pure attention collapses under every mask {same}", source,
                                 f"{deep}, pure attention: per-layer factor of μ/‖X‖_F over the late layers",
                                 pure, predicted, setting=setting))
        for norm, norm_words in _NORMS:
            normed = mask_sides(fig2, None, norm_words, norm=norm, **labels)
            pairs = {m: (normed[m], pure[m]) for m in normed}
            rows.append(stops_claim(f"LayerNorm alone prevents collapse {same}", source,
                                    f"{deep}, {norm_words} against pure attention on the same weights", pairs,
                                    setting=setting))
            rows.append(against("... LayerNorm slows collapse against pure attention", source,
                                f"{deep}, {norm_words}: late per-layer factor of μ/‖X‖_F over pure "
                                "attention's", pairs, setting=setting))
        sides = paired_sides(fig3, None, dict(temperature=cold, **labels), dict(temperature=warm, **labels),
                             (f"d_QK = {cold:g}", f"d_QK = {warm:g}"))
        rows.append(against(f"A smaller temperature slows rank collapse {same}", source,
                            f"{deep}, pure attention: per-layer factor of μ/‖X‖_F over layers 1–6 at d_QK = "
                            f"{cold:g} over d_QK = {warm:g}", sides, window=(1, 6), setting=setting))
    return rows
