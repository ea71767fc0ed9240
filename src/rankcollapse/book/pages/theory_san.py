"""The theory's SAN at depth (book/experiments/theory_san.md): the bias-free self-attention network of the
theorems, X(t+1) = D A X W_V with freshly initialized weights, over many layers and several weight seeds, set
beside what the theory predicts for each mask.

:func:`configure` turns the page's parameters into its sweeps: ``seed_<k>`` for k = 0 .. n_weight_seeds - 1,
the theory's SAN (initialized without biases, PyTorch's default init) under the paper's four masks with the
windowed ones at every window of ``windows`` (a window family), pure attention, the paper's D and the model's
LayerNorm, weights drawn with seed ``seed + k`` on the same samples; ``biases_<k>`` and ``hf_<k>`` for the
first :data:`N_SETTING_SEEDS` seeds, the same stacks with PyTorch's default biases and with Hugging Face's
BERT init (N(0, 0.02) weights, zero biases), the paper's four masks at the paper's window only: the labelled
settings shown beside the theory's. :func:`show` is what the page shows of them: :func:`claims` (each mask's
measured factor beside the linear case's prediction over the same layers and Theorem 1's bound, the radius
within a window family, LayerNorm's claims at depth, the beside settings) and the two figures.

Used by: book/experiments/theory_san.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pandas as pd

from rankcollapse.book.labels import mask_title
from rankcollapse.book.pages._common import (FIG2, THEORY_SETTING, computing, curves_claim, linear_prediction,
                                             mask_radius, seed_parts, stops_claim)
from rankcollapse.book.plotting.depth import depth_figure, factor_figure
from rankcollapse.book.shown import (Shown, ShownFigure, combined_parameters, figure_data, prefixed,
                                    scale_note, scale_words)
from rankcollapse.core import masks
from rankcollapse.core.checks import check_int
from rankcollapse.core.stats import rank_correlation
from rankcollapse.experiments.config import Run, experiment_config
from rankcollapse.experiments.store import StoredResult
from rankcollapse.theory.dynamics import bound_factor, linear_rate
from rankcollapse.verdicts.claims import (FAILS, HOLDS, OPEN, PARTLY, Cell, Claim, combine, effect_cell,
                                          effect_claim, predicted_factor, side_verdict)
from rankcollapse.verdicts.effects import Side, late_factor, side
from rankcollapse.verdicts.robustness import robust
from rankcollapse.verdicts.rules import PREDICTION_TOLERANCE, factor_text

FIXED = dict(FIG2, masks=masks.PAPER_MASKS)  # the paper's masks and norms (none, the paper's D, LayerNorm)
PAPER_WINDOW = 4  # the window of the paper's two windowed masks in the beside settings (Fig. 2's)
N_SETTING_SEEDS = 2  # weight seeds of each beside setting (with biases, Hugging Face's init)
SETTINGS = {"biases": (dict(weights=("initialized",), init="torch"), "initialized",
                       "initialized with PyTorch's default biases"),
            "hf": (dict(weights=("initialized",), init="hf"), "initialized",
                   "initialized as Hugging Face initializes BERT (N(0, 0.02), zero biases)")}
PAGE_PARAMETERS = ("n_weight_seeds", "windows")  # the page's own parameters (not an experiment's)
NORM_WORDS = {"unit": "the paper's D (unit norm)", "model": "LayerNorm as a fresh model has it (no affine)"}


def configure(parameters: dict) -> dict[str, Run]:
    """The theory's SAN per weight seed (``seed_<k>``) and the beside settings (``biases_<k>``,
    ``hf_<k>``)."""
    own = computing(parameters, *PAGE_PARAMETERS)
    n_seeds, windows = parameters.get("n_weight_seeds"), parameters.get("windows")
    check_int("n_weight_seeds", n_seeds, 1, 100)
    if not isinstance(windows, (list, tuple)) or not windows:
        raise ValueError(f"windows must be a non-empty list of window sizes, got {windows!r}")
    seed = own.get("seed", 0)
    runs = {f"seed_{k}": Run(experiment_config({**own, "weight_seed": seed + k}, **FIXED,
                                               weights=("initialized_nobias",), windows=tuple(windows)))
            for k in range(n_seeds)}
    for prefix, (setting, _, _) in SETTINGS.items():
        for k in range(min(n_seeds, N_SETTING_SEEDS)):
            runs[f"{prefix}_{k}"] = Run(experiment_config({**own, "weight_seed": seed + k}, **FIXED,
                                                          **setting, window=PAPER_WINDOW))
    return runs


def configurations(result: StoredResult) -> list[tuple[str, int | None]]:
    """The (mask, window) pairs of a result, in the table's order."""
    rows = result.table[["mask", "window"]].drop_duplicates()
    return [(m, None if w != w else int(w)) for m, w in rows.itertuples(index=False)]


