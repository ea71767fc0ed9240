"""The skip-connections page (book/response/skip_connections.md): SAN, SAN + skip, SAN + LayerNorm (with
and without skip) and the full transformer, shallow (both weight sources) and deep (initialized).

:func:`configure` turns the page's parameters into its two sweeps; :func:`show` is what the page shows of
them: :func:`numbers` (the values its prose states), :func:`claims` (its claims table), the figures of μ and
‖X‖_F, the scale words and the scale notes of both sweeps.

Used by: book/response/skip_connections.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from rankcollapse.book.pages._common import (BIASES_SETTING, THEORY_SETTING, against, computing, mask_sides,
                                             seed_parts, stops_claim, times_floor, verdict_words,
                                             with_setting)
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import MAX_SAMPLES, experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult
from rankcollapse.experiments.table import held_from, value
from rankcollapse.verdicts.claims import Claim, effect_cell, effect_claim
from rankcollapse.verdicts.effects import growth, last_value, side
from rankcollapse.verdicts.robustness import robust

FIXED = dict(norms=("none", "model"), skips=(False, True), full_transformer=True)
SEED_PARAMETERS = ("n_weight_seeds", "n_samples_seeds")  # the bias-free seeds' own parameters
BIAS_FREE = dict(norms=("none", "model"), skips=(False, True), weights=("initialized_nobias",))


def configure(parameters: dict) -> dict[str, Run]:
    """Shallow (both weight sources, ``n_layers``) and deep (initialized only, ``n_layers_deep``) sweeps, and
    the theory's bias-free stacks over ``n_weight_seeds`` weight seeds (``seed + k``, the same samples):
    ``shallow_seed_<k>`` and ``deep_seed_<k>`` (in float64: a bias-free stack shrinks X by orders of
    magnitude, float32 would underflow), each on ``n_samples_seeds`` samples."""
    own = computing(parameters, "n_layers_deep", *SEED_PARAMETERS)
    deep = {k: v for k, v in own.items() if k not in ("n_layers", "weights")}
    n_layers_deep = parameters.get("n_layers_deep")  # its default: the parameters cell
    check_int("n_layers_deep", n_layers_deep, 1, 4096)
    runs = {"shallow": Run(experiment_config(own, **FIXED)),
            "deep": Run(experiment_config({**deep, "n_layers": n_layers_deep}, **FIXED,
                                          weights=("initialized",)))}
    if not all(name in parameters for name in SEED_PARAMETERS):
        return runs
    for name in SEED_PARAMETERS:
        check_int(name, parameters[name], 1, MAX_SAMPLES)
    for k in range(parameters["n_weight_seeds"]):
        seed = {"weight_seed": own.get("seed", 0) + k}
        runs[f"shallow_seed_{k}"] = Run(experiment_config(
            {**own, **seed, "n_samples": parameters["n_samples_seeds"]}, **BIAS_FREE))
        runs[f"deep_seed_{k}"] = Run(experiment_config(
            {**deep, **seed, "n_layers": n_layers_deep, "n_samples": parameters["n_samples_seeds"],
             "dtype": "float64"}, **BIAS_FREE))
    return runs


def page_claims(results: Mapping[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``skip``), as :func:`show` shows it (no figures drawn)."""
    return {"skip": claims(results, numbers(results["shallow"].table, results["deep"].table))}


def show(results: Mapping[str, StoredResult], parameters: dict) -> Shown:
    """The page's numbers and scales (``skip_*``: the sweeps' and the bias-free weight seeds'), claims table,
    the figures of μ and ‖X‖_F (shallow) and of μ (deep), and the scale notes of both sweeps."""
    shallow, deep = results["shallow"], results["deep"]
    found = numbers(shallow.table, deep.table)
    rows = page_claims(results, parameters)["skip"]
    seeds = seed_parts(results, "shallow_seed")
    return Shown(values=prefixed("skip", {"scale": scale_words(shallow), **found,
                                          "finding": verdict_words(rows), "n_seeds": len(seeds),
                                          "seeds_scale": scale_words(seeds[0]) if seeds else "none"}),
                 markdown={"skip_scale_note": scale_note(shallow) + "\n\n" + scale_note(deep)},
                 claims={"skip": rows},
                 figures=[layer_figure(shallow, "mu", "fig-skip-connections-mu"),
                          layer_figure(shallow, "norm", "fig-skip-connections-norm"),
                          layer_figure(deep, "mu", "fig-skip-connections-deep")])


