"""The RMSNorm-decoder page (book/beyond/rmsnorm_decoders.md): an RMSNorm decoder (SmolLM2) under its own
causal mask and under uni-directional windows.

One sweep per mask (its window is one value of :class:`rankcollapse.experiments.config.ExperimentConfig`), all
on the same X(0) and the same weights. The causal sweep adds the Hugging Face forward of the whole model
(hooks), the reference the SAN variants are read against. Norms: none (pure attention), ``rms`` (RMSNorm
without gain: the paper's LayerNorm without centring) and ``model`` (each layer's own trained
``input_layernorm``, in pre position, for the pretrained weights; a fresh LayerNorm for initialized ones).

:func:`configure` turns the page's parameters into those sweeps; :func:`rate_table` (shared with the
sliding-window page) gives each configuration's curve verdict, mean rate and radius; :func:`numbers` are
the values the page's prose states, :func:`claims` its claims table; :func:`show` is what the page shows:
those, the rate table, the causal sweep's two layer figures and its scale.

Used by: book/beyond/rmsnorm_decoders.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_decoders.py.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from rankcollapse.book.pages._common import (BIASES_SETTING, CAUSAL, RATE_COLUMNS, THEORY_SETTING, against,
                                             computing, curves_claim, part_sides, rate_table, stops_claim,
                                             verdict_words, with_setting)
from rankcollapse.book.plotting.beyond import SortableTable
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core.checks import check_ints
from rankcollapse.core.stats import rank_correlation
from rankcollapse.experiments.config import MAX_SAMPLES, experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult
from rankcollapse.experiments.table import value
from rankcollapse.verdicts.claims import FAILS, HOLDS, PARTLY, Cell, Claim, mean_rate
from rankcollapse.verdicts.rules import curve_verdict
from rankcollapse.verdicts.robustness import robust

_SWEEP = dict(norms=("none", "rms", "model"), skips=(False, True))  # the comparisons the page is about
FIXED = {"masks": (CAUSAL, "causal_sliding_window"), **_SWEEP}


def window_part(window: int) -> str:
    """The result part of the uni-directional window of size ``window``, e.g. ``causal_sliding_window-w4``."""
    return f"causal_sliding_window-w{window}"


SEED_PARAMETERS = ("n_weight_seeds", "n_samples_seeds")  # the bias-free seeds' own parameters


def seed_part(part: str, k: int) -> str:
    """The part of a mask's bias-free stack drawn with weight seed ``seed + k``, e.g. ``causal-seed2``."""
    return f"{part}-seed{k}"


def configure(parameters: dict) -> dict[str, Run]:
    """``configure`` of the page: the causal sweep (with the full transformer) and one sweep per window of
    ``windows`` (sizes of the uni-directional window, each below ``n_tokens``), the reader's other parameters
    for all; and per mask the theory's bias-free stacks over ``n_weight_seeds`` weight seeds on the first
    ``n_samples_seeds`` samples (:func:`seed_part`). A window the sequence cannot hold is rejected here,
    before anything runs."""
    own = computing(parameters, "windows", *SEED_PARAMETERS)
    windows = parameters.get("windows")
    windows = tuple(windows) if isinstance(windows, list) else windows
    check_ints("windows", windows, 1, int(own.get("n_tokens", 2)) - 1)
    runs = {CAUSAL: Run(experiment_config(own, masks=(CAUSAL,), full_transformer=True, **_SWEEP))}
    for w in windows:
        runs[window_part(w)] = Run(experiment_config(own, masks=("causal_sliding_window",), window=w,
                                                                 **_SWEEP))
    if not all(name in parameters for name in SEED_PARAMETERS):
        return runs
    for name in SEED_PARAMETERS:
        check_ints(name, (parameters[name],), 1, MAX_SAMPLES)
    for part, run in list(runs.items()):
        for k in range(parameters["n_weight_seeds"]):
            runs[seed_part(part, k)] = Run(replace(run.config, weights=("initialized_nobias",),
                                                   weight_seed=own.get("seed", 0) + k, full_transformer=False,
                                                   n_samples=parameters["n_samples_seeds"]))
    return runs


