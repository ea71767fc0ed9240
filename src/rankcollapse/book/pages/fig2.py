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

import numpy as np
import pandas as pd

from rankcollapse.book.labels import mask_label
from rankcollapse.book.pages._common import (FIG2, against, computing, curves_claim, linear_prediction,
                                             mask_sides, stops_claim, times_floor, with_setting)
from rankcollapse.book.pages._decomposition import (WEIGHTS_TITLES, decay_driver, decay_shares,
                                                    decomposition_claims, decomposition_frame)
from rankcollapse.book.pages._fig2_controls import (BIASES, HF, SETTING_WORDS, THEORY, control_claims,
                                                    seed_results, setting_clauses, setting_sides,
                                                    setting_words)
from rankcollapse.book.plotting.controls import controls_figure
from rankcollapse.book.plotting.decomposition import decomposition_shown
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core import masks
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import INITIALIZED, MAX_SAMPLES, Run, experiment_config
from rankcollapse.experiments.table import held_from, value
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import OPEN, Claim, effect_cell, effect_claim, side_verdict
from rankcollapse.verdicts.effects import Side, late_factor, side
from rankcollapse.verdicts.robustness import robust

FIXED = FIG2  # the norms the page is about
CONTROL_MASKS = (*masks.PAPER_MASKS, "self")  # the paper's four and the no-mixing control
CONTROL_PAGE_PARAMETERS = ("n_samples_controls", "n_weight_seeds")  # the controls' own parameters