def _sides(parts: list[StoredResult], weights: str, norm: str, words: str,
           metric: str = "relative_mu") -> dict[str, Side]:
    """Per (mask, window) of the parts, keyed by its title (``"sliding window, w = 4"``): the curve of
    ``norm`` pooled over the parts' weight seeds."""
    return {mask_title(m, w): side(parts, None, f"{mask_title(m, w)}, {words}", metric, weights=weights,
                                   variant="SAN", mask=m, window=w, norm=norm)
            for m, w in configurations(parts[0])}


def predictions(result: StoredResult) -> dict[str, np.ndarray]:
    """The linear case's μ/‖X‖_F per (mask, window) of a result, at its tokens and depth. Shapes: per key
    [layer + 1]."""
    p = result.provenance["parameters"]
    return {mask_title(m, w): linear_prediction(m, p["n_tokens"], w, p["n_layers"])
            for m, w in configurations(result)}


def page_claims(results: Mapping[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims tables (``theory_san``: the theory's SAN; ``theory_san_settings``: the beside
    settings), as :func:`show` shows them (no figures drawn)."""
    seeds = seed_parts(results, "seed")
    pure = _sides(seeds, "initialized_nobias", "none", "pure attention")
    return _tables(results, seeds, pure, predictions(seeds[0]))


def _tables(results: Mapping[str, StoredResult], seeds: list[StoredResult], pure: dict[str, Side],
            predicted: dict[str, np.ndarray]) -> dict[str, list[Claim]]:
    """:func:`page_claims` from the seeds' pure-attention sides and the predictions (computed once in
    :func:`show`)."""
    return {"theory_san": claims(seeds, pure, predicted), "theory_san_settings": setting_claims(results)}


def show(results: Mapping[str, StoredResult], parameters: dict) -> Shown:
    """The page's numbers and scale (``theory_san_*``), its claims tables (``theory_san``: the theory's SAN;
    ``theory_san_settings``: the beside settings), the figures of μ/‖X‖_F per mask against the prediction and
    of the window family's factors, and the scale note."""
    seeds = seed_parts(results, "seed")
    first = seeds[0]
    pure = _sides(seeds, "initialized_nobias", "none", "pure attention")
    predicted = predictions(first)
    tables = _tables(results, seeds, pure, predicted)
    rows = tables["theory_san"]
    table = factor_table(first, pure, predicted)
    values = {"scale": scale_words(first), "n_seeds": len(seeds), "n_layers": int(first.table["layer"].max()),
              **finding_clauses(rows, table)}
    figures = [ShownFigure("fig-theory-san-relative",
                           depth_figure(seeds, predicted),
                           combined_parameters(seeds), figure_data(seeds)),
               ShownFigure("fig-theory-san-factors", factor_figure(table), combined_parameters(seeds),
                           figure_data(seeds))]
    return Shown(values=prefixed("theory_san", values), markdown={"theory_san_scale_note": scale_note(first)},
                 claims=tables, figures=figures)