def numbers(shallow: pd.DataFrame, deep: pd.DataFrame) -> dict[str, float | int]:
    """At the complete mask: token scale ‖X‖_F at the last pretrained layer per variant, and μ over its
    floor after the deep stack."""
    pre = dict(weights="pretrained")

    def labels(norm: str, skip: bool) -> dict:
        return dict(weights="initialized", variant="SAN", mask="complete", norm=norm, skip=skip)

    def over_floor(norm: str, skip: bool) -> float:
        return value(deep, "mu", **labels(norm, skip)) / value(deep, "floor", **labels(norm, skip))

    return {
        "ln_scale": value(shallow, "norm", variant="SAN", mask="complete", norm="model", skip=True, **pre),
        "skip_scale": value(shallow, "norm", variant="SAN", mask="complete", norm="none", skip=True, **pre),
        "full_scale": value(shallow, "norm", variant="full transformer", **pre),
        "deep_pure_over_floor": over_floor("none", False),
        "deep_ln_over_floor": over_floor("model", False),
        "deep_skip_over_floor": over_floor("none", True),
        "deep_ln_skip_over_floor": over_floor("model", True),
        **{f"deep_{name}_floor_words": times_floor(over_floor(norm, skip),
                                                   held_from(deep, **labels(norm, skip)))
           for name, norm, skip in (("pure", "none", False), ("ln", "model", False), ("skip", "none", True),
                                    ("ln_skip", "model", True))},
        "n_layers_deep": int(deep["layer"].max()),
    }


BIASES_WORDS = f"{BIASES_SETTING}; 1 weight seed"


def claims(results: Mapping[str, StoredResult], found: dict) -> list[Claim]:
    """The response (W1) on skip connections and LayerNorm. The initialized stacks, deep and shallow, decided
    on the theory's bias-free stacks pooled over their weight seeds, the deep stack with biases beside: each
    component against pure attention (stops μ → 0 where pure attention's collapse is resolved; slows it), μ's
    own growth in the deep skip stacks. The pretrained side (the shallow part's pretrained weights): skip
    alone, LayerNorm and both against pure attention, the full transformer's μ, and the tokens' scale against
    the full transformer's. Robust or not over the thresholds' grid; intervals where the results kept their
    samples."""
    deep_seeds = [r for name, r in results.items() if name.startswith("deep_seed_")]
    shallow_seeds = [r for name, r in results.items() if name.startswith("shallow_seed_")]
    sources = [(deep_seeds, "initialized_nobias", f"{THEORY_SETTING}; {len(deep_seeds)} weight seeds",
                f"{found['n_layers_deep']} layers"),
               ([results["deep"]], "initialized", BIASES_WORDS, f"{found['n_layers_deep']} layers"),
               (shallow_seeds, "initialized_nobias", f"{THEORY_SETTING}; {len(shallow_seeds)} weight seeds",
                "12 layers")]
    rows = []
    for parts, weights, setting, depth in sources:
        if parts:
            rows += _initialized_rows(parts, weights, setting, depth)
    return rows + pretrained_claims(results["shallow"])