def configure(parameters: dict) -> dict[str, Run]:
    """The main sweep (the paper's Fig. 2, stored as before), its controls and their seed replicates.

    ``controls``: the first ``n_samples_controls`` of the same samples, weights initialized with and without
    biases (the same draws; without them: the theory's SAN), the paper's masks and the no-mixing ``self``
    mask, the page's norms; ``pretrained_self``: the pretrained weights under the ``self`` mask. ``seed_<k>``
    for k = 1 .. n_weight_seeds - 1: the initialized stacks of ``controls`` again with weight seed
    ``seed + k`` (the samples stay those of ``seed``): the outer level of every initialized interval. ``hf``:
    the same stacks initialized as Hugging Face initializes BERT (N(0, 0.02) weights, zero biases; the
    response's "BERT" init), weight seed ``seed``. ``components``: the pretrained weights with LayerNorm and
    the skip connection, and the full transformer ("together with the other components").
    ``decomposition``: pure attention under the paper's four masks on the controls' samples, initialized (with
    and without biases) and pretrained, recording each layer's decomposition of mu into the value maps' gain
    and attention's contraction (``attention_stats``; slower: every attention matrix is formed).
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
                                                  **FIXED, weights=INITIALIZED, masks=CONTROL_MASKS))
    runs["hf"] = Run(experiment_config(controls, **FIXED, weights=("initialized",), masks=CONTROL_MASKS,
                                       init="hf"))
    runs["components"] = Run(experiment_config(controls, weights=("pretrained",), masks=masks.PAPER_MASKS,
                                               norms=("none", "model"), skips=(False, True),
                                               full_transformer=True))
    runs["decomposition"] = Run(replace(experiment_config(controls, weights=(*INITIALIZED, "pretrained"),
                                                          masks=masks.PAPER_MASKS, norms=("none",)),
                                        attention_stats=True))
    return runs


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's three claims tables (``fig2``, ``fig2_controls``, ``fig2_decomp``), as :func:`show` shows
    them (no figures drawn)."""
    return {"fig2": claims(results), "fig2_controls": control_claims(results),
            "fig2_decomp": decomposition_claims(decomposition(results["decomposition"])[0], WEIGHTS_TITLES)}


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scales (``fig2_*``), its three claims tables (``fig2``, ``fig2_controls``,
    ``fig2_decomp``), the clauses of its first paragraph (which verdicts differ by setting), the
    decomposition's clauses, the scale note and the figures of μ, μ/‖X‖_F, the controls and the decomposition
    (whose coinciding curves its notes name)."""
    result, controls, decomposed = results["main"], results["controls"], results["decomposition"]
    frame, shares = decomposition(decomposed)
    decomposition_fig = decomposition_shown(decomposed, frame, "fig-fig2-decomposition", WEIGHTS_TITLES)
    tables = page_claims(results, parameters)
    rows = tables["fig2"]
    values = {"scale": scale_words(result), **numbers(result.table), "controls_scale": scale_words(controls),
              "n_seeds": len(seed_results(results)), "decomp_scale": scale_words(decomposed),
              **setting_clauses(rows), **finding_clauses(rows, controls.provenance["parameters"]["n_layers"]),
              **decomposition_clauses(shares)}
    return Shown(values=prefixed("fig2", values), markdown={"fig2_scale_note": scale_note(result)},
                 claims=tables,
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


def predictions(results: dict) -> dict[str, np.ndarray]:
    """The linear case's μ/‖X‖_F per paper mask at the controls' tokens, window and depth
    (:func:`rankcollapse.book.pages._common.linear_prediction`). Shapes: per mask [layer + 1]."""
    p = results["controls"].provenance["parameters"]
    return {m: linear_prediction(m, p["n_tokens"], p["window"] if m in masks.WINDOWED_MASKS else None,
                                 p["n_layers"]) for m in masks.PAPER_MASKS}


def claims(results: dict) -> list[Claim]:
    """Fig. 2's caption, claim by claim, each initialized claim decided in the theory's SAN (no biases, pooled
    over the weight seeds, beside the linear case's prediction) with the other initializations beside it, then
    the pretrained ones (the ``components`` part: pure attention, the trained LayerNorm, with the skip
    connection, the full transformer). Intervals: weight seeds and articles
    (:func:`rankcollapse.verdicts.effects.side`)."""
    collapse = "Pure masked attention collapses exponentially"
    stops = "Adding LayerNorm alone stops μ → 0 at random initialization"
    predicted = predictions(results)
    rows = []
    for setting in (THEORY, BIASES, HF):
        pure = setting_sides(results, setting, "none", "pure attention")
        rows.append(curves_claim(collapse, "the paper: Fig. 2", "pure attention: per-layer factor of μ/‖X‖_F "
                                 "over the late layers, per mask", pure,
                                 predicted if setting != BIASES else None,
                                 setting=setting_words(results, setting)))
        if setting == THEORY:
            rows.append(_rate_spread_claim(pure, setting_words(results, setting)))
        for norm, words in NORM_WORDS.items():
            if setting == HF and norm != "unit":
                continue
            normed = setting_sides(results, setting, norm, words)
            rows.append(stops_claim(stops, "the paper: Fig. 2", f"{words} against pure attention on the same "
                                    "weights: no resolved collapse where pure attention's is resolved",
                                    {m: (normed[m], pure[m]) for m in normed},
                                    setting=setting_words(results, setting)))
            if setting != HF:
                rows.append(against("... LayerNorm slows collapse against pure attention",
                                    "the paper: Fig. 2",
                                    f"{words}: late per-layer factor of μ/‖X‖_F over pure attention's",
                                    {m: (normed[m], pure[m]) for m in normed},
                                    setting=setting_words(results, setting)))
    for setting in (THEORY, BIASES):
        norm_sides = setting_sides(results, setting, "none", "‖X‖_F", metric="norm")
        rows.append(curves_claim("Pure attention shrinks the tokens to zero (X → 0)", "this book's control",
                                 "pure attention: per-layer factor of ‖X‖_F (a statement about scale, not "
                                 "rank: μ/‖X‖_F decides rank)", norm_sides,
                                 setting=setting_words(results, setting)))
    return rows + pretrained_claims(results["components"], results["main"])


NORM_WORDS = {"unit": "the paper's D (unit norm)", "model": "LayerNorm as a fresh model has it (no affine)"}


def pretrained_claims(components: StoredResult, main: StoredResult) -> list[Claim]:
    """The pretrained rows: pure attention collapses; the trained LayerNorm, with the skip connection, and the
    full transformer stop it ("together with the other components"); the trained LayerNorm slows it.

    The rows about pure attention and the trained LayerNorm alone read the main sweep (the figure's curves,
    the response's 3000 samples in the book) where it kept its per-sample values, else ``components``; the row
    with the skip connection and the full transformer reads ``components`` (the controls' samples), the only
    part that has them. Each row says its sample count."""
    setting = f"pretrained ({components.provenance['model_description'].split(' (')[0].split('/')[-1]})"
    pre = dict(weights="pretrained", variant="SAN", skip=False)
    alone = main if main.samples is not None else components

    def on(result: StoredResult) -> str:
        return f"{result.provenance['parameters']['n_samples']} samples"

    def alone_sides(result: StoredResult) -> tuple[dict[str, Side], dict[str, Side]]:
        return tuple(mask_sides(result, None, words, norm=norm, **pre)
                     for words, norm in (("pure attention", "none"), ("trained LayerNorm", "model")))

    pure, trained = alone_sides(components)
    pure_alone, trained_alone = (pure, trained) if alone is components else alone_sides(alone)
    with_skip = mask_sides(components, None, "LayerNorm + skip", norm="model",
                           **{**pre, "skip": True})
    full = side(components, None, "full transformer", weights="pretrained", variant="full transformer")
    helps = {**{f"{m}, LN": (trained[m], pure[m]) for m in trained},
             **{f"{m}, LN + skip": (with_skip[m], pure[m]) for m in with_skip},
             "full transformer": (full, pure["complete"])}
    return [curves_claim("Pure masked attention collapses exponentially", "the paper: Fig. 2",
                         f"pure attention ({on(alone)}): per-layer factor of μ/‖X‖_F, per mask", pure_alone,
                         setting=setting),
            stops_claim("In pretrained models LayerNorm helps, together with the other components",
                        "the paper: Fig. 2", f"the trained LayerNorm, LayerNorm + skip connection, and the "
                        f"full transformer (its own mask) against pure attention on the same weights "
                        f"({on(components)})", helps, setting=setting),
            against("... the trained LayerNorm slows collapse against pure attention", "the paper: Fig. 2",
                    f"the model's own LayerNorm ({on(alone)}): late per-layer factor of μ/‖X‖_F over pure "
                    "attention's", {m: (trained_alone[m], pure_alone[m]) for m in trained_alone},
                    setting=setting)]


def _rate_spread_claim(pure: dict[str, Side], setting: str) -> Claim:
    """"... at a rate that depends on the mask": the late per-layer factor of the slowest mask over the
    fastest, among the masks with a fitted factor (a mask that reaches the floor before enough layers are read
    above it is faster than every fitted one, by a bound), with its interval (the two are picked on the same
    data, so the effect is an upper estimate of the spread)."""
    verdicts = {m: side_verdict(s) for m, s in pure.items()}
    fitted = {m: v.factor for m, v in verdicts.items() if v.factor is not None}
    floored = [mask_label(m) for m, v in verdicts.items() if v.factor is None]
    note = f"; {', '.join(floored)}: reach the rounding floor first" if floored else ""
    if len(fitted) < 2:
        return Claim("... at a rate that depends on the mask", "the paper: Fig. 2",
                     "pure attention: factors per mask", OPEN,
                     "fewer than two masks with a fitted factor" + note, setting=setting)
    slowest, fastest = max(fitted, key=fitted.get), min(fitted, key=fitted.get)
    return with_setting(robust(lambda t: effect_claim(
        "... at a rate that depends on the mask", "the paper: Fig. 2",
        f"pure attention: late per-layer factor of the slowest mask over the fastest ({mask_label(fastest)})"
        + note, [effect_cell(slowest, late_factor(pure[slowest], pure[fastest], t), +1, t)])), setting)


def finding_clauses(rows: list[Claim], n_layers: int) -> dict[str, str]:
    """The page's finding in the theory's SAN, as clauses its first paragraph pastes, chosen by the numbers:
    under how many masks pure attention collapses, with each factor (``finding_collapse``), and what each
    norm does (``finding_layernorm``)."""
    theory = [r for r in rows if r.setting.startswith(SETTING_WORDS[THEORY][1])]
    collapse = next(r for r in theory if r.claim.startswith("Pure masked attention"))
    stops = [r for r in theory if r.claim.startswith("Adding LayerNorm")]
    held = [c for c in collapse.cells if c.outcome == "holds"]
    open_ = [mask_label(c.column) for c in collapse.cells if c.outcome != "holds"]
    rest = f"; no collapse resolved in {n_layers} layers under the {' and the '.join(open_)}" if open_ else ""
    return {"finding_collapse": f"collapses under {len(held)} of {len(collapse.cells)} masks ("
                                + "; ".join(f"{mask_label(c.column)}: {c.text}" for c in held) + f"){rest}",
            "finding_layernorm": "; ".join(f"{r.measured.split(' against')[0]} {r.verdict} ({r.number})"
                                           for r in stops)}


def _weight_seed(parameters: dict) -> int:
    """The seed a stored run's initialized weights were drawn with (``weight_seed``, else the samples'
    ``seed``)."""
    return int(parameters["seed"] if parameters.get("weight_seed") is None else parameters["weight_seed"])


def decomposition(result: StoredResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``decomposition`` part read per layer
    (:func:`rankcollapse.book.pages._decomposition.decomposition_frame`) and its shares of the decay
    (:func:`rankcollapse.book.pages._decomposition.decay_shares`)."""
    frame = decomposition_frame(result.table)
    frame["mask"] = frame["mask"].map(mask_label)  # the figure's legend and the claims name masks in words
    return frame, decay_shares(frame)


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

    sources = [w for w in WEIGHTS_TITLES if w in set(shares["weights"])]
    return {name: "; ".join(f"{WEIGHTS_TITLES[w]}, {words(w, local)}" for w in sources)
            for name, local in (("decomp_local", True), ("decomp_wide", False))}