def claims(seeds: list[StoredResult], pure: dict[str, Side], predicted: dict[str, np.ndarray]) -> list[Claim]:
    """The theory's claims on the theory's SAN at depth, pooled over the weight seeds: collapse under every
    mask beside the linear case's prediction; the measurement against the prediction and against Theorem 1's
    bound; the radius within each window family; what orders the rates across families; LayerNorm's claims."""
    setting = f"{THEORY_SETTING}; {len(seeds)} weight seeds"
    rows = [curves_claim("Pure masked attention collapses under every mask", "the paper: Theorem 1",
                         "pure attention: per-layer factor of μ/‖X‖_F over the late layers, per mask", pure,
                         predicted, setting=setting),
            robust(lambda t: prediction_claim(pure, predicted, t, setting)),
            _bound_claim(seeds[0], pure, setting)]
    for family in ("sliding_window", "causal_sliding_window"):
        rows.append(_radius_claim(seeds[0], pure, predicted, family, setting))
    rows.append(_order_claim(seeds[0], pure, predicted, setting))
    for norm, words in NORM_WORDS.items():
        normed = _sides(seeds, "initialized_nobias", norm, words)
        rows.append(stops_claim("Adding LayerNorm alone stops μ → 0 at random initialization",
                                "the paper: Fig. 2",
                                f"{words} against pure attention on the same weights, at depth",
                                {m: (normed[m], pure[m]) for m in normed}, setting=setting))
    return rows


def agrees(verdict, factor: float) -> bool:
    """A measured per-layer factor (a curve verdict with its interval) agrees with ``factor`` (predicted, or
    another curve's): ``factor`` lies in the measured interval, or the two rates agree within
    PREDICTION_TOLERANCE."""
    inside = verdict.low is not None and verdict.low <= factor <= verdict.high
    rates = ((-math.log(verdict.factor), -math.log(factor)) if factor > 0 and verdict.factor > 0
             else (1.0, math.inf))
    return inside or (all(r > 0 for r in rates) and max(rates) / min(rates) <= PREDICTION_TOLERANCE)


def prediction_claim(pure: dict[str, Side], predicted: dict[str, np.ndarray], thresholds,
                     setting: str, attention: str = "uniform attention") -> Claim:
    """Each mask's measured factor against the linear case's over the same layers: it follows the prediction
    where the predicted factor lies in the measured interval or their rates agree within
    PREDICTION_TOLERANCE; cannot tell where no factor is fitted (the curve reaches the floor first).
    ``attention``: the linear case's attention, in words (uniform over the allowed keys; a decay bias's)."""
    cells = []
    for mask, curve in pure.items():
        verdict = side_verdict(curve, thresholds)
        p = predicted_factor(predicted[mask], verdict)
        if p is None:
            cells.append(Cell(mask, "cannot tell", verdict.text, verdict.words))
            continue
        result = HOLDS if agrees(verdict, p) else FAILS
        cells.append(Cell(mask, result,
                          f"×{factor_text(verdict.factor)}{verdict.interval} vs ×{factor_text(p)}",
                          f"measured {verdict.factor_words} (layers {verdict.fit[0]}–{verdict.fit[1]}); the "
                          f"linear case over the same layers ×{factor_text(p)}"))
    return Claim("The measured collapse follows the linear case's prediction", "this book's control",
                 f"per mask: the measured per-layer factor against the linear case's ({attention}, "
                 f"W_V = I) over the same layers; agreeing: inside the interval or rates within "
                 f"×{PREDICTION_TOLERANCE:g}",
                 combine(cells), "; ".join(f"{c.column}: {c.text}" for c in cells), tuple(cells),
                 setting=setting)


def _bound_claim(first: StoredResult, pure: dict[str, Side], setting: str) -> Claim:
    """Theorem 1's bound, ``(1 - ε^r)^(1/r)`` per layer with ε of uniform attention (what a bias-free stack's
    attention tends to as X shrinks) and r the radius, against each measured factor (or, for a curve that
    reaches the floor first, its bound): it holds where the measurement lies below the bound."""
    n_tokens = first.provenance["parameters"]["n_tokens"]
    cells = []
    for (m, w), (key, curve) in zip(configurations(first), pure.items()):
        bound = bound_factor(masks.build_mask(m, n_tokens, w))
        verdict = side_verdict(curve)
        if verdict.factor is None and verdict.bound is None:
            cells.append(Cell(key, "cannot tell", verdict.text, verdict.words))
            continue
        high = verdict.bound if verdict.factor is None else (verdict.high or verdict.factor)
        low = verdict.bound if verdict.factor is None else (verdict.low or verdict.factor)
        result = HOLDS if high <= bound else FAILS if low > bound else "cannot tell"
        relation = {HOLDS: "≤", FAILS: ">"}.get(result, "vs")
        cells.append(Cell(key, result, f"×{factor_text(high)} {relation} ×{factor_text(bound)}",
                          f"{verdict.words}; Theorem 1's bound ×{factor_text(bound)} per layer"))
    return Claim("The collapse is at least as fast as Theorem 1's bound", "the paper: Theorem 1",
                 "per mask: the measured per-layer factor (its interval's upper end) against "
                 "(1 − ε^r)^(1/r), ε of uniform attention, r the radius (a bound of 1 to float64's "
                 "resolution says nothing)",
                 combine(cells), "; ".join(f"{c.column}: {c.text}" for c in cells), tuple(cells),
                 setting=setting)


