"""The Fig. 3 page (book/experiments/fig3.md): the temperature d_QK of pure attention on the paper's four
masks, initialized and pretrained weights.

:func:`configure` turns the page's parameters into its one sweep; :func:`show` is what the page shows of it:
:func:`numbers` (the values its prose states), the two layer figures (μ and μ/‖X‖_F, one curve per
temperature), the scale words and note, and :func:`claims`, its claims table: the smallest temperature
against the largest (the baseline) on the same samples, an effect with its interval per mask
(:mod:`rankcollapse.verdicts.effects`), robust or not over the thresholds' grid. The last row, the
response's on the pretrained panels, is shared with the pretrained-panels page
(:func:`rankcollapse.book.pages._common.pretrained_layers_claim`). Every number is read on the median over
samples.

Used by: book/experiments/fig3.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.book.pages._common import (FIG3, experiment, pretrained_layers_claim, temperature_range,
                                             temperature_sides)
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.experiments.sample_values import SampleValues
from rankcollapse.experiments.table import value
from rankcollapse.verdicts.claims import Claim, effect_cell, effect_claim
from rankcollapse.verdicts.effects import factor_contrast, late_factor
from rankcollapse.verdicts.robustness import robust

FIXED = FIG3  # pure attention only
configure = experiment(FIXED)


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``fig3``), as :func:`show` shows it (no figures drawn)."""
    return {"fig3": claims(results["main"].table, results["main"].samples)}


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scale (``fig3_*``), claims table, the figures of μ and μ/‖X‖_F per
    temperature and the scale note."""
    result = results["main"]
    return Shown(values=prefixed("fig3", {"scale": scale_words(result), **numbers(result.table)}),
                 markdown={"fig3_scale_note": scale_note(result)},
                 claims=page_claims(results, parameters),
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


def claims(table: pd.DataFrame, samples: SampleValues | None = None) -> list[Claim]:
    """Fig. 3's caption and the response's correction of its pretrained panels; ``samples``: the result's
    per-sample values (intervals), None for a result stored without them."""
    cold, warm = temperature_range(table)
    rows = []
    for weights in ("initialized", "pretrained"):
        sides = temperature_sides(table, samples, weights)
        rows.append(robust(lambda t, sides=sides, weights=weights: effect_claim(
            "A smaller temperature slows rank collapse", "Fig. 3 caption",
            f"{weights}: late per-layer factor of μ/‖X‖_F at d_QK = {cold:g} over d_QK = {warm:g} "
            "(the baseline), per mask",
            [effect_cell(m, late_factor(*pair, t), +1, t) for m, pair in sides.items()])))
    init = temperature_sides(table, samples, "initialized")
    if "complete" in init:
        rows.append(robust(lambda t: effect_claim(
            "... more for global attention", "Fig. 3 caption",
            "initialized: the temperature's per-layer factor under the complete mask over that under each "
            "local mask",
            [effect_cell(m, factor_contrast(init["complete"], pair, t), +1, t)
             for m, pair in init.items() if m != "complete"])))
    rows.append(pretrained_layers_claim(table, samples))
    return rows
