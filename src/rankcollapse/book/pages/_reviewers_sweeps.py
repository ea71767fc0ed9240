"""The reviewers' questions that the page answers from stored sweeps (book/response/reviewers.md): where
μ → 0 goes in Fig. 2's sweep (Q1: :func:`limits`, :func:`limit_numbers`), local or causal attention
(:func:`local_or_causal`), whether 32 samples are enough (:func:`sample_pair`) and whether the temperature
effect vanishes as the tokens align (Fig. 3 and Fig. 4's sweeps: :func:`temperature_alignment`,
:func:`temperature_numbers`).

Used by: :mod:`rankcollapse.book.pages.reviewers`; tests/unit/test_reviewers_samples.py.
"""

from __future__ import annotations

import math

import pandas as pd

from rankcollapse.book.pages import sample_size
from rankcollapse.book.pages._common import temperature_range
from rankcollapse.core.metrics import FLOOR_BAND
from rankcollapse.core.stats import rank_correlation
from rankcollapse.experiments.table import check_table
from rankcollapse.experiments.store import ResultStore, StoredResult
from rankcollapse.verdicts import limits as rc_limits
from rankcollapse.verdicts import tables
from rankcollapse.verdicts.claims import mean_rate

PAPER_SAMPLES = 32  # the paper's sample count: the reviewers' "only 32 samples"


def limits(table: pd.DataFrame, dtype: str) -> pd.DataFrame:
    """Q1: the limit of every configuration of Fig. 2's sweep, one row each
    (:func:`rankcollapse.verdicts.limits.table_limits`)."""
    return rc_limits.table_limits(table, dtype)


def limit_numbers(limit_table: pd.DataFrame) -> dict[str, object]:
    """Q1's counts: configurations with a norm and how many of them go to zero; per limit, the count of
    configurations without a norm (``pure_<limit>``, spaces as underscores)."""
    normed = limit_table[limit_table["norm"] != "none"]
    pure = limit_table[limit_table["norm"] == "none"]
    return {"q1_normed": len(normed), "q1_normed_to_zero": int((normed["limit"] == rc_limits.TO_ZERO).sum()),
            "q1_pure": len(pure), "q1_pure_norm_low": float(pure["norm ratio"].min()),
            "q1_pure_norm_high": float(pure["norm ratio"].max()),
            **{f"q1_pure_{k.split(':')[0].replace(' ', '_')}": int((pure["limit"] == k).sum())
               for k in rc_limits.LIMITS}}


def local_or_causal(fig2: pd.DataFrame) -> pd.DataFrame:
    """Q (local or causal): per weights and norm, the mean decay rate per layer of μ/‖X‖_F (median over
    samples; :func:`rankcollapse.verdicts.claims.mean_rate`) of the causal mask and of the two windows, and
    whether each window decays more slowly than the causal mask."""
    curves = tables.table_verdicts(fig2)
    curves["mean rate"] = curves["curve"].map(mean_rate)
    pivot = curves.pivot_table(index=["weights", "norm"], columns="mask", values="mean rate")
    windows = [m for m in ("sliding_window", "causal_sliding_window") if m in pivot.columns]
    for name in windows:
        pivot[f"{name} slower"] = pivot[name] < pivot["causal"]
    return pivot[["causal", *windows, *(f"{m} slower" for m in windows)]].reset_index()


def sample_pair(fig2: StoredResult, store: ResultStore | None = None) -> StoredResult | None:
    """Q (32 samples): the shown Fig. 2 run joined (:func:`sample_size.pair`) with the stored run of the same
    parameters on its first PAPER_SAMPLES samples; None when it has no more samples or that run is not
    stored."""
    own = fig2.provenance["parameters"]
    small = (store or ResultStore()).load("fig2", {**own, "n_samples": PAPER_SAMPLES}, check_table) \
        if own["n_samples"] > PAPER_SAMPLES else None
    return None if small is None else sample_size.pair({"large": fig2, "small": small})


def temperature_alignment(fig3: pd.DataFrame, fig4: pd.DataFrame) -> pd.DataFrame:
    """Q (temperature): per weights, mask and layer t >= 2 of pure attention, the layer's own temperature
    effect — the change over layer t of ``log`` (μ/‖X‖_F at the coldest d_QK / at the warmest), in
    absolute value, from Fig. 3's sweep — against the mean |cos| between the tokens entering layer t (Fig.
    4's sweep, the layers' own scaling). Layer 1 is left out (its input X(0) is the embedding, not a
    state), and so is every layer where either curve, at that layer or the one before, lies within
    FLOOR_BAND of its rounding floor.

    Shapes: tidy tables in; one row per (weights, mask, layer) out.
    """
    cold, warm = temperature_range(fig3)
    pivot = _pure_attention(fig3, "relative_mu") \
        .pivot_table(index=["weights", "mask", "layer"], columns="temperature", values="median")
    floors = _pure_attention(fig3, "relative_floor") \
        .pivot_table(index=["weights", "mask", "layer"], columns="temperature", values="median")
    above = ((pivot[cold] > FLOOR_BAND * floors[cold])
             & (pivot[warm] > FLOOR_BAND * floors[warm])).rename("above")
    log_ratio = (pivot[cold] / pivot[warm]).apply(math.log).rename("log_ratio").reset_index()
    log_ratio["effect"] = log_ratio.groupby(["weights", "mask"])["log_ratio"].diff().abs()
    log_ratio["above"] = above.to_numpy()
    log_ratio["above"] &= log_ratio.groupby(["weights", "mask"])["above"].shift(1, fill_value=False)
    cosine = (_pure_attention(fig4, "mean_abs_cosine")[["weights", "mask", "layer", "median"]]
              .rename(columns={"median": "cosine"}))
    cosine["layer"] += 1  # the cosine entering the next layer
    joined = log_ratio.merge(cosine, on=["weights", "mask", "layer"])
    return joined[(joined["layer"] >= 2) & joined["above"]].drop(columns="above").reset_index(drop=True)


def _pure_attention(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of ``metric`` of pure attention (the SAN without a norm) in a tidy table."""
    return table[(table["metric"] == metric) & (table["norm"] == "none") & (table["variant"] == "SAN")]


def temperature_numbers(alignment: pd.DataFrame) -> dict[str, object]:
    """Per weights: the rank correlation of the per-layer effect with the entering cosine, the median
    effect and cosine over the first and the last third of the layers (``temp_<weights>_...``)."""
    out: dict[str, object] = {}
    for weights, group in alignment.groupby("weights"):
        third = max(1, (group["layer"].max() - 1) // 3)
        early, late = group[group["layer"] < 2 + third], group[group["layer"] > group["layer"].max() - third]
        out |= {f"temp_{weights}_correlation": rank_correlation(group["effect"], group["cosine"]),
                f"temp_{weights}_early_effect": float(early["effect"].median()),
                f"temp_{weights}_late_effect": float(late["effect"].median()),
                f"temp_{weights}_early_cosine": float(early["cosine"].median()),
                f"temp_{weights}_late_cosine": float(late["cosine"].median())}
    return out