def _initialized_rows(parts: list[StoredResult], weights: str, setting: str, depth: str) -> list[Claim]:
    """The initialized rows of one setting: each component against pure attention, and μ's growth with
    skip."""
    init = dict(weights=weights, variant="SAN")
    rows = []
    for metric, what in (("mu", "μ"), ("relative_mu", "μ/‖X‖_F")):
        pure = mask_sides(parts, None, "SAN", metric, norm="none", skip=False, **init)
        for norm, skip, words in (("none", True, "SAN + skip"), ("model", False, "SAN + LayerNorm"),
                                  ("model", True, "SAN + LayerNorm + skip")):
            if (metric == "mu") == (norm == "model"):
                continue  # skip alone is about μ → 0; LayerNorm fixes the scale, its claims are about μ/‖X‖_F
            mine = mask_sides(parts, None, words, metric, norm=norm, skip=skip, **init)
            pairs = {m: (mine[m], pure[m]) for m in mine}
            claim = ("Pure skip connections prevent μ → 0" if norm == "none" else
                     "LayerNorm alone prevents collapse at initialization" if not skip else
                     "LayerNorm + skip keeps μ away from 0")
            rows.append(stops_claim(claim, "the response (W1)",
                                    f"{depth}, {words} against pure attention: {what}", pairs,
                                    setting=setting))
            rows.append(against(f"... {words} slows the collapse of {what} against pure attention",
                                "the response (W1)",
                                f"{depth}, {words}: late per-layer factor of {what} over pure attention's",
                                pairs, setting=setting))
    for metric, what in (("mu", "μ"), ("norm", "‖X‖_F")):
        sides = mask_sides(parts, None, "SAN + skip", metric, norm="none", skip=True, **init)
        rows.append(with_setting(robust(lambda t, sides=sides, what=what: effect_claim(
            "... but make μ unstable in deep layers", "the response (W1)",
            f"{depth}, SAN + skip, {what}: growth over the last half of the layers",
            [effect_cell(m, growth(s, what), +1, t) for m, s in sides.items()])), setting))
    return rows


def pretrained_claims(shallow: StoredResult) -> list[Claim]:
    """The response's pretrained side (W1): skip alone prevents μ → 0; both LayerNorm and skip connections
    mitigate the collapse; the full transformer's μ is relatively stable; LayerNorm keeps the tokens at the
    full transformer's scale."""
    setting = f"pretrained ({shallow.provenance['model_description'].split(' (')[0].split('/')[-1]})"
    pre = dict(weights="pretrained", variant="SAN")
    pure_mu = mask_sides(shallow, None, "SAN", "mu", norm="none", skip=False, **pre)
    skip_mu = mask_sides(shallow, None, "SAN + skip", "mu", norm="none", skip=True, **pre)
    pure = mask_sides(shallow, None, "SAN", norm="none", skip=False, **pre)
    parts = {words: mask_sides(shallow, None, words, norm=norm, skip=skip, **pre)
             for words, norm, skip in (("skip", "none", True), ("LayerNorm", "model", False),
                                       ("LayerNorm + skip", "model", True))}
    full = side(shallow, None, "full transformer", "mu", weights="pretrained", variant="full transformer")
    return [stops_claim("Skip connections alone prevent μ → 0 in pretrained models", "the response (W1)",
                        "SAN + skip against pure attention on the same weights: μ",
                        {m: (skip_mu[m], pure_mu[m]) for m in skip_mu}, setting=setting),
            stops_claim("Both LayerNorm and skip connections mitigate rank collapse", "the response (W1)",
                        "each component against pure attention on the same weights: μ/‖X‖_F",
                        {f"{m}, {words}": (mine[m], pure[m]) for words, mine in parts.items() for m in mine},
                        setting=setting),
            stops_claim("The full transformer's μ is relatively stable", "the response (W1)",
                        "the full transformer (its own mask) against pure attention under the complete "
                        "mask: μ",
                        {"full transformer": (full, pure_mu["complete"])}, setting=setting),
            with_setting(_scale_claim(shallow), setting)]


def _scale_claim(shallow: StoredResult) -> Claim:
    """"LayerNorm keeps the tokens at the scale of the full transformer": ‖X‖_F of SAN + LN + skip (and of
    SAN + skip) over the full transformer's at the last pretrained layer, complete mask; holds when the
    interval lies within SAME_SCALE of 1."""
    full = side(shallow, None, "the full transformer", "norm", weights="pretrained",
                variant="full transformer")
    sides = {words: side(shallow, None, words, "norm", weights="pretrained", variant="SAN",
                         mask="complete", norm=norm, skip=True)
             for words, norm in (("SAN + LN + skip", "model"), ("SAN + skip", "none"))}
    effects = {words: last_value(s, full, "‖X‖_F") for words, s in sides.items()}
    return robust(lambda t: effect_claim(
        "In pretrained models LayerNorm keeps the tokens at the scale of the full transformer",
        "the response (W1)",
        f"complete mask, last pretrained layer: ‖X‖_F of SAN + LN + skip over the full transformer's "
        f"(SAN + skip for comparison: {effects['SAN + skip'].text})",
        [effect_cell("complete", effects["SAN + LN + skip"], 0, t)]))
