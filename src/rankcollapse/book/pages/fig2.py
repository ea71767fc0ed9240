"""The Fig. 2 page (book/experiments/fig2.md): the paper's four masks with pure attention, the paper's
LayerNorm D (``unit``) and each layer's own LayerNorm (``model``), initialized and pretrained weights; its
controls (no biases, no mixing, other weight seeds) and the decomposition of μ's decay into the value maps'
gain and attention's contraction.

:func:`configure` turns the page's parameters into its sweeps (the main one, the controls, the pretrained
no-mixing control, the seed replicates, the decomposition); :func:`show` is what the page shows of them:
:func:`numbers` (the values its prose states) and :func:`claims` (its claims table) of the main sweep, the
controls' numbers, headline and claims (:mod:`rankcollapse.book.pages._fig2_controls`, read over
:func:`seed_results`), the decomposition's summary and claims (:func:`decomposition`,
:func:`decomposition_clauses`), the four figures and the scale words and note.

Used by: book/experiments/fig2.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_claims.py, tests/unit/test_controls.py.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from rankcollapse.book.labels import mask_label
from rankcollapse.book.pages._common import (FIG2, against, computing, curves_claim, mask_radius,
                                            paired_sides, times_floor)
from rankcollapse.book.pages._decomposition import (decay_driver, decay_shares, decomposition_claims,
                                                    decomposition_frame)
from rankcollapse.book.pages._fig2_controls import control_claims, controls_clauses, controls_numbers
from rankcollapse.book.plotting.controls import controls_figure
from rankcollapse.book.plotting.decomposition import decomposition_shown
from rankcollapse.book.plotting.overlap import coincidence_words
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core import masks
from rankcollapse.core.checks import check_int
from rankcollapse.core.norms import NORM_LABELS
from rankcollapse.experiments.config import INITIALIZED, MAX_SAMPLES, Run, experiment_config
from rankcollapse.experiments.table import held_from, value
from rankcollapse.experiments.sample_values import SampleValues
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import (COLLAPSES, STABLE, Claim, effect_cell, effect_claim, mean_rate,
                                          select_curves)
from rankcollapse.verdicts.effects import Side, late_factor, side
from rankcollapse.verdicts.robustness import robust

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
    (the samples stay those of ``seed``), pure attention and the paper's D only. ``decomposition``: pure
    attention under the paper's four masks on the controls' samples, initialized (with and without biases) and
    pretrained, recording each layer's decomposition of mu into the value maps' gain and attention's
    contraction (``attention_stats``; slower: every attention matrix is formed).
    """
    own = computing(parameters, *CONTROL_PAGE_PARAMETERS)
    runs = {"main": Run(experiment_config(own, **FIXED))}
    if not any(name in parameters for name in CONTROL_PAGE_PARAMETERS):
        return runs  # a page reusing Fig. 2's sweep without its controls (sample size, pretrained panels)
    n_controls, n_seeds = parameters.get("n_samples_controls"), parameters.get("n_weight_seeds")
    check_int("n_samples_controls", n_controls, 1, MAX_SAMPLES)
    check_int("n_weight_seeds", n_seeds, 1, 100)
    controls = {**own, "n_samples": n_controls}
    runs["controls"] = Run(experiment_config(controls, **FIXED, weights=INITIALIZED, masks=CONTROL_MASKS))
    runs["pretrained_self"] = Run(experiment_config(controls, **FIXED, weights=("pretrained",),
                                                    masks=("self",)))
    for k in range(1, n_seeds):
        runs[f"seed_{k}"] = Run(experiment_config({**controls, "weight_seed": own.get("seed", 0) + k},
                                                  weights=INITIALIZED, masks=CONTROL_MASKS, norms=SEED_NORMS))
    runs["decomposition"] = Run(replace(experiment_config(controls, weights=(*INITIALIZED, "pretrained"),
                                                          masks=masks.PAPER_MASKS, norms=("none",)),
                                        attention_stats=True))
    return runs


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's three claims tables (``fig2``, ``fig2_controls``, ``fig2_decomp``), as :func:`show` shows
    them (no figures drawn)."""
    result = results["main"]
    n_tokens = result.provenance["parameters"]["n_tokens"]
    return {"fig2": claims(result.table, n_tokens, result.samples),
            "fig2_controls": control_claims(seed_results(results)),
            "fig2_decomp": decomposition_claims(decomposition(results["decomposition"])[0], DECOMPOSED_WORDS)}


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scales (``fig2_*``), its three claims tables (``fig2``, ``fig2_controls``,
    ``fig2_decomp``), the clauses of the controls' and the decomposition's sentences, the scale note and the
    figures of μ, μ/‖X‖_F, the controls and the decomposition (whose coinciding curves its caption names:
    ``fig2_decomp_notes``)."""
    result, controls, decomposed = results["main"], results["controls"], results["decomposition"]
    seeds = seed_results(results)
    frame, shares = decomposition(decomposed)
    decomposition_fig = decomposition_shown(decomposed, frame, "fig-fig2-decomposition", DECOMPOSED_WORDS)
    found = controls_numbers(controls.table, results["pretrained_self"].table, result.table)
    values = {"scale": scale_words(result), **numbers(result.table), "controls_scale": scale_words(controls),
              "n_seeds": len(seeds), "decomp_scale": scale_words(decomposed),
              "decomp_notes": coincidence_words(decomposition_fig.figure), **controls_clauses(found),
              **decomposition_clauses(shares)}
    return Shown(values=prefixed("fig2", values), markdown={"fig2_scale_note": scale_note(result)},
                 claims=page_claims(results, parameters),
                 figures=[layer_figure(result, "mu", "fig-fig2-mu"),
                          layer_figure(result, "relative_mu", "fig-fig2-relative"),
                          controls_figure(controls, "relative_mu", "fig-fig2-controls",
                                          _weight_seed(controls.provenance["parameters"])),
                          decomposition_fig])


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
        "ln_complete_floor_words": times_floor(over_floor(init, "unit"),
                                               held_from(table, mask="complete", norm="unit", **init)),
        "model_ln_complete_over_floor": over_floor(init, "model"),
        "pre_ln_complete_over_floor": over_floor(pre, "unit"),
        "pre_model_ln_complete": value(table, "mu", mask="complete", norm="model", **pre),
    }


