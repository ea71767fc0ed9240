"""The Fig. 4 page (book/experiments/fig4.md): token geometry (rank, σ_min, mean |cos|) of the SAN variants
and of the full transformer, initialized and pretrained weights.

:func:`configure` turns the page's parameters into its one sweep; :func:`show` is what the page shows of it:
:func:`numbers` (the values its prose states), :func:`claims` (its claims table) and the clauses of its
finding (:func:`finding_clauses`), the geometry figure and the scale words.

Used by: book/experiments/fig4.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.book.pages._common import FIG4, experiment, row_of, verdict_clause
from rankcollapse.book.plotting.results import geometry_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.experiments.store import StoredResult
from rankcollapse.experiments.table import value
from rankcollapse.verdicts.claims import FAILS, HOLDS, PARTLY, Cell, Claim, effect_cell, effect_claim
from rankcollapse.verdicts.effects import depth_change, side
from rankcollapse.verdicts.robustness import robust
from rankcollapse.verdicts.rules import Thresholds

FIXED = FIG4
configure = experiment(FIXED)
_PART = "pretrained full transformer"  # what every claim of the caption is read on


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``fig4``), as :func:`show` shows it (no figures drawn)."""
    return {"fig4": claims(results["main"])}


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scale (``fig4_*``), the clauses of its finding (:func:`finding_clauses`), claims
    table, geometry figure and scale note."""
    result = results["main"]
    tables = page_claims(results, parameters)
    return Shown(values=prefixed("fig4", {"scale": scale_words(result), **numbers(result.table),
                                          **finding_clauses(tables["fig4"])}),
                 markdown={"fig4_scale_note": scale_note(result)}, claims=tables,
                 figures=[geometry_figure(result, "fig-fig4-geometry")])


def finding_clauses(rows: list[Claim]) -> dict[str, str]:
    """The page's finding as the clauses its first paragraph pastes: each claim of the caption, its verdict
    and the number of its one cell (the pretrained full transformer): full rank (``finding_rank``),
    anisotropy (``finding_anisotropy``), σ_min falling, absolute and scale-free (``finding_sigma``,
    ``finding_sigma_relative``)."""
    claims = {"finding_rank": "Tokens keep full rank", "finding_anisotropy": "... but become anisotropic",
              "finding_sigma": "The smallest singular value falls",
              "finding_sigma_relative": "The smallest singular value falls (scale-free)"}
    found = {name: row_of(rows, claim) for name, claim in claims.items()}
    return {name: verdict_clause(row, row.cells[0].text if row.cells else None)
            for name, row in found.items()}


def numbers(table: pd.DataFrame) -> dict[str, float]:
    """Shares at full rank (last layer, and the lowest over layers) and the median mean |cos| of the full
    transformer."""
    full = dict(weights="pretrained", variant="full transformer")
    rank_full = table.query("metric == 'full_rank' and variant == 'full transformer' "
                            "and weights == 'pretrained'")
    return {
        "full_rank_full": 100 * value(table, "full_rank", **full),
        "full_rank_full_min": 100 * float(rank_full["mean"].min()),
        "full_rank_pure": 100 * value(table, "full_rank", weights="initialized", variant="SAN", norm="none",
                                      mask="complete"),
        "cos_first": value(table, "mean_abs_cosine", layer=0, stat="median", **full),
        "cos_full": value(table, "mean_abs_cosine", stat="median", **full),
    }


def claims(result: StoredResult) -> list[Claim]:
    """Fig. 4's caption on the pretrained full transformer: full rank kept (the share of samples at full
    rank, against ``thresholds.majority``), anisotropy grows (mean |cos|, last layer over the embeddings) and
    σ_min falls, absolute and scale-free (σ_min over ‖X‖_F). Medians over samples, except the share; the
    intervals bootstrap the articles where the result kept σ_min and mean |cos| per sample
    (:data:`rankcollapse.experiments.sample_values.GEOMETRY_METRICS`; runs stored before have none)."""
    table, full = result.table, dict(weights="pretrained", variant="full transformer")
    share = table.query("metric == 'full_rank' and variant == 'full transformer' and weights == 'pretrained'")
    lowest = float(share["mean"].min())
    curves = {metric: side(result, label=_PART, metric=metric, **full)
              for metric in ("mean_abs_cosine", "sigma_min", "norm")}

    def rank(t: Thresholds) -> Claim:
        verdict = HOLDS if lowest == 1 else PARTLY if lowest >= t.majority else FAILS
        cell = Cell(_PART, verdict, f"{100 * lowest:.1f} %",
                    f"lowest share of samples at full numerical rank over "
                    f"layers {100 * lowest:.1f} %; holds partly from {100 * t.majority:.3g} % on")
        return Claim("Tokens keep full rank across layers", "the paper: Fig. 4",
                     f"{_PART}: lowest share of samples at full numerical rank over layers", verdict,
                     f"{100 * lowest:.1f} %", (cell,))

    def change(claim: str, measured: str, name: str, metric: str, direction: int,
               scale: bool = False) -> Claim:
        values = curves[metric].values / (curves["norm"].values if scale else 1)  # [layer + 1]
        effect = depth_change(curves[metric], f"{name} ({values[0]:.3g} → {values[-1]:.3g})",
                              curves["norm"] if scale else None)
        return robust(lambda t: effect_claim(claim, "the paper: Fig. 4", f"{_PART}: {measured}",
                                             [effect_cell(_PART, effect, direction, t)]))

    return [
        robust(rank),
        change("... but become anisotropic", "median mean pairwise |cos|, embeddings → last layer",
               "mean |cos|", "mean_abs_cosine", +1),
        change("The smallest singular value falls", "median σ_min, embeddings → last layer", "σ_min",
               "sigma_min", -1),
        change("The smallest singular value falls (scale-free)",
               "median σ_min over median ‖X‖_F, embeddings → last layer", "σ_min / ‖X‖_F", "sigma_min", -1,
               scale=True),
    ]
