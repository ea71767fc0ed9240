"""The Fig. 3 page (book/experiments/fig3.md): the temperature d_QK of pure attention on the paper's four
masks, initialized and pretrained weights.

:func:`configure` turns the page's parameters into its one sweep; :func:`show` is what the page shows of it:
:func:`numbers` (the values its prose states), the two layer figures (μ and μ/‖X‖_F, one curve per
temperature), the scale words and note, and :func:`claims`, its claims table: the smallest temperature
against the largest (the baseline) on the same samples, an effect with its interval per mask
(:mod:`rankcollapse.verdicts.effects`), robust or not over the thresholds' grid. The last row, the
response's on the pretrained panels, is shared with the pretrained-panels page
(:func:`rankcollapse.book.pages._common.pretrained_layers_claim`). Every number is read on the median over
samples: the pretrained rows on the main sweep's pretrained curves, with its per-sample values (at the
paper profile the response's 3000 samples), the initialized rows on the weight seeds' replicates (at the
paper profile 5 x 600 samples: the same 3000, split over the seeds the intervals resample).

Used by: book/experiments/fig3.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.book.pages._common import (BIASES_SETTING, FIG3, THEORY_SETTING, against, computing,
                                             paired_sides, pretrained_layers_claim, temperature_range,
                                             seed_parts, temperature_sides, with_setting)
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import INITIALIZED, MAX_SAMPLES, Run, experiment_config
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.experiments.table import value
from rankcollapse.verdicts.claims import Cell, Claim, combine, effect_cell, effect_claim
from rankcollapse.verdicts.effects import factor_contrast, layer_factor, outcome
from rankcollapse.verdicts.robustness import robust

FIXED = FIG3  # pure attention only
SEED_PAGE_PARAMETERS = ("n_samples_seeds", "n_weight_seeds")  # the seed replicates' own parameters


def configure(parameters: dict) -> dict[str, Run]:
    """The main sweep (the paper's Fig. 3; its pretrained curves and per-sample values are also what the
    pretrained rows read), and ``seed_<k>`` for k = 0 .. n_weight_seeds - 1: the first ``n_samples_seeds``
    samples, initialized with and without biases (without: the theory's SAN), weights drawn with seed
    ``seed + k`` — the outer level of every initialized interval."""
    own = computing(parameters, *SEED_PAGE_PARAMETERS)
    runs = {"main": Run(experiment_config(own, **FIXED))}
    if not any(name in parameters for name in SEED_PAGE_PARAMETERS):
        return runs  # a page reusing Fig. 3's sweep without its seeds (the pretrained panels)
    n_samples, n_seeds = parameters.get("n_samples_seeds"), parameters.get("n_weight_seeds")
    check_int("n_samples_seeds", n_samples, 1, MAX_SAMPLES)
    check_int("n_weight_seeds", n_seeds, 1, 100)
    seeds = {**own, "n_samples": n_samples}
    for k in range(n_seeds):
        runs[f"seed_{k}"] = Run(experiment_config({**seeds, "weight_seed": own.get("seed", 0) + k}, **FIXED,
                                                  weights=INITIALIZED))
    return runs


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``fig3``), as :func:`show` shows it (no figures drawn)."""
    return {"fig3": claims(results)}


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scale (``fig3_*``), claims table, the figures of μ and μ/‖X‖_F per
    temperature and the scale note."""
    result = results["main"]
    rows = page_claims(results, parameters)["fig3"]
    seeds = seed_parts(results, "seed")
    return Shown(values=prefixed("fig3", {"scale": scale_words(result), **numbers(result.table),
                                          "seeds_scale": scale_words(seeds[0]), "n_seeds": len(seeds),
                                          "seeds_samples": sum(r.provenance["parameters"]["n_samples"]
                                                               for r in seeds),
                                          **finding_clauses(rows)}),
                 markdown={"fig3_scale_note": scale_note(result)},
                 claims={"fig3": rows},
                 figures=[layer_figure(result, "mu", "fig-fig3-mu", hue="temperature"),
                          layer_figure(result, "relative_mu", "fig-fig3-relative", hue="temperature")])


def _first_layer_ratio(table: pd.DataFrame, metric: str, weights: str, mask: str) -> float:
    """After one layer: the median of ``metric`` at the smallest temperature over that at the largest."""
    cold, warm = temperature_range(table)
    return (value(table, metric, layer=1, mask=mask, temperature=cold, weights=weights, stat="median")
            / value(table, metric, layer=1, mask=mask, temperature=warm, weights=weights, stat="median"))


def numbers(table: pd.DataFrame) -> dict[str, float]:
    """After one layer at the complete mask: μ at the smallest temperature over μ at the largest
    (medians)."""
    cold, warm = temperature_range(table)
    return {"ratio_init": _first_layer_ratio(table, "mu", "initialized", "complete"),
            "ratio_pre": _first_layer_ratio(table, "mu", "pretrained", "complete"), "cold": float(cold),
            "warm": float(warm)}


SHALLOW = (1, 6)  # "in shallow layers": the response says the initialized effect is gone after 5 or 6 layers
GONE_AFTER = (5, 6, 7)  # the first layer without the effect, for "it disappears after 5 or 6 layers" to hold
SETTINGS = {"initialized_nobias": THEORY_SETTING, "initialized": BIASES_SETTING}


def _setting(results: dict, weights: str) -> str:
    seeds = seed_parts(results, "seed")
    return f"{SETTINGS[weights]}; {len(seeds)} weight seeds"


def claims(results: dict) -> list[Claim]:
    """Fig. 3's caption at the layers it names — initialized stacks in layers 1–6 (:data:`SHALLOW`), in the
    theory's SAN and with biases (pooled over the weight seeds) — the response's "the effect disappears after
    5 or 6 layers" as the first layer whose interval includes no effect, and the pretrained rows at every
    layer (the main sweep's pretrained curves, with its per-sample values)."""
    seeds, pretrained = seed_parts(results, "seed"), results["main"]
    cold, warm = temperature_range(pretrained.table)
    words = (f"d_QK = {cold:g}", f"d_QK = {warm:g}")
    rows = []
    for weights in SETTINGS:
        sides = paired_sides(seeds, None, dict(weights=weights, temperature=cold),
                             dict(weights=weights, temperature=warm), words)
        setting = _setting(results, weights)
        rows.append(against("A smaller temperature slows rank collapse, in shallow layers",
                            "the paper: Fig. 3",
                            f"per-layer factor of μ/‖X‖_F over layers {SHALLOW[0]}–{SHALLOW[1]} at d_QK = "
                            f"{cold:g} over d_QK = {warm:g}, per mask", sides, window=SHALLOW,
                            setting=setting))
        rows.append(_gone_claim(sides, setting))
        if weights == "initialized_nobias" and "complete" in sides:
            rows.append(with_setting(robust(lambda t, sides=sides: effect_claim(
                "... more for global attention", "the paper: Fig. 3",
                f"the temperature's per-layer factor over layers {SHALLOW[0]}–{SHALLOW[1]} under the "
                "complete mask over that under each local mask",
                [effect_cell(m, factor_contrast(sides["complete"], pair, t, SHALLOW), +1, t)
                 for m, pair in sides.items() if m != "complete"])), setting))
    sides = temperature_sides(pretrained, None, "pretrained")
    setting = f"pretrained ({pretrained.provenance['model_description'].split(' (')[0].split('/')[-1]})"
    rows.append(against("A smaller temperature slows rank collapse", "the paper: Fig. 3",
                        f"late per-layer factor of μ/‖X‖_F at d_QK = {cold:g} over d_QK = {warm:g}, per mask",
                        sides, setting=setting))
    rows.append(with_setting(pretrained_layers_claim(pretrained.table, pretrained.samples), setting))
    return rows


def _gone_claim(sides: dict, setting: str) -> Claim:
    """"The effect disappears after 5 or 6 layers" (the response, on initialized stacks): per mask, the first
    layer whose factor ratio (:func:`rankcollapse.verdicts.effects.layer_factor`, smaller over larger
    temperature) has an interval including 1 (or lies on the floor); it holds where that layer is one of
    :data:`GONE_AFTER`, cannot tell where the effect is not resolved in layer 1 either."""
    cells = []
    for mask, pair in sides.items():
        n_layers = len(pair[0].values) - 1
        effects = [layer_factor(*pair, layer) for layer in range(1, n_layers + 1)]
        shown = [outcome(e, +1) == "holds" for e in effects]
        first = next((k for k, held in enumerate(shown, start=1) if not held), None)
        if not shown[0]:
            result, text = "cannot tell", "no effect in layer 1"
        elif first is None:
            result, text = "does not hold", f"present in all {n_layers} layers"
        else:
            result, text = ("holds" if first in GONE_AFTER else "does not hold"), f"gone at layer {first}"
        cells.append(Cell(mask, result, text, f"{text}: " + "; ".join(
            f"layer {k}: {e.text}" for k, e in enumerate(effects[:max(first or n_layers, 2)], start=1))))
    return Claim("... the effect disappears after 5 or 6 layers", "the response (W2)",
                 "the first layer whose factor at the smaller temperature over the larger one has an "
                 "interval including 1 (per layer: that layer's value over the previous one's)",
                 combine(cells), "; ".join(f"{c.column}: {c.text}" for c in cells), tuple(cells),
                 setting=setting)


def finding_clauses(rows: list[Claim]) -> dict[str, str]:
    """The page's finding as clauses for its first paragraph: the shallow-layer verdict per setting and where
    the initialized effect is gone (``finding_shallow``, ``finding_gone``)."""
    shallow = [r for r in rows if r.claim.endswith("in shallow layers")]
    gone = [r for r in rows if r.claim.startswith("... the effect disappears")]
    return {"finding_shallow": "; ".join(f"{r.verdict} {r.setting.split(';')[0]}" for r in shallow),
            "finding_gone": "; ".join(f"{r.setting.split(';')[0]}: {r.number}" for r in gone)}