def claims(table: pd.DataFrame, n_tokens: int, samples: SampleValues | None = None) -> list[Claim]:
    """Fig. 2's caption, claim by claim (``n_tokens`` gives the masks' radii): the absolute rows on each
    curve's verdict, the comparative ones as effects against their baseline with intervals from ``samples``
    (the result's per-sample values; without them the effects carry no interval)."""
    rows = []
    for weights in ("initialized", "pretrained"):
        rows.append(curves_claim("Pure masked attention collapses exponentially", "Fig. 2 caption",
                                 f"{weights} weights, pure attention: late-layer rate of μ/‖X‖_F "
                                 "per mask", table, COLLAPSES, "masks collapse", weights=weights,
                                 variant="SAN", norm="none"))
    init = dict(weights="initialized", variant="SAN")
    rates = {r.mask: mean_rate(r.curve) for r in select_curves(table, norm="none", **init).itertuples()}
    pure = {m: side(table, samples, m, mask=m, norm="none", **init) for m in rates}
    rows.append(_rate_spread_claim(pure, rates))
    rows.append(_radius_claim(pure, rates, table, n_tokens))
    for norm, words in (("unit", "the paper's D (unit norm)"),
                        ("model", "LayerNorm as a fresh model has it (no affine)")):
        rows.append(curves_claim("Adding LayerNorm alone stops μ → 0 at random initialization",
                                 "Fig. 2 caption", f"initialized, {words}: μ/‖X‖_F stays away from 0",
                                 table, STABLE, "masks keep μ/‖X‖_F", norm=norm, **init))
        rows.append(against("... LayerNorm slows collapse against pure attention", "Fig. 2 caption",
                            f"initialized, {words}: late per-layer factor of μ/‖X‖_F over pure "
                            "attention's (the baseline)",
                            paired_sides(table, samples, dict(norm=norm, **init), dict(norm="none", **init),
                                         (NORM_LABELS[norm], "pure attention"))))
    pre = dict(weights="pretrained", variant="SAN")
    rows.append(curves_claim("In pretrained models LayerNorm helps (together with the other components)",
                             "Fig. 2 caption", "pretrained, the model's own trained LayerNorm (γ, β): "
                             "μ/‖X‖_F stays away from 0", table, STABLE, "masks keep μ/‖X‖_F",
                             norm="model", **pre))
    rows.append(against("... the trained LayerNorm slows collapse against pure attention", "Fig. 2 caption",
                        "pretrained, the model's own LayerNorm: late per-layer factor of μ/‖X‖_F over "
                        "pure attention's with the same weights (the baseline)",
                        paired_sides(table, samples, dict(norm="model", **pre), dict(norm="none", **pre),
                                     ("own LayerNorm", "pure attention"))))
    return rows


