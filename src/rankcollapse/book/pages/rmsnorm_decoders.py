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

import pandas as pd

from rankcollapse.book.pages._common import (CAUSAL, RATE_COLUMNS, against, computing, rate_sides, rate_table,
                                             rates_claim)
from rankcollapse.book.plotting.beyond import SortableTable
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core.checks import check_ints
from rankcollapse.core.stats import rank_correlation
from rankcollapse.experiments.config import experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult
from rankcollapse.experiments.table import value
from rankcollapse.verdicts.claims import COLLAPSES, FAILS, HOLDS, PARTLY, STABLE, Cell, Claim, rethreshold
from rankcollapse.verdicts.robustness import robust

__all__ = ["CAUSAL", "FIXED", "RATE_COLUMNS", "claims", "configure", "numbers", "page_claims", "rate_table",
           "show", "window_part"]

_SWEEP = dict(norms=("none", "rms", "model"), skips=(False, True))  # the comparisons the page is about
FIXED = {"masks": (CAUSAL, "causal_sliding_window"), **_SWEEP}


def window_part(window: int) -> str:
    """The result part of the uni-directional window of size ``window``, e.g. ``causal_sliding_window-w4``."""
    return f"causal_sliding_window-w{window}"


def configure(parameters: dict) -> dict[str, Run]:
    """``configure`` of the page: the causal sweep (with the full transformer) and one sweep per window of
    ``windows`` (sizes of the uni-directional window, each below ``n_tokens``), the reader's other parameters
    for all. A window the sequence cannot hold is rejected here, before anything runs."""
    own = computing(parameters, "windows")
    windows = parameters.get("windows")
    windows = tuple(windows) if isinstance(windows, list) else windows
    check_ints("windows", windows, 1, int(own.get("n_tokens", 2)) - 1)
    runs = {CAUSAL: Run(experiment_config(own, masks=(CAUSAL,), full_transformer=True, **_SWEEP))}
    for w in windows:
        runs[window_part(w)] = Run(experiment_config(own, masks=("causal_sliding_window",), window=w,
                                                                 **_SWEEP))
    return runs


def page_claims(results: dict[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``rmsnorm_decoders``), as :func:`show` shows it (no figures drawn)."""
    return {"rmsnorm_decoders": claims(rate_table(results))}


def show(results: dict[str, StoredResult], parameters: dict) -> Shown:
    """The causal sweep's scale and :func:`numbers` (``rmsnorm_decoders_*``), the claims table, its scale
    note, the sortable rate table (``rmsnorm_decoders_table``: one row per configuration, RATE_COLUMNS) and
    its layer figures of μ/‖X‖_F and μ."""
    result = results[CAUSAL]
    rates = rate_table(results)
    found = {"scale": scale_words(result), **numbers(rates, result.table)}
    return Shown(values=prefixed("rmsnorm_decoders", found),
                 markdown={"rmsnorm_decoders_scale_note": scale_note(result)},
                 claims=page_claims(results, parameters),
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
    collapses = len(curve) > 0 and curve["verdict"].iloc[0] == "collapses"
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


def claims(rates: pd.DataFrame) -> list[Claim]:
    """The paper's claims read on an RMSNorm decoder (SmolLM2) under its causal mask and uni-directional
    windows: curve verdicts, each norm against pure attention (its baseline) per mask, robust or not over the
    grid.

    Shapes: ``rates`` one row per configuration (:func:`rate_table`).
    """
    san = rates[rates["variant"] == "SAN"]
    rows = []
    for weights in dict.fromkeys(san["weights"]):
        own = san[san["weights"] == weights]
        pure = own[(own["norm"] == "none") & ~own["skip"]]
        rows.append(rates_claim("Pure masked attention collapses exponentially", "Fig. 2 caption, Theorem 1",
                                f"{weights} weights, pure attention: μ/‖X‖_F per mask", pure, COLLAPSES,
                                "masks collapse"))
        rows.append(robust(lambda t, pure=pure, weights=weights: _radius_order(rethreshold(pure, t),
                                                                               weights)))
        rms = own[(own["norm"] == "rms") & ~own["skip"]]
        words = "SAN + RMSNorm without gain"
        claim = "LayerNorm can prevent collapse (its LayerNorm without centring is RMSNorm without gain)"
        rows.append(rates_claim(claim, "Sec. 4, response", f"{weights} weights, {words}", rms, STABLE,
                                "masks keep μ/‖X‖_F"))
        rows.append(against(f"... {words} slows collapse against pure attention", "Sec. 4, response",
                            f"{weights} weights, {words}: late per-layer factor of μ/‖X‖_F over pure "
                            "attention's (the baseline)", rate_sides(rms, pure, (words, "pure attention"))))
    pre = san[san["weights"] == "pretrained"]
    for skip, words in ((False, "SAN + its own trained RMSNorm"),
                        (True, "SAN + skip + its own trained RMSNorm")):
        trained = pre[(pre["norm"] == "model") & (pre["skip"] == skip)]
        baseline = pre[(pre["norm"] == "none") & (pre["skip"] == skip)]
        rows.append(rates_claim("In pretrained models LayerNorm helps (together with the other components)",
                                "Fig. 2 caption", f"pretrained weights, {words}", trained, STABLE,
                                "masks keep μ/‖X‖_F"))
        base_words = "SAN + skip" if skip else "pure attention"
        rows.append(against(f"... {words} slows collapse against {base_words}", "Fig. 2 caption",
                            f"pretrained weights, {words}: late per-layer factor of μ/‖X‖_F over "
                            f"{base_words}'s (the baseline)",
                            rate_sides(trained, baseline, (words, base_words))))
    return rows


def _radius_order(pure: pd.DataFrame, weights: str) -> Claim:
    """Theorem 1's reading: sparser local masks collapse more slowly, at a rate set by the radius — the rank
    correlation of radius and mean rate (-1: every larger radius is slower)."""
    correlation = rank_correlation(pure["radius"].astype(float), pure["mean rate"])
    slowest = pure.loc[pure["mean rate"].idxmin(), "mask"]
    widest = pure.loc[pure["radius"].astype(float).idxmax(), "mask"]
    verdict = HOLDS if correlation < -1 + 1e-9 else PARTLY if correlation < 0 or slowest == widest else FAILS
    words = ", ".join(f"{m}: r = {r}, {v:.3g}"
                      for m, r, v in zip(pure["mask"], pure["radius"], pure["mean rate"]))
    cells = tuple(Cell(m, "read", f"r = {r}, rate {v:.3g}",
                       f"radius {r}, mean rate {v:.3g} per layer") for m, r, v in
                  zip(pure["mask"], pure["radius"], pure["mean rate"]))
    return Claim("Local masks slow collapse, at a rate set by the radius", "Theorem 1",
                 f"{weights} weights, pure attention: rank correlation of radius and mean rate per layer",
                 verdict, f"{correlation:.2f} ({words})", cells)
