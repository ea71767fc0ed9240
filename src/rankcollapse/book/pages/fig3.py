"""The Fig. 3 page (book/experiments/fig3.md): the temperature d_QK of pure attention on the paper's four
masks, initialized and pretrained weights.

:func:`configure` turns the page's parameters into its one sweep; :func:`numbers` are the values its prose
states, :func:`claims` its claims table (the last row, the response's on the pretrained panels, is shared
with the pretrained-panels page: :func:`rankcollapse.book.pages._common.pretrained_layers_claim`).

Used by: book/experiments/fig3.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.book.pages._common import FIG3, experiment, pretrained_layers_claim, temperature_range
from rankcollapse.experiments.config import value
from rankcollapse.verdicts.claims import FAILS, HOLDS, PARTLY, Claim

FIXED = FIG3  # pure attention only
configure = experiment(FIXED)


def _first_layer_ratio(table: pd.DataFrame, metric: str, weights: str, mask: str) -> float:
    """After one layer: ``metric`` at the smallest temperature over ``metric`` at the largest."""
    cold, warm = temperature_range(table)
    return (value(table, metric, layer=1, mask=mask, temperature=cold, weights=weights)
            / value(table, metric, layer=1, mask=mask, temperature=warm, weights=weights))


def numbers(table: pd.DataFrame) -> dict[str, float]:
    """After one layer at the complete mask: μ at the smallest temperature over μ at the largest."""
    cold, warm = temperature_range(table)
    return {"ratio_init": _first_layer_ratio(table, "mu", "initialized", "complete"),
            "ratio_pre": _first_layer_ratio(table, "mu", "pretrained", "complete"), "cold": float(cold),
            "warm": float(warm)}


def claims(table: pd.DataFrame) -> list[Claim]:
    """Fig. 3's caption and the response's correction of its pretrained panels."""
    cold, warm = temperature_range(table)
    rows = []
    for weights in ("initialized", "pretrained"):
        first = {m: _first_layer_ratio(table, "relative_mu", weights, m) for m in dict.fromkeys(table["mask"])}
        slower = sum(r > 1 for r in first.values())
        verdict = HOLDS if slower == len(first) else PARTLY if slower else FAILS
        rows.append(Claim("A smaller temperature slows rank collapse", "Fig. 3 caption",
                          f"{weights}: μ/‖X‖_F after one layer at d_QK = {cold:g} over d_QK = {warm:g}, per mask",
                          verdict, ", ".join(f"{m}: {r:.3g}×" for m, r in first.items())))
    init = {m: _first_layer_ratio(table, "relative_mu", "initialized", m) for m in dict.fromkeys(table["mask"])}
    largest = max(init, key=init.get)
    rows.append(Claim("... more for global attention", "Fig. 3 caption",
                      "initialized: the mask with the largest effect after one layer",
                      HOLDS if largest == "complete" else FAILS, f"{largest} ({init[largest]:.3g}×)"))
    rows.append(pretrained_layers_claim(table))
    return rows