def page_claims(results: dict[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``rmsnorm_decoders``), as :func:`show` shows it (no figures drawn)."""
    return {"rmsnorm_decoders": claims(results, rate_table(results))}


def show(results: dict[str, StoredResult], parameters: dict) -> Shown:
    """The causal sweep's scale and :func:`numbers` (``rmsnorm_decoders_*``), the claims table, its scale
    note, the sortable rate table (``rmsnorm_decoders_table``: one row per configuration, RATE_COLUMNS) and
    its layer figures of μ/‖X‖_F and μ."""
    result = results[CAUSAL]
    rates = rate_table(results)
    rows = page_claims(results, parameters)["rmsnorm_decoders"]
    found = {"scale": scale_words(result), **numbers(rates, result.table), "finding": verdict_words(rows)}
    return Shown(values=prefixed("rmsnorm_decoders", found),
                 markdown={"rmsnorm_decoders_scale_note": scale_note(result)},
                 claims={"rmsnorm_decoders": rows},
                 tables={"rmsnorm_decoders_table": SortableTable(rates[list(RATE_COLUMNS)])},
                 figures=[layer_figure(result, "relative_mu", "fig-rmsnorm-decoders-relative"),
                          layer_figure(result, "mu", "fig-rmsnorm-decoders-mu")])


_BLOW_UP = 10.0  # a median ||X||_F growing by more than this factor over the layers "blows up"


def numbers(rates: pd.DataFrame, causal: pd.DataFrame) -> dict[str, float | str]:
    """Mean rates of pure attention per mask (words); under the causal mask, the last-layer ratio of
    μ/‖X‖_F to its first-layer value of the pretrained full model, of the SAN with its own RMSNorm and
    skip and of pure attention, the growth of the median ‖X‖_F of pretrained pure attention from X(0) to
    the last layer, and the heading its verdict and growth choose (collapses / blows up: growth above
    ``_BLOW_UP`` / neither).

    Shapes: ``rates`` one row per configuration (:func:`rate_table`); ``causal`` the
    tidy table of the causal sweep.
    """
    pure_causal = dict(weights="pretrained", variant="SAN", mask="causal", norm="none", skip=False,
                       stat="median")
    pure = rates[(rates["variant"] == "SAN") & (rates["norm"] == "none") & ~rates["skip"].astype(bool)]
    columns = ["mask", "radius", "mean rate"]
    words = {w: "; ".join(f"{m} (radius {r}): {v:.3g}" for m, r, v in group[columns].itertuples(index=False))
             for w, group in pure.groupby("weights", sort=False)}
    pre = rates[rates["weights"] == "pretrained"]
    full = pre[pre["variant"] == "full transformer"]["ratio"]
    own = pre[(pre["variant"] == "SAN") & (pre["mask"] == "causal") & (pre["norm"] == "model")
              & pre["skip"].astype(bool)]
    growth = value(causal, "norm", **pure_causal) / value(causal, "norm", layer=0, **pure_causal)
    curve = pre[(pre["variant"] == "SAN") & (pre["mask"] == "causal") & (pre["norm"] == "none")
                & ~pre["skip"].astype(bool)]
    collapses = len(curve) > 0 and curve["verdict"].iloc[0] in ("collapses", "reaches the floor")
    return {"pure_rates_initialized": words.get("initialized", "not run"),
            "pure_rates_pretrained": words.get("pretrained", "not run"),
            "full_ratio": float(full.iloc[0]) if len(full) else float("nan"),
            "own_ratio": float(own["ratio"].iloc[0]) if len(own) else float("nan"),
            "pure_norm_growth": growth,
            "pure_ratio": float(curve["ratio"].iloc[0]) if len(curve) else float("nan"),
            "pure_heading": ("Pretrained pure attention collapses here." if collapses else
                             "Pretrained pure attention does not collapse here, it blows up."
                             if growth > _BLOW_UP else
                             "Pretrained pure attention neither collapses nor blows up here.")}


def claims(results: dict[str, StoredResult], rates: pd.DataFrame) -> list[Claim]:
    """The paper's claims read on an RMSNorm decoder (SmolLM2) under its causal mask and uni-directional
    windows, one cell per part (mask): curve verdicts with their intervals, the radius order, RMSNorm against
    pure attention (stops the collapse; slows it), the trained norms (with and without skip) against their
    baselines; robust or not over the grid. The initialized stacks carry PyTorch's default biases (one weight
    seed): the setting says so.

    Shapes: ``rates`` one row per configuration (:func:`rate_table`).
    """
    san = rates[rates["variant"] == "SAN"]
    words = "SAN + RMSNorm without gain"
    seeds = {part: [r for name, r in results.items() if name.startswith(f"{part}-seed")]
             for part in results if "-seed" not in part}
    pooled = {part: parts for part, parts in seeds.items() if parts}
    rows = []
    sources = [("initialized_nobias",
                f"{THEORY_SETTING}; {len(next(iter(pooled.values()), []))} weight seeds", pooled)] \
        if pooled else []
    sources += [("initialized", INITIALIZED_SETTING, None), ("pretrained", "pretrained SmolLM2", None)]
    for weights, setting, grouped in sources:
        base = dict(weights=weights, variant="SAN", skip=False)
        own_results = grouped or {p: r for p, r in results.items() if "-seed" not in p}
        pure = part_sides(own_results, "pure attention", norm="none", **base)
        rms = part_sides(own_results, words, norm="rms", **base)
        rows.append(curves_claim("Pure masked attention collapses exponentially",
                                 "the paper: Fig. 2, Theorem 1",
                                 "pure attention: per-layer factor of μ/‖X‖_F, per mask", pure,
                                 setting=setting))
        own = san[san["weights"] == weights]
        rows.append(with_setting(robust(lambda t, p=own[(own["norm"] == "none") & ~own["skip"]]:
                                        _radius_order(rethreshold(p, t), weights)), setting))
        pairs = {m: (rms[m], pure[m]) for m in rms}
        rows.append(stops_claim("LayerNorm can prevent collapse (its LayerNorm without centring is RMSNorm "
                                "without gain)", "the paper: Sec. 4; the response",
                                f"{words} against pure attention on the same weights", pairs,
                                setting=setting))
        rows.append(against(f"... {words} slows collapse against pure attention", "the paper: Sec. 4",
                            f"{words}: late per-layer factor of μ/‖X‖_F over pure attention's", pairs,
                            setting=setting))
    for skip, words in ((False, "SAN + its own trained RMSNorm"),
                        (True, "SAN + skip + its own trained RMSNorm")):
        base = dict(weights="pretrained", variant="SAN", skip=skip)
        trained = part_sides(results, words, norm="model", **base)
        base_words = "SAN + skip" if skip else "pure attention"
        baseline = part_sides(results, base_words, norm="none", **base)
        pairs = {m: (trained[m], baseline[m]) for m in trained}
        rows.append(stops_claim("In pretrained models LayerNorm helps, together with the other components",
                                "the paper: Fig. 2", f"{words} against {base_words} on the same weights",
                                pairs, setting="pretrained SmolLM2"))
        rows.append(against(f"... {words} slows collapse against {base_words}", "the paper: Fig. 2",
                            f"{words}: late per-layer factor of μ/‖X‖_F over {base_words}'s", pairs,
                            setting="pretrained SmolLM2"))
    return rows


INITIALIZED_SETTING = f"{BIASES_SETTING}; 1 weight seed"


def rethreshold(rows: pd.DataFrame, thresholds) -> pd.DataFrame:
    """Rate-table rows with their verdicts and mean rates decided again under ``thresholds`` (the radius
    order is an ordering of mean rates, recomputed at each point of the grid)."""
    out = rows.copy()
    out["curve"] = [curve_verdict(v, f, thresholds) for v, f in zip(rows["values"], rows["floor"])]
    out["mean rate"] = out["curve"].map(mean_rate)
    return out


def _radius_order(pure: pd.DataFrame, weights: str) -> Claim:
    """Theorem 1's reading: sparser local masks collapse more slowly, at a rate set by the radius — the rank
    correlation of radius and mean rate (-1: every larger radius is slower); a mask's weight seeds (one row
    each) pooled as their mean rate."""
    pure = pure.groupby(["mask", "radius"], as_index=False, sort=False, dropna=False)["mean rate"].mean()
    correlation = rank_correlation(pure["radius"].astype(float), pure["mean rate"])
    slowest = pure.loc[pure["mean rate"].idxmin(), "mask"]
    widest = pure.loc[pure["radius"].astype(float).idxmax(), "mask"]
    verdict = HOLDS if correlation < -1 + 1e-9 else PARTLY if correlation < 0 or slowest == widest else FAILS
    words = ", ".join(f"{m}: r = {r}, {v:.3g}"
                      for m, r, v in zip(pure["mask"], pure["radius"], pure["mean rate"]))
    cells = tuple(Cell(m, "read", f"r = {r}, rate {v:.3g}",
                       f"radius {r}, mean rate {v:.3g} per layer") for m, r, v in
                  zip(pure["mask"], pure["radius"], pure["mean rate"]))
    return Claim("Local masks slow collapse, at a rate set by the radius", "the paper: Theorem 1",
                 f"{weights} weights, pure attention: rank correlation of radius and mean rate per layer",
                 verdict, f"{correlation:.2f} ({words})", cells)
