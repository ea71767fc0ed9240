"""Soft locality (book/beyond/soft_locality.md): the theory's SAN under a distance-decay bias -m |i - j| on
its attention logits (ALiBi's bias with one slope), beside the hard windows whose linear case contracts as
fast, and the linear case's prediction for each slope.

:func:`configure` turns the page's parameters into its sweeps, per weight seed k (``seed + k``, the samples
those of ``seed``): ``hard_<k>``, the theory's SAN (initialized, no biases, pure attention) under the complete
and causal masks and the bidirectional sliding window at each slope's matched width
(:func:`rankcollapse.theory.soft_locality.matched_window`); ``decay<i>_<k>``, the same stack under the
complete and causal masks with the decay bias of the i-th slope on every layer. :func:`show` is what the page
shows of them: :func:`page_claims`, the slopes' table (:func:`slope_table`) and its figure.

Used by: book/beyond/soft_locality.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from rankcollapse.book.labels import mask_title
from rankcollapse.book.pages._common import (THEORY_SETTING, computing, curves_claim, linear_prediction,
                                             seed_parts)
from rankcollapse.book.pages.theory_san import agrees, prediction_claim
from rankcollapse.book.plotting.soft_locality import slope_figure
from rankcollapse.book.shown import (Shown, ShownFigure, combined_parameters, figure_data, prefixed,
                                    scale_note, scale_words)
from rankcollapse.core import masks
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import Run, experiment_config
from rankcollapse.experiments.store import StoredResult
from rankcollapse.theory.dynamics import linear_curve, linear_rate
from rankcollapse.theory.soft_locality import decay_attention, decay_second_eigenvalue, matched_window
from rankcollapse.verdicts.claims import (Cell, Claim, combine, effect_cell, predicted_factor,
                                          side_verdict)
from rankcollapse.verdicts.effects import Side, late_factor, side
from rankcollapse.verdicts.robustness import robust
from rankcollapse.verdicts.rules import factor_text

FIXED = dict(weights=("initialized_nobias",), norms=("none",))  # the theory's SAN, pure attention
DIRECTIONS = ("complete", "causal")  # the masks a decay bias goes with: every key, or the earlier ones
SHALLOW = 12  # the paper's depth, at which the slopes' table also reads each decay
PAGE_PARAMETERS = ("n_weight_seeds", "slopes")  # the page's own parameters (not an experiment's)


def check_slopes(slopes: object) -> tuple[float, ...]:
    """The page's ``slopes``: a non-empty list of distinct finite numbers > 0, in increasing order."""
    if not isinstance(slopes, (list, tuple)) or not slopes or any(
            isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m <= 0
            for m in slopes) or len(set(slopes)) != len(slopes):
        raise ValueError(f"slopes must be a non-empty list of distinct numbers > 0, got {slopes!r}")
    return tuple(sorted(float(m) for m in slopes))


def configure(parameters: dict) -> dict[str, Run]:
    """Per weight seed k, the hard masks (``hard_<k>``) and each slope's decay (``decay<i>_<k>``)."""
    own = computing(parameters, *PAGE_PARAMETERS)
    n_seeds = parameters.get("n_weight_seeds")
    check_int("n_weight_seeds", n_seeds, 1, 100)
    slopes = check_slopes(parameters.get("slopes"))
    check_int("n_tokens", own.get("n_tokens"), 3, 8192)
    windows = tuple(sorted({matched_window(own["n_tokens"], m) for m in slopes}))
    seed, runs = own.get("seed", 0), {}
    for k in range(n_seeds):
        drawn = {**own, "weight_seed": seed + k}
        runs[f"hard_{k}"] = Run(experiment_config(drawn, **FIXED, masks=(*DIRECTIONS, "sliding_window"),
                                                  windows=windows))
        for i, m in enumerate(slopes):
            runs[f"decay{i}_{k}"] = Run(experiment_config(drawn, **FIXED, masks=DIRECTIONS, decay_slope=m))
    return runs


def _side(parts: list[StoredResult], mask: str, window: int | None, label: str) -> Side:
    """Pure attention's μ/‖X‖_F under ``mask`` pooled over the parts' weight seeds."""
    return side(parts, None, label, "relative_mu", weights="initialized_nobias", variant="SAN", mask=mask,
                window=window, norm="none")