def _radius_claim(first: StoredResult, pure: dict[str, Side], predicted: dict[str, np.ndarray], family: str,
                  setting: str) -> Claim:
    """Within one window family, a larger radius (a smaller window) slows collapse: the late per-layer factor
    of each window over the next larger one (above 1: slower), with its interval, beside the linear case's
    ratio over the same layers (which for uni-directional windows tends to 1: every one of them has |λ₂| = ½
    once its tokens have mixed)."""
    n_tokens = first.provenance["parameters"]["n_tokens"]
    windows = sorted(w for m, w in configurations(first) if m == family)
    radius = {w: mask_radius(family, n_tokens, w) for w in windows}
    pairs = {f"w = {a} (r = {radius[a]}) over w = {b} (r = {radius[b]})":
             (pure[mask_title(family, a)], pure[mask_title(family, b)]) for a, b in zip(windows, windows[1:])}
    if not pairs:
        return Claim(f"A larger radius slows collapse ({mask_title(family, None)}s)", "the paper: Theorem 1",
                     "one window only", OPEN, "needs two windows of the family", setting=setting)
    def cell(key: str, a: int, b: int, thresholds) -> Cell:
        found = effect_cell(key, late_factor(*pairs[key], thresholds), +1, thresholds)
        p = [predicted_factor(predicted[mask_title(family, w)], side_verdict(pure[mask_title(family, w)]))
             for w in (a, b)]
        linear = "" if None in p or not p[1] else f" (linear case ×{p[0] / p[1]:.3g})"
        return replace(found, text=found.text + linear, words=found.words + linear)

    keys = list(pairs)
    return robust(lambda t: replace(effect_claim(
        f"A larger radius slows collapse, within one mask family ({family.replace('_', ' ')}s)",
        "the paper: Theorem 1", "pure attention: late per-layer factor of each window over the next larger "
        "one (the smaller window has the larger radius), beside the linear case's",
        [cell(k, a, b, t) for k, a, b in zip(keys, windows, windows[1:])]), setting=setting))


