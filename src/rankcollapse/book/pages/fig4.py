"""The Fig. 4 page (book/experiments/fig4.md): token geometry (rank, σ_min, mean |cos|) of the SAN variants
and of the full transformer, initialized and pretrained weights.

:func:`configure` turns the page's parameters into its one sweep; :func:`numbers` are the values its prose
states, :func:`claims` its claims table, both read from the tidy table the page shows.

Used by: book/experiments/fig4.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.book.pages._common import FIG4, experiment
from rankcollapse.experiments.config import value
from rankcollapse.verdicts.claims import FAILS, HOLDS, PARTLY, Claim

FIXED = FIG4
configure = experiment(FIXED)


def numbers(table: pd.DataFrame) -> dict[str, float]:
    """Shares at full rank (last layer, and the lowest over layers) and mean |cos| of the full transformer."""
    full = dict(weights="pretrained", variant="full transformer")
    rank_full = table.query("metric == 'full_rank' and variant == 'full transformer' and weights == 'pretrained'")
    return {
        "full_rank_full": 100 * value(table, "full_rank", **full),
        "full_rank_full_min": 100 * float(rank_full["mean"].min()),
        "full_rank_pure": 100 * value(table, "full_rank", weights="initialized", variant="SAN", norm="none",
                                      mask="complete"),
        "cos_first": value(table, "mean_abs_cosine", layer=0, **full),
        "cos_full": value(table, "mean_abs_cosine", **full),
    }


def claims(table: pd.DataFrame) -> list[Claim]:
    """Fig. 4's caption: full rank kept, anisotropy grows, σ_min falls (pretrained full transformer)."""
    full = dict(weights="pretrained", variant="full transformer")
    share = table.query("metric == 'full_rank' and variant == 'full transformer' and weights == 'pretrained'")
    lowest = float(share["mean"].min())
    cos0, cos1 = value(table, "mean_abs_cosine", layer=0, **full), value(table, "mean_abs_cosine", **full)
    s0, s1 = value(table, "sigma_min", layer=0, stat="median", **full), value(table, "sigma_min", stat="median", **full)
    return [
        Claim("Tokens keep full rank across layers", "Fig. 4 caption",
              "pretrained full transformer: lowest share of samples at full numerical rank over layers",
              HOLDS if lowest == 1 else PARTLY if lowest >= 0.5 else FAILS, f"{100 * lowest:.0f} %"),
        Claim("... but become anisotropic", "Fig. 4 caption",
              "pretrained full transformer: mean pairwise |cos|, embeddings → last layer",
              HOLDS if cos1 > cos0 else FAILS, f"{cos0:.2f} → {cos1:.2f}"),
        Claim("The smallest singular value falls", "Fig. 4 caption",
              "pretrained full transformer: median σ_min, embeddings → last layer",
              HOLDS if s1 < s0 else FAILS, f"{s0:.3g} → {s1:.3g}"),
    ]