def _slopes(results: Mapping[str, StoredResult]) -> dict[float, list[StoredResult]]:
    """Each slope's decay parts over the weight seeds, by slope (read from the stored parameters)."""
    found: dict[float, list[StoredResult]] = {}
    for name, result in results.items():
        if name.startswith("decay"):
            found.setdefault(float(result.provenance["parameters"]["decay_slope"]), []).append(result)
    return dict(sorted(found.items()))


def _decay_key(mask: str, slope: float) -> str:
    return f"{mask_title(mask, None)}, m = {slope:g}"


class Curves:
    """The page's measured curves and the linear case's: per key (``"complete, m = 0.1"``, ``"complete"``,
    ``"sliding window, w = 8"``) the side pooled over seeds and the prediction [layer + 1]."""

    def __init__(self, results: Mapping[str, StoredResult]) -> None:
        hard = seed_parts(results, "hard")
        p = hard[0].provenance["parameters"]
        self.n_tokens, self.n_layers, self.first = p["n_tokens"], p["n_layers"], hard[0]
        self.slopes = _slopes(results)
        self.windows = {m: matched_window(self.n_tokens, m) for m in self.slopes}
        self.decay = {_decay_key(mask, m): _side(parts, mask, None, _decay_key(mask, m))
                      for m, parts in self.slopes.items() for mask in DIRECTIONS}
        hard_masks = {mask_title(mask, w): (mask, w) for mask, w in [(d, None) for d in DIRECTIONS]
                      + [("sliding_window", w) for w in sorted(set(self.windows.values()))]}
        self.hard = {key: _side(hard, mask, w, key) for key, (mask, w) in hard_masks.items()}
        self.predicted = {**{_decay_key(mask, m): linear_curve(decay_attention(self.n_tokens, m,
                                                                               mask == "causal"),
                                                                self.n_layers).numpy()
                             for m in self.slopes for mask in DIRECTIONS},
                          **{key: linear_prediction(mask, self.n_tokens, w, self.n_layers)
                             for key, (mask, w) in hard_masks.items()}}
        self.n_seeds = len(hard)


