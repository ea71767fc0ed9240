"""The numbers each experiment page states, computed from the tidy tables it shows (one function per page).

Each function returns a flat dict ``name -> number or words`` that the page glues under ``<page>_<name>``
(:func:`rankcollapse.book.report.glue_values`), so no number in the prose is typed by hand.

Used by: book/experiments/*.md, book/response/*.md; tests/unit/test_findings.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.config import STATISTICS, value
from rankcollapse.verdicts.rules import COLLAPSE_RATE


def fig2(table: pd.DataFrame) -> dict[str, float | int]:
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
        "model_ln_complete_over_floor": over_floor(init, "model"),
        "pre_ln_complete_over_floor": over_floor(pre, "unit"),
        "pre_model_ln_complete": value(table, "mu", mask="complete", norm="model", **pre),
    }


def fig3(table: pd.DataFrame) -> dict[str, float]:
    """After one layer at the complete mask: μ at the smallest temperature over μ at the largest."""
    temperatures = sorted(table["temperature"].dropna().unique())
    cold, warm = temperatures[0], temperatures[-1]
    ratio = lambda weights: (value(table, "mu", layer=1, mask="complete", temperature=cold, weights=weights)  # noqa: E731
                             / value(table, "mu", layer=1, mask="complete", temperature=warm, weights=weights))
    return {"ratio_init": ratio("initialized"), "ratio_pre": ratio("pretrained"), "cold": float(cold),
            "warm": float(warm)}


def fig4(table: pd.DataFrame) -> dict[str, float]:
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


def appendix_g1(table: pd.DataFrame) -> dict[str, float | int]:
    """How many masks' pure-attention curves end within 10x their rounding floor after the deep stack."""
    masks = list(dict.fromkeys(table["mask"]))
    pure = {m: value(table, "mu", mask=m, norm="none", variant="SAN") for m in masks}
    floor = {m: value(table, "floor", mask=m, norm="none", variant="SAN") for m in masks}
    return {"masks_at_floor": sum(pure[m] <= 10 * floor[m] for m in masks), "n_masks": len(masks),
            "window_final": pure.get("causal_sliding_window", float("nan")),
            "n_layers": int(table["layer"].max())}


CURVE = ["weights", "variant", "mask", "window", "temperature", "norm", "skip"]  # one configuration's labels