def factor_table(first: StoredResult, pure: dict[str, Side],
                 predicted: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per (mask, window): its family, radius, the asymptotic |λ₂| of uniform attention, Theorem 1's
    bound, the measured factor with its interval and fit layers, and the linear case's factor over the same
    layers (NaN where no factor is fitted)."""
    n_tokens = first.provenance["parameters"]["n_tokens"]
    rows = []
    for (m, w), (key, curve) in zip(configurations(first), pure.items()):
        mask = masks.build_mask(m, n_tokens, w)
        verdict = side_verdict(curve)
        p = predicted_factor(predicted[key], verdict)
        rows.append({"mask": key, "family": m, "window": w, "radius": mask_radius(m, n_tokens, w),
                     "lambda2": math.exp(-linear_rate(mask)), "bound": bound_factor(mask),
                     "factor": np.nan if verdict.factor is None else verdict.factor,
                     "low": np.nan if verdict.low is None else verdict.low,
                     "high": np.nan if verdict.high is None else verdict.high,
                     "predicted": np.nan if p is None else p, "verdict": verdict.verdict})
    return pd.DataFrame(rows)


def _order_claim(first: StoredResult, pure: dict[str, Side], predicted: dict[str, np.ndarray],
                 setting: str) -> Claim:
    """Across the masks with a fitted factor: the rank correlation of the measured rate with the radius
    (Theorem 1's reading: a larger radius, a slower collapse — negative) and with the linear case's rate over
    the same layers (positive); the radius orders the rates where its correlation is -1. Factors are ranked
    at the digits the page shows (:func:`factor_text`): two that agree there are a tie (their order, a few
    parts in a million on intervals of ±0.5 %, is not measured: the causal mask and the uni-directional window
    of 16)."""
    table = factor_table(first, pure, predicted).dropna(subset=["factor", "predicted"])
    rate = -np.log(table["factor"].map(lambda f: float(factor_text(f))))
    by_radius = rank_correlation(table["radius"], rate)
    by_linear = rank_correlation(-np.log(table["predicted"].clip(lower=1e-300)), rate)
    verdict = HOLDS if by_radius <= -1 + 1e-9 else PARTLY if by_radius < 0 else FAILS
    better = "the linear case's rate" if abs(by_linear) > abs(by_radius) else "the radius"
    return Claim("Across mask families the radius orders the collapse rates", "the paper: Theorem 1",
                 "rank correlation of the measured rate with the radius (−1: every larger radius slower) and "
                 "with the linear case's rate over the same layers", verdict,
                 f"radius {by_radius:.2f}, linear case {by_linear:.2f} over {len(table)} masks: {better} "
                 "orders them better", setting=setting)


def setting_claims(results: Mapping[str, StoredResult]) -> list[Claim]:
    """The beside settings at depth (with PyTorch's biases; Hugging Face's init), pooled over their seeds:
    collapse under the paper's masks (beside the prediction where the biases are zero) and LayerNorm's
    claim."""
    rows = []
    for prefix, (_, weights, words) in SETTINGS.items():
        parts = seed_parts(results, prefix)
        setting = f"{words}; {len(parts)} weight seeds"
        pure = _sides(parts, weights, "none", "pure attention")
        rows.append(curves_claim("Pure masked attention collapses under every mask", "the paper: Theorem 1",
                                 "pure attention: per-layer factor of μ/‖X‖_F over the late layers", pure,
                                 predictions(parts[0]) if prefix == "hf" else None, setting=setting))
        for norm, norm_words in NORM_WORDS.items():
            normed = _sides(parts, weights, norm, norm_words)
            rows.append(stops_claim("Adding LayerNorm alone stops μ → 0 at random initialization",
                                    "the paper: Fig. 2", f"{norm_words} against pure attention, at depth",
                                    {m: (normed[m], pure[m]) for m in normed}, setting=setting))
    return rows


def finding_clauses(rows: list[Claim], table: pd.DataFrame) -> dict[str, str]:
    """The page's finding as clauses for its first paragraph, each chosen by the numbers: under how many
    masks pure attention collapses and which ones resolve none (``finding_collapse``), under how many the
    measured factor follows the linear case's (``finding_prediction``, with the paper's sliding window as the
    example) and what each norm does (``finding_layernorm``)."""
    collapse, prediction = rows[0], rows[1]
    held = [c for c in collapse.cells if c.outcome == HOLDS]
    open_ = [c.column for c in collapse.cells if c.outcome != HOLDS]
    rest = f"; no collapse resolved under the {', the '.join(open_)}" if open_ else ""
    follows = [c for c in prediction.cells if c.outcome == HOLDS]
    deciding = [c for c in prediction.cells if c.outcome in (HOLDS, FAILS)]
    example = next((c for c in prediction.cells if c.column == mask_title("sliding_window", PAPER_WINDOW)),
                   None)
    stops = [r for r in rows if r.claim.startswith("Adding LayerNorm")]
    norm_words = [f"{r.measured.split(' against')[0]} {r.verdict} ({r.number})" for r in stops]
    return {"finding_collapse": f"collapses under {len(held)} of {len(collapse.cells)} masks{rest}",
            "finding_prediction": f"the measured factor follows the linear case's under {len(follows)} of "
                                  f"{len(deciding)} masks with a fitted factor"
                                  + (f" (the sliding window, w = {PAPER_WINDOW}: {example.text})"
                                     if example else ""),
            "finding_layernorm": "; ".join(norm_words)}