def page_claims(results: Mapping[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``soft_locality``), as :func:`show` shows it (no figure drawn)."""
    return {"soft_locality": claims(Curves(results))}


def claims(curves: Curves) -> list[Claim]:
    """On the theory's SAN, pooled over the weight seeds: pure attention with a decay bias collapses (the
    graph stays complete or causal: Theorem 1), at the linear case's rate for the decay; the bias slows the
    collapse against the same mask without it; under a bidirectional decay it collapses as the hard window of
    the matched width does."""
    setting = f"{THEORY_SETTING}; {curves.n_seeds} weight seeds"
    decay_words = ("pure attention with the decay bias −m|i − j|: per-layer factor of μ/‖X‖_F over the late "
                   "layers")
    return [curves_claim("Pure attention with a decay bias still collapses", "the paper: Theorem 1 (the "
                         "graph stays complete or causal, radius 1)", decay_words, curves.decay,
                         curves.predicted, setting=setting),
            robust(lambda t: prediction_claim(curves.decay, curves.predicted, t, setting,
                                              "attention ∝ e^(−m|i − j|) over the allowed keys")),
            robust(lambda t: _slows_claim(curves, t, setting)),
            robust(lambda t: _window_claim(curves, t, setting))]


def _slows_claim(curves: Curves, thresholds, setting: str) -> Claim:
    """Per mask and slope, the late per-layer factor of the decay over the same mask without it (above 1:
    slower), with its interval, beside the linear case's |λ₂| with and without it. Where the mask without
    the decay reaches the rounding floor before a factor can be fitted (the complete mask: Dong et al.'s
    doubly exponential collapse), the decay is slower when its measured factor (its interval's lower end)
    lies above that curve's bound."""
    cells = []
    for m in curves.slopes:
        for mask in DIRECTIONS:
            key = _decay_key(mask, m)
            plain = curves.hard[mask_title(mask, None)]
            found = effect_cell(key, late_factor(curves.decay[key], plain, thresholds), +1, thresholds)
            fast, slow = side_verdict(plain, thresholds), side_verdict(curves.decay[key], thresholds)
            if fast.factor is None and fast.bound is not None and slow.factor is not None:
                above = (slow.low if slow.low is not None else slow.factor) > fast.bound
                found = Cell(key, "holds" if above else "cannot tell",
                             f"with ×{factor_text(slow.factor)}{slow.interval}, without < ×{fast.bound:.2g}",
                             f"decay {slow.factor_words}; without it {fast.words}")
            with_decay, without = (decay_second_eigenvalue(curves.n_tokens, slope, mask == "causal")
                                   for slope in (m, 0.0))
            linear = f"linear case |λ₂| {with_decay:.3g} vs {without:.3g}"
            cells.append(Cell(key, found.outcome, f"{found.text} ({linear})", f"{found.words}; {linear}"))
    return Claim("A decay bias slows collapse", "the paper: Theorem 1, read for a soft window (ALiBi's bias)",
                 "per mask and slope m: late per-layer factor of μ/‖X‖_F with the decay over the same mask "
                 "without it (above 1: slower), beside the linear case's |λ₂| with and without it",
                 combine(cells), "; ".join(f"{c.column}: {c.text}" for c in cells), tuple(cells),
                 setting=setting)


def _window_claim(curves: Curves, thresholds, setting: str) -> Claim:
    """Per slope, the bidirectional decay's measured factor against the hard window of the matched width's
    (the window whose linear case's |λ₂| is nearest): they agree where the window's factor lies in the
    decay's interval or their rates agree within PREDICTION_TOLERANCE."""
    cells = []
    for m, w in curves.windows.items():
        key = _decay_key("complete", m)
        decay = side_verdict(curves.decay[key], thresholds)
        window = side_verdict(curves.hard[mask_title("sliding_window", w)], thresholds)
        if decay.factor is None or window.factor is None:
            cells.append(Cell(key, "cannot tell", f"{decay.text}; w = {w}: {window.text}",
                              f"decay: {decay.words}; the window w = {w}: {window.words}"))
            continue
        result = "holds" if agrees(decay, window.factor) else "does not hold"
        versus = f"w = {w}: ×{factor_text(window.factor)}"
        cells.append(Cell(key, result, f"×{factor_text(decay.factor)}{decay.interval} vs {versus}",
                          f"decay {decay.factor_words}; the sliding window w = {w} {window.factor_words}"))
    return Claim("A bidirectional decay bias acts like the hard window of matched width w(m)",
                 "this book's control: the linear case's matched window",
                 "per slope m: the decay's per-layer factor of μ/‖X‖_F against that of the sliding window "
                 "whose uniform attention has the nearest |λ₂| (a causal decay has no such window: its "
                 "|λ₂| lies above every causal window's ½)",
                 combine(cells), "; ".join(f"{c.column}: {c.text}" for c in cells), tuple(cells),
                 setting=setting)


def slope_table(curves: Curves) -> pd.DataFrame:
    """One row per slope and direction: the linear case's asymptotic |λ₂| and its factor over the measured
    fit's layers (``predicted``), the measured per-layer factor over the late layers with its interval (NaN
    where none is fitted), the measured factor without the decay, (bidirectional) the matched window, its
    |λ₂| and its measured factor, and the decay's verdict over the first SHALLOW layers alone (compact)."""
    rows = []
    for m in curves.slopes:
        for mask in DIRECTIONS:
            key = _decay_key(mask, m)
            verdict = side_verdict(curves.decay[key])
            plain = side_verdict(curves.hard[mask_title(mask, None)])
            w = curves.windows[m] if mask == "complete" else None
            window = side_verdict(curves.hard[mask_title("sliding_window", w)]) if w else None
            rows.append({"mask": mask, "slope": m,
                         "lambda2": decay_second_eigenvalue(curves.n_tokens, m, mask == "causal"),
                         "window": w, "window_lambda2": np.nan if w is None else math.exp(
                             -linear_rate(masks.build_mask("sliding_window", curves.n_tokens, w))),
                         "predicted": _or_nan(predicted_factor(curves.predicted[key], verdict)),
                         "factor": _or_nan(verdict.factor), "low": _or_nan(verdict.low),
                         "high": _or_nan(verdict.high), "window_factor": _or_nan(window and window.factor),
                         "plain_factor": _or_nan(plain.factor),
                         "shallow": side_verdict(_first(curves.decay[key], SHALLOW)).text})
    return pd.DataFrame(rows)


def _first(curve: Side, n_layers: int) -> Side:
    """The curve of the first ``n_layers`` layers only: what a stack of that depth measures (a weight seed's
    first layers are drawn as a shallower stack's are)."""
    draws = None if curve.draws is None else curve.draws[:, :n_layers + 1]
    return Side(curve.label, curve.values[:n_layers + 1], curve.floor[:n_layers + 1], draws, curve.resampled)


def _or_nan(value: float | None) -> float:
    return np.nan if value is None else float(value)


def show(results: Mapping[str, StoredResult], parameters: dict) -> Shown:
    """The page's numbers and scale (``soft_locality_*``), its claims table, the slopes' table and figure,
    and the scale note."""
    curves = Curves(results)
    rows = claims(curves)
    table = slope_table(curves)
    parts = list(results.values())
    hidden = [f"{mask_title(r.mask, None)}, m = {r.slope:g}" for r in table.itertuples()
              if r.shallow.startswith(("not resolved", "on the floor"))]
    shallow = (f"in the first {SHALLOW} layers alone {len(hidden)} of {len(table)} decays show no collapse "
               f"({'; '.join(hidden)})" if hidden
               else f"every decay collapses within the first {SHALLOW} layers")
    values = {"scale": scale_words(curves.first), "n_seeds": curves.n_seeds, "n_layers": curves.n_layers,
              "n_tokens": curves.n_tokens, "finding_shallow": shallow, **finding_clauses(rows)}
    figure = ShownFigure("fig-soft-locality-factors", slope_figure(table, curves.n_tokens),
                         combined_parameters(parts), figure_data(parts))
    return Shown(values=prefixed("soft_locality", values),
                 markdown={"soft_locality_scale_note": scale_note(curves.first)},
                 claims={"soft_locality": rows}, tables={"soft_locality_table": table_view(table)},
                 figures=[figure])


def table_view(table: pd.DataFrame):
    """The slopes' table as the page shows it (a styled table without the index, seven columns so that it
    fits a printed page): numbers as text, a dash where there is none; the measured factor beside the linear
    case's over the same layers, the matched window with its measured factor and |λ₂|."""
    def number(value: float) -> str:
        return "—" if value != value else f"×{factor_text(value)}"

    def measured(row) -> str:
        interval = f" [{factor_text(row.low)}, {factor_text(row.high)}]" if row.low == row.low else ""
        return "—" if row.factor != row.factor else \
            f"×{factor_text(row.factor)}{interval} vs {number(row.predicted)}"

    def window(row) -> str:
        if row.window != row.window:
            return "none"
        return f"w = {int(row.window)}: {number(row.window_factor)} (|λ₂| {row.window_lambda2:.4g})"

    shown = pd.DataFrame({"mask": table["mask"].map(lambda m: mask_title(m, None)),
                          "m": table["slope"].map(lambda m: f"{m:g}"),
                          "linear case |λ₂|": table["lambda2"].map(lambda v: f"{v:.4g}"),
                          "measured vs the linear case, same layers": [measured(r)
                                                                       for r in table.itertuples()],
                          "without the decay": table["plain_factor"].map(number),
                          "matched window: measured": [window(r) for r in table.itertuples()],
                          f"the decay in {SHALLOW} layers": table["shallow"]})
    return shown.style.hide(axis="index")


def finding_clauses(rows: Sequence[Claim]) -> dict[str, str]:
    """The page's finding as clauses chosen by the numbers: under how many decays pure attention collapses
    (``finding_collapse``), follows the linear case (``finding_prediction``), is slowed
    (``finding_slows``) and acts like its matched window (``finding_window``), each naming the cells that
    do not hold and why."""
    def count(row: Claim, noun: str) -> str:
        held = [c for c in row.cells if c.outcome == "holds"]
        others = [f"{c.column}: {c.outcome}, {c.text}" for c in row.cells if c.outcome != "holds"]
        return f"{len(held)} of {len(row.cells)} {noun}" + (f" ({'; '.join(others)})" if others else "")

    collapse, prediction, slows, window = rows
    return {"finding_collapse": f"collapses under {count(collapse, 'decays')}",
            "finding_prediction": f"at the rate of the linear case's decayed attention under "
                                  f"{count(prediction, 'decays')}",
            "finding_slows": f"the decay slows the collapse of the same mask without it for "
                             f"{count(slows, '(mask, slope) pairs')}",
            "finding_window": f"a bidirectional decay collapses as its matched window does for "
                              f"{count(window, 'slopes')}"}