def _sample_pivot(table: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """μ's mean, median and band width (q90 / q10) per curve and layer >= 1, one column per sample count,
    and the two sample counts (small, large)."""
    mu = table[(table["metric"] == "mu") & (table["layer"] >= 1)].copy()
    mu["width"] = mu["q90"] / mu["q10"]
    pivot = mu.pivot_table(index=[*CURVE, "layer"], columns="n_samples", values=["mean", "median", "width"],
                           dropna=False).dropna(how="all")
    small, large = sorted(set(table["n_samples"]))
    return pivot, int(small), int(large)


def sample_mean_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Per curve and layer, the mean of μ over the small sample divided by its mean over the large one, as
    a tidy table with metric ``mean_ratio`` (every statistic column holds the ratio: a line, no band)."""
    pivot, small, large = _sample_pivot(table)
    ratios = (pivot["mean"][small] / pivot["mean"][large]).rename("ratio").reset_index()
    return ratios.assign(metric="mean_ratio", n_samples=large, **{s: ratios["ratio"] for s in STATISTICS}) \
        .drop(columns="ratio")


def sample_size(table: pd.DataFrame) -> dict[str, float | int]:
    """How far the small sample's summaries move from the large sample's, over every curve and layer:
    the factor (>= 1) between their means and between their medians, and the ratio of band widths."""
    pivot, small, large = _sample_pivot(table)

    def factor(stat: str) -> pd.Series:
        ratio = pivot[stat][small] / pivot[stat][large]
        return np.maximum(ratio, 1 / ratio)

    return {"small": int(small), "large": int(large), "max_mean_ratio": float(factor("mean").max()),
            "median_mean_ratio": float(factor("mean").median()), "max_median_ratio": float(factor("median").max()),
            "worst_layer": int(factor("mean").idxmax()[-1]),
            "band_ratio": float((pivot["width"][large] / pivot["width"][small]).median())}


def skip_connections(shallow: pd.DataFrame, deep: pd.DataFrame) -> dict[str, float | int]:
    """At the complete mask: token scale ‖X‖_F at the last pretrained layer per variant, and μ over its
    floor after the deep stack."""
    pre = dict(weights="pretrained")

    def over_floor(norm: str, skip: bool) -> float:
        labels = dict(weights="initialized", variant="SAN", mask="complete", norm=norm, skip=skip)
        return value(deep, "mu", **labels) / value(deep, "floor", **labels)

    return {
        "ln_scale": value(shallow, "norm", variant="SAN", mask="complete", norm="model", skip=True, **pre),
        "skip_scale": value(shallow, "norm", variant="SAN", mask="complete", norm="none", skip=True, **pre),
        "full_scale": value(shallow, "norm", variant="full transformer", **pre),
        "deep_pure_over_floor": over_floor("none", False),
        "deep_ln_over_floor": over_floor("model", False),
        "deep_skip_over_floor": over_floor("none", True),
        "deep_ln_skip_over_floor": over_floor("model", True),
        "n_layers_deep": int(deep["layer"].max()),
    }


def weights_gap(table: pd.DataFrame, hue: str) -> float:
    """Median factor (>= 1) between pretrained and initialized μ after one layer, over masks and ``hue``."""
    first = table[(table["metric"] == "mu") & (table["layer"] == 1) & (table["variant"] == "SAN")]
    by_weights = first.pivot_table(index=["mask", hue], columns="weights", values="mean")
    ratio = by_weights["pretrained"] / by_weights["initialized"]
    return float(np.maximum(ratio, 1 / ratio).median())


def rank_correlation(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rank correlation (Pearson's on ranks, ties averaged); NaN pairs dropped."""
    keep = x.notna() & y.notna()
    return float(x[keep].rank().corr(y[keep].rank()))


def mask_design(table: pd.DataFrame, weights: str = "initialized") -> dict[str, float | int | str]:
    """How well radius and uniform |λ₂| order the measured rates, the causal windows' spread, uni- against
    bidirectional windows of equal radius, the masks without a radius, the fastest sparse mask, and which
    masks collapse at all (curve verdict "collapses"; the others' rates are not read as rates of collapse).

    Shapes: ``table`` one row per zoo mask (:func:`rankcollapse.book.pages.mask_design.design_table`).
    """
    rate = table[f"rate, {weights}"]
    collapses = table[f"verdict, {weights}"] == "collapses"
    connected = table["radius"].notna()
    causal = table["mask"].str.startswith("causal window")
    complete_rate = float(rate[table["mask"] == "complete"].iloc[0])
    sparse = table["mask"] != "complete"
    fastest = rate[sparse].idxmax()
    bidirectional = table["mask"].str.startswith("window ±") & ~table["mask"].str.contains("+", regex=False)
    pairs = (table[causal].assign(rate=rate[causal], collapses=collapses[causal])
             .merge(table[bidirectional].assign(rate=rate[bidirectional], collapses=collapses[bidirectional]),
                    on="radius", suffixes=("_uni", "_bi")))
    both = pairs[pairs["collapses_uni"] & pairs["collapses_bi"]]
    ratios = both["rate_uni"] / both["rate_bi"]
    by_radius = rank_correlation(table.loc[connected, "radius"].astype(float), rate[connected])
    causal_by_radius = rank_correlation(table.loc[causal, "radius"].astype(float), rate[causal])
    sparse_min, sparse_max = float(rate[sparse].min()), float(rate[fastest])
    return {
        "n_masks": len(table), "n_connected": int(connected.sum()),
        "n_collapsing": int(collapses.sum()),
        "collapse_words": _collapse_words(table["mask"], collapses),
        "by_radius": by_radius,
        "by_lambda": rank_correlation(table.loc[connected, "uniform |λ₂|"], rate[connected]),
        "causal_min": float(rate[causal].min()), "causal_max": float(rate[causal].max()),
        "causal_radius_min": int(table.loc[causal, "radius"].min()),
        "causal_radius_max": int(table.loc[causal, "radius"].max()),
        "causal_by_radius": causal_by_radius,
        "causal_order": ("none of them collapses" if not collapses[causal].any() else
                         "the radius orders them" if causal_by_radius < -1 + 1e-9 else
                         "the radius orders them only roughly" if causal_by_radius <= -0.5 else
                         "the radius does not order them"),
        "global_rate": float(rate[table["mask"] == "window ±1 + 1 global"].iloc[0]),
        "window1_rate": float(rate[table["mask"] == "window ±1"].iloc[0]),
        "n_pairs": len(pairs),
        "uni_vs_bi": _uni_vs_bi(ratios, len(pairs), pairs[["rate_uni", "rate_bi"]].to_numpy()),
        "unconnected": ", ".join(table.loc[~connected, "mask"]) or "none",
        "unconnected_rate_max": float(rate[~connected].max()) if (~connected).any() else float("nan"),
        "complete_rate": complete_rate,
        "sparse_min": sparse_min, "sparse_max": sparse_max,
        "sparse_spread": ("the slowest of them does not collapse" if not collapses[sparse].all() else
                          "the choice among sparse masks barely changes the rate" if sparse_max < 1.5 * sparse_min
                          else f"a factor {sparse_max / sparse_min:.2g} between the slowest and the fastest"),
        "fastest": str(table.loc[fastest, "mask"]),
        "fastest_share": 100 * float(table.loc[fastest, "edge share"]),
        "fastest_over_complete": float(rate[fastest]) / complete_rate,
    }


def _collapse_words(names: pd.Series, collapses: pd.Series) -> str:
    """Which masks collapse (curve verdict), in words; with the reason Theorem 1 allows the others.

    Shapes: ``names``, ``collapses`` one entry per zoo mask.
    """
    if collapses.all():
        return "every mask collapses"
    return (f"only {int(collapses.sum())} of the {len(names)} masks collapse ({', '.join(names[collapses]) or 'none'}); "
            f"for the other {int((~collapses).sum())} ({', '.join(names[~collapses])}) μ/‖X‖_F neither reaches "
            f"the rounding floor nor decays faster than {COLLAPSE_RATE}/layer in the later layers. Theorem 1 "
            "allows this: its bound contracts more slowly the larger the radius r and the smaller the least "
            "attention weight ε, so over a few layers it promises almost nothing when r is large or trained "
            "attention is sharp")


def _uni_vs_bi(ratios: pd.Series, n_pairs: int, rates) -> str:
    """Words for uni- against bidirectional windows of equal radius, compared only where both collapse.

    Shapes: ``ratios`` one rate ratio (uni over bi) per pair where both collapse; ``rates`` [pair, 2].
    """
    if n_pairs == 0:
        return "has no bidirectional window of the same radius at this sequence length"
    if ratios.empty:
        return (f"does not collapse, and neither does the bidirectional one (rates {rates.min():.2g} to "
                f"{rates.max():.2g} per layer), so there is nothing to compare")
    order = ("more slowly than" if (ratios < 1).all() else "faster than" if (ratios > 1).all()
             else "sometimes faster, sometimes more slowly than")
    where = "" if len(ratios) == n_pairs else f" in the {len(ratios)} pairs where both collapse"
    return f"collapses {order} the bidirectional one (rate ratio {ratios.min():.2f} to {ratios.max():.2f}{where})"


BLOW_UP = 10.0  # a median ||X||_F growing by more than this factor over the layers "blows up"


def rmsnorm_decoders(rates: pd.DataFrame, causal: pd.DataFrame) -> dict[str, float | str]:
    """Mean rates of pure attention per mask (words); under the causal mask, the last-layer ratio of μ/‖X‖_F
    to its first-layer value of the pretrained full model, of the SAN with its own RMSNorm and skip and of
    pure attention, the growth of the median ‖X‖_F of pretrained pure attention from X(0) to the last layer,
    and the heading its verdict and growth choose (collapses / blows up: growth above ``BLOW_UP`` / neither).

    Shapes: ``rates`` one row per configuration (:func:`rankcollapse.book.pages.rmsnorm_decoders.rate_table`); ``causal`` the
    tidy table of the causal sweep.
    """
    pure_causal = dict(weights="pretrained", variant="SAN", mask="causal", norm="none", skip=False, stat="median")
    pure = rates[(rates["variant"] == "SAN") & (rates["norm"] == "none") & ~rates["skip"].astype(bool)]
    columns = ["mask", "radius", "mean rate"]
    words = {w: "; ".join(f"{m} (radius {r}): {v:.3g}" for m, r, v in group[columns].itertuples(index=False))
             for w, group in pure.groupby("weights", sort=False)}
    pre = rates[rates["weights"] == "pretrained"]
    full = pre[pre["variant"] == "full transformer"]["ratio"]
    own = pre[(pre["variant"] == "SAN") & (pre["mask"] == "causal") & (pre["norm"] == "model") & pre["skip"].astype(bool)]
    growth = value(causal, "norm", **pure_causal) / value(causal, "norm", layer=0, **pure_causal)
    curve = pre[(pre["variant"] == "SAN") & (pre["mask"] == "causal") & (pre["norm"] == "none") & ~pre["skip"].astype(bool)]
    collapses = len(curve) > 0 and curve["verdict"].iloc[0] == "collapses"
    return {"pure_rates_initialized": words.get("initialized", "not run"),
            "pure_rates_pretrained": words.get("pretrained", "not run"),
            "full_ratio": float(full.iloc[0]) if len(full) else float("nan"),
            "own_ratio": float(own["ratio"].iloc[0]) if len(own) else float("nan"),
            "pure_norm_growth": growth,
            "pure_ratio": float(curve["ratio"].iloc[0]) if len(curve) else float("nan"),
            "pure_heading": ("Pretrained pure attention collapses here." if collapses else
                             "Pretrained pure attention does not collapse here, it blows up." if growth > BLOW_UP
                             else "Pretrained pure attention neither collapses nor blows up here.")}
