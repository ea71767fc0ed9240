"""Each layer's change of μ split into the value maps' gain and attention's contraction, read from sweeps
that recorded it (``ExperimentConfig.attention_stats``; :func:`rankcollapse.engine.run_san`): per mask and
weight source, the factors per layer (:func:`decomposition_frame`), their share of μ's decay over the layers
above the floor (:func:`decay_shares`), the claim "attention drives the decay" (:func:`decomposition_claims`)
and the attention statistics (:func:`attention_table`).

Used by: the Fig. 2 and mask-design pages (:mod:`rankcollapse.book.pages.fig2`,
:mod:`rankcollapse.book.pages.mask_design`); tests/unit/test_mask_design.py, tests/unit/test_controls.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rankcollapse.core.metrics import ATTENTION_METRIC_NAMES, FLOOR_BAND
from rankcollapse.verdicts.claims import FAILS, HOLDS, PARTLY, Claim
from rankcollapse.verdicts.robustness import robust
from rankcollapse.verdicts.rules import Thresholds

FACTORS = ("value_gain", "attention_contraction")  # the two factors of a pure-attention layer's mu'/mu
# each weight source's panel title in a decomposition figure
WEIGHTS_TITLES = {"initialized": "initialized with biases",
                  "initialized_nobias": "initialized without biases", "pretrained": "pretrained"}
COLUMNS = ["mask", "weights", "metric", "layer", "median", "q10", "q90", "above_floor", "read"]


def decomposition_frame(table: pd.DataFrame, label: str | None = None) -> pd.DataFrame:
    """One row per mask x weight source x metric x layer >= 1 of one sweep with ``attention_stats``: the
    median and the 10-90 % band over samples, ``above_floor``, the layer's input mu over its rounding floor
    (medians; infinite where mu is tracked exactly), and whether the layer is *read*: ``above_floor`` beyond
    FLOOR_BAND, so the factors are not rounding noise (:func:`decay_shares` reads it again at other bands).
    ``label`` names the mask (one-mask sweeps; default: the table's mask names).

    Shapes: ``table`` the sweep's tidy table -> columns ``mask, weights, metric, layer, median, q10, q90,
    above_floor, read``.
    """
    frames = []
    table = table[table["variant"] == "SAN"]
    for (mask, weights), rows in table.groupby(["mask", "weights"], sort=False):
        at = {m: rows[rows["metric"] == m].set_index("layer")["median"] for m in ("mu", "floor", "exact")}
        above = (at["mu"] / at["floor"]).where(at["exact"] != 1, math.inf)  # [layer + 1]
        picked = rows[rows["metric"].isin(ATTENTION_METRIC_NAMES) & (rows["layer"] >= 1)]
        input_above = picked["layer"].map(lambda t: float(above[t - 1]))
        frames.append(picked[["metric", "layer", "median", "q10", "q90"]].assign(
            mask=label or mask, weights=weights, above_floor=input_above, read=input_above > FLOOR_BAND))
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def decay_shares(frame: pd.DataFrame, thresholds: Thresholds | None = None) -> pd.DataFrame:
    """Per mask and weight source, the log change of mu over the read layers (``read``, or with
    ``thresholds`` those whose input lies beyond its ``floor_band``) split between the two factors
    (the sum over layers of the log median value gain and of the log median attention contraction), each
    given as its per-layer geometric mean (``gain``, ``contraction``: exp of the log sum over ``layers``),
    and ``attention_drives``: whether mu decays over them and attention's contraction is the larger part of
    the decay (its log the more negative; a value gain above 1 counts against the decay).

    Shapes: ``frame`` as from :func:`decomposition_frame` -> one row per mask x weights.
    """
    rows = []
    read = frame["read"] if thresholds is None else frame["above_floor"] > thresholds.floor_band
    for (mask, weights), part in frame[read].groupby(["mask", "weights"], sort=False):
        logs = {m: float(np.log(part.loc[part["metric"] == m, "median"]).sum()) for m in FACTORS}
        layers = int((part["metric"] == FACTORS[0]).sum())
        decays = logs["value_gain"] + logs["attention_contraction"] < 0
        rows.append({"mask": mask, "weights": weights, "layers": layers,
                     "gain": math.exp(logs["value_gain"] / layers),
                     "contraction": math.exp(logs["attention_contraction"] / layers),
                     "attention_drives": bool(decays and logs["attention_contraction"] < logs["value_gain"]),
                     "decays": bool(decays)})
    return pd.DataFrame(rows)


def decay_driver(shares: pd.DataFrame, weights: str, local: bool = True) -> dict[str, float | str]:
    """The words and numbers of the page's sentence on what drives the decay for one weight source, over
    the local masks (every decomposed mask but the complete and the causal one) or over those two: which
    factor is the larger part of the decay (or that mu does not decay) for how many of them, and the range
    of the per-layer factors.

    Shapes: ``shares`` as from :func:`decay_shares`.
    """
    picked = shares[(shares["weights"] == weights) & (~shares["mask"].isin(("complete", "causal")) == local)]
    n = len(picked)
    counts = {"attention's contraction": int(picked["attention_drives"].sum()),
              "the value maps' gain": int((picked["decays"] & ~picked["attention_drives"]).sum()),
              "neither (μ does not decay)": int((~picked["decays"]).sum())}
    present = {words: count for words, count in counts.items() if count}
    driver = (next(iter(present)) if len(present) == 1 else
              ", ".join(f"{words} for {count} of the {n}" for words, count in present.items()))
    return {"driver": driver, "n": n, "gain_min": float(picked["gain"].min()),
            "gain_max": float(picked["gain"].max()), "contraction_min": float(picked["contraction"].min()),
            "contraction_max": float(picked["contraction"].max())}


SOURCE = "this book's control"  # where the claim "attention drives the decay" comes from (not the paper)


def decomposition_claims(frame: pd.DataFrame, words: dict[str, str] | None = None) -> list[Claim]:
    """The claims row "attention drives the decay", per weight source: it holds for a mask only where
    attention's contraction is the larger part of the log decay of mu (:func:`decay_shares`), robust or not
    over the grid's floor bands (which layers are read). ``words``: each weight source's name in the claim
    (default ``"<source> weights"``).

    Shapes: ``frame`` as from :func:`decomposition_frame`.
    """
    def claim(weights: str, thresholds: Thresholds) -> Claim:
        part = decay_shares(frame[frame["weights"] == weights], thresholds)
        n, n_holds = len(part), int(part["attention_drives"].sum())
        verdict = HOLDS if n_holds == n else FAILS if n_holds == 0 else PARTLY
        number = f"{n_holds} of {n} masks (per layer, contraction c_A against value gain g_V: " + "; ".join(
            f"{r.mask}: {r.contraction:.3g} against {r.gain:.3g}" for r in part.itertuples()) + ")"
        return Claim("Attention, not the value maps' gain, drives the decay of μ", SOURCE,
                     "attention's contraction ‖PAY‖/‖PY‖ against the value maps' gain ‖PY‖/‖PX‖ (medians, "
                     "geometric mean over the layers above the floor): the larger part of μ's decay — about "
                     "μ, not rank: a gain below 1 shrinks ‖X‖_F alike", verdict, number,
                     setting=(words or {}).get(weights, f"{weights} weights"))

    return [robust(lambda t, w=w: claim(w, t)) for w in dict.fromkeys(frame["weights"])]


ATTENTION_COLUMNS = {"attention_epsilon": "smallest weight ε", "attention_max_weight": "largest row weight",
                     "attention_diagonal": "diagonal weight", "attention_lambda2": "|λ₂| of mean A"}


def attention_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per decomposed mask x weight source: each attention statistic's median over samples,
    averaged over the read layers (ε: its smallest over them), and the per-layer factors of
    :func:`decay_shares`.

    Shapes: ``frame`` as from :func:`decomposition_frame` -> columns mask, weights, ATTENTION_COLUMNS' words,
    value gain, attention contraction.
    """
    read = frame[frame["read"]]
    stats = read[read["metric"].isin(ATTENTION_COLUMNS)].pivot_table(
        index=["mask", "weights"], columns="metric", values="median", sort=False,
        aggfunc=lambda v: v.min() if v.name == "attention_epsilon" else v.mean())
    shares = decay_shares(frame).set_index(["mask", "weights"])[["gain", "contraction"]]
    table = stats.join(shares).reset_index().rename(columns={**ATTENTION_COLUMNS,
                                                             "gain": "value gain / layer",
                                                             "contraction": "attention contraction / layer"})
    return table[["mask", "weights", *ATTENTION_COLUMNS.values(), "value gain / layer",
                  "attention contraction / layer"]]