def _rate_spread_claim(pure: dict[str, Side], rates: dict[str, float]) -> Claim:
    """"... at a rate that depends on the mask": in the column of the mask whose median curve decays slowest
    (by its mean rate, ``rates``), its late per-layer factor over the fastest one's, with its interval (the
    two are picked on the same data, so the effect is an upper estimate of the spread)."""
    slowest, fastest = min(rates, key=rates.get), max(rates, key=rates.get)
    return robust(lambda t: effect_claim(
        "... at a rate that depends on the mask", "Fig. 2 caption",
        f"initialized pure attention: late per-layer factor of the slowest mask over the fastest "
        f"({fastest}; mean rates " + ", ".join(f"{m}: {r:.3g}" for m, r in rates.items()) + ")",
        [effect_cell(slowest, late_factor(pure[slowest], pure[fastest], t), +1, t)]))


def _radius_claim(pure: dict[str, Side], rates: dict[str, float], table: pd.DataFrame,
                  n_tokens: int) -> Claim:
    """Theorem 1's reading of Fig. 2, a larger radius slows collapse: in the column of every mask whose radius
    is not the smallest, its late per-layer factor over the slowest (by mean rate, ``rates``) of the masks of
    smaller radius, the hardest of those comparisons (above 1: slower)."""
    windows = table.groupby("mask", sort=False)["window"].first()
    radius = {m: mask_radius(m, n_tokens, None if pd.isna(windows[m]) else int(windows[m])) for m in pure}
    against = {m: min((b for b in pure if radius[b] < radius[m]), key=rates.get) for m in pure
               if any(radius[b] < radius[m] for b in pure)}
    return robust(lambda t: effect_claim(
        "A larger mask radius slows collapse", "Theorem 1",
        "initialized pure attention: late per-layer factor of each mask over the slowest mask of smaller "
        "radius ("
        + ", ".join(f"{m}: r = {radius[m]}" + (f", against {against[m]}" if m in against else "")
                    for m in pure)
        + ")",
        [effect_cell(m, late_factor(pure[m], pure[b], t), +1, t) for m, b in against.items()]))


def _weight_seed(parameters: dict) -> int:
    """The seed a stored run's initialized weights were drawn with (``weight_seed``, else the samples'
    ``seed``)."""
    return int(parameters["seed"] if parameters.get("weight_seed") is None else parameters["weight_seed"])


def seed_results(results: dict[str, object]) -> dict[int, StoredResult]:
    """The initialized controls by weight seed: the ``controls`` part and every ``seed_<k>`` part of a page's
    results (stored results), keyed by the seed their weights were drawn with (the controls' seed first)."""
    parts = [results["controls"], *(r for name, r in results.items() if name.startswith("seed_"))]
    return {_weight_seed(r.provenance["parameters"]): r for r in parts}


def decomposition(result: StoredResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``decomposition`` part read per layer
    (:func:`rankcollapse.book.pages._decomposition.decomposition_frame`) and its shares of the decay
    (:func:`rankcollapse.book.pages._decomposition.decay_shares`)."""
    frame = decomposition_frame(result.table)
    frame["mask"] = frame["mask"].map(mask_label)  # the figure's legend and the claims name masks in words
    return frame, decay_shares(frame)


DECOMPOSED_WORDS = {"initialized": "initialized with biases",
                    "initialized_nobias": "initialized without biases", "pretrained": "pretrained"}


def decomposition_clauses(shares: pd.DataFrame) -> dict[str, str]:
    """What drives the decay of μ, per weight source, as the clauses of the page's sentence on it: under the
    two windows (``decomp_local``) and under the complete and causal masks (``decomp_wide``), each source's
    driver and its per-layer ranges of g_V and c_A
    (:func:`rankcollapse.book.pages._decomposition.decay_driver`).

    Shapes: ``shares`` as from :func:`rankcollapse.book.pages._decomposition.decay_shares`.
    """
    def words(weights: str, local: bool) -> str:
        d = decay_driver(shares, weights, local)
        return (f"{d['driver']} (per layer g_V {d['gain_min']:.3g} to {d['gain_max']:.3g}, "
                f"c_A {d['contraction_min']:.3g} to {d['contraction_max']:.3g})")

    sources = [w for w in DECOMPOSED_WORDS if w in set(shares["weights"])]
    return {name: "; ".join(f"{DECOMPOSED_WORDS[w]}, {words(w, local)}" for w in sources)
            for name, local in (("decomp_local", True), ("decomp_wide", False))}
