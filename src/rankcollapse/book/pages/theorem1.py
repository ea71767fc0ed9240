"""The Theorem 1 page (book/theory/theorem1.md): pure masked attention on every mask — rates, radii, the
explicit bound, the sliding-window sweep, the temperature table and the linear special case.

:class:`Theorem1Config` has exactly the fields of the page's ``parameters`` cell, with the same defaults, and
is validated once in ``__post_init__`` (one ValueError naming the parameter and the allowed values);
:func:`configure` builds it from a reader's parameters, :func:`compute` gives what the page shows, its
``numbers`` the values its prose glues; :func:`show` is what the page shows of it: those numbers, the clauses
of its finding (:data:`FINDING`), its four figures, the temperature and per-mask tables and its closing check
(:func:`check`).

Used by: book/theory/theorem1.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_theory.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from torch import Tensor

from rankcollapse.book.pages._common import MAX_SEED, check_system, own_config, verdict_clauses
from rankcollapse.book.plotting import theory as figures
from rankcollapse.book.plotting.reviewers import decay_shape_figure
from rankcollapse.book.labels import mask_label
from rankcollapse.book.shown import Shown, check_note, checked_claim, config_figures
from rankcollapse.core import masks
from rankcollapse.core.checks import (check_choice, check_choices, check_int, check_ints, check_number,
                                      check_numbers, check_temperature, freeze_lists)
from rankcollapse.core.masks import PAPER_MASKS
from rankcollapse.core.stats import fit_decay_rate
from rankcollapse.theory.rates import complete_mask_log_mu, decay_shape, loglog_slope
from rankcollapse.theory.dynamics import (WEIGHT_LAWS, CollapseSummary, DynamicsConfig, SystemConfig,
                                          linear_rate, log10_bound_rate, sample_system, summarize_collapse,
                                          theorem1_bound)
from rankcollapse.verdicts.claims import Cell, Claim


SHAPE_LAYERS = 10  # layers of the complete mask's exact track beside the linear case (log mu ~ -3^t after)
BOUND_HOLDS, BOUND_VIOLATED = "holds at every layer", "VIOLATED"  # a mask's "Theorem 1 bound" where checked
SOURCE = "the paper: Theorem 1"
# the clauses of the page's finding (its first paragraph): glue name -> the first words of the claim whose
# verdict and number it pastes (:func:`rankcollapse.book.pages._common.verdict_clauses`)
FINDING = {"thm1_finding_bound": "Pure masked attention collapses at least",
           "thm1_finding_radius": "The rate is set by the mask's radius",
           "thm1_finding_linear": "The exponential rate cannot be improved"}


def faster_or_slower(rate: float, other: float) -> str:
    """The word comparing two collapse rates: "faster" when ``rate > other``, else "slower"."""
    return "faster" if rate > other else "slower"


@dataclass(frozen=True)
class Theorem1Config:
    """The parameters of ``book/theory/theorem1.md``."""

    n_tokens: int = 16  # N
    d_model: int = 8  # d (also d_QK)
    n_layers: int = 60  # depth
    n_samples: int = 16  # seeds: independent X(0) and weights per mask (spread bands)
    seed: int = 0  # seed of the torch.Generator
    dtype: str = "float64"  # "float64" or "float32"
    temperature: float = 8.0  # d_QK: logits are divided by sqrt(temperature)
    qk_weights: str = "gaussian"  # law of W_Q, W_K: orthogonal, gaussian, uniform, identity, zero
    value_weights: str = "orthogonal"  # law of W_V (the explicit bound needs "orthogonal")
    window: int = 2  # window half-width / size of the window masks
    stride: int = 4  # stride of the strided (Sparse Transformer) mask
    dilation: int = 2  # dilation of the dilated window
    n_global: int = 1  # global tokens of the global + window mask
    random_density: float = 0.3  # edge probability of the random sparse mask
    mask_seed: int = 0  # seed of the random sparse mask
    paper_masks: tuple[str, ...] = PAPER_MASKS  # masks of the first panel
    zoo_masks: tuple[str, ...] = ("strided", "dilated_window", "global_window", "random")  # second panel
    sweep_windows: tuple[int, ...] = (1, 2, 3, 4, 8)  # window half-widths of the sliding-window sweep
    temperatures: tuple[float, ...] = (0.015625, 1.0, 8.0, 64.0)  # temperatures of the epsilon table
    y_min: float = 1e-40  # lower edge of the log axes (the exact track goes further)

    def __post_init__(self) -> None:
        freeze_lists(self, "paper_masks", "zoo_masks", "sweep_windows", "temperatures")
        check_system(self)
        check_temperature("temperature", self.temperature)
        check_choice("qk_weights", self.qk_weights, WEIGHT_LAWS)
        check_choice("value_weights", self.value_weights, WEIGHT_LAWS)
        for name in ("window", "stride", "dilation", "n_global"):
            check_int(name, getattr(self, name), 1, self.n_tokens - 1)
        check_number("random_density", self.random_density, 0.0, 1.0, open_low=True)
        check_int("mask_seed", self.mask_seed, 0, MAX_SEED)
        check_choices("paper_masks", self.paper_masks, masks.MASK_NAMES)
        check_choices("zoo_masks", self.zoo_masks, masks.MASK_NAMES)
        check_ints("sweep_windows", self.sweep_windows, 1, self.n_tokens - 1)
        if len(self.sweep_windows) < 2:
            raise ValueError(f"sweep_windows must hold at least 2 windows, got {self.sweep_windows!r}")
        check_numbers("temperatures", self.temperatures, 0.0, math.inf)
        check_number("y_min", self.y_min, 0.0, 1.0, open_low=True, open_high=True)

    def system(self, **changes: object) -> SystemConfig:
        """The random system of this page (``changes`` override the weight laws)."""
        return SystemConfig(**{"n_tokens": self.n_tokens, "d_model": self.d_model, "n_layers": self.n_layers,
                               "n_samples": self.n_samples, "qk_weights": self.qk_weights,
                               "value_weights": self.value_weights, "seed": self.seed, "dtype": self.dtype,
                               **changes})

    def mask(self, name: str, window: int | None = None) -> Tensor:
        """A mask of this page by name.  Shapes: -> ``[token, token]`` bool."""
        extra = {"dilated_window": {"dilation": self.dilation}, "global_window": {"n_global": self.n_global},
                 "random": {"density": self.random_density, "seed": self.mask_seed}}.get(name, {})
        width = self.stride if name == "strided" else (window or self.window)
        return masks.build_mask(name, self.n_tokens, window=width, **extra)


@dataclass(frozen=True)
class Theorem1Result:
    """Everything the Theorem 1 page shows.

    Shapes: every curve in ``summaries`` is ``[sample, layer + 1]``; ``linear_curves`` ``[layer + 1]``.
    """

    summaries: dict[str, CollapseSummary]  # mask name -> run of the pure dynamics (paper masks, then zoo)
    panels: dict[str, dict[str, CollapseSummary]]  # figure panel title -> its masks' runs
    table: pd.DataFrame  # per mask: radius, epsilon, rate (median, 10 %, 90 %), log10 bound rate, notes
    sweep: pd.DataFrame  # sliding window sweep: window, radius, measured rate, linear-case rate
    temperatures: pd.DataFrame  # per temperature (sliding window): epsilon, rate, log10 bound rate
    linear: pd.DataFrame  # linear case per mask: |lambda_2|, its rate, the measured late rate
    linear_curves: dict[str, Tensor]  # mask name -> median mu of the linear case
    # log mu of the complete mask's run, exact below the floor, first SHAPE_LAYERS layers
    complete_log_mu: Tensor
    exact_gap: float  # largest |mu exact - mu of X| in rounding floors (0: they agree)
    numbers: dict[str, object]  # glued values


def _bound_note(summary: CollapseSummary, X0: Tensor, config: Theorem1Config) -> str:
    """Whether the explicit bound holds at every layer of every sample (or why it is not checked)."""
    if summary.radius is None:
        return "does not apply: no center node"
    if config.value_weights != "orthogonal":
        return "not checked: W_V not orthogonal"
    if not summary.epsilon > 0:
        return "not checked: an attention weight underflowed to 0"
    bound = theorem1_bound(X0, summary.epsilon, summary.radius, config.n_layers)  # [sample, layer + 1]
    return BOUND_HOLDS if bool((summary.mu_exact <= bound * (1 + 1e-9)).all()) else BOUND_VIOLATED


def compute(config: Theorem1Config) -> Theorem1Result:
    """Pure masked attention on every mask: rates, radii, the explicit bound, the window sweep, the
    temperature table and the linear special case (W_Q = W_K = 0, W_V = I).

    Shapes: see :class:`Theorem1Result`.
    """
    layer = DynamicsConfig(norm="none", temperature=config.temperature)
    X0 = sample_system(config.system())[0]  # [sample, token, d_model], shared by every mask
    summaries, rows, gaps = {}, [], []
    for name in dict.fromkeys(config.paper_masks + config.zoo_masks):
        s = summaries[name] = summarize_collapse(config.mask(name), config.system(), layer)
        gaps.append(float(((s.mu_exact - s.mu_direct).abs() / s.floor).max()))
        rows.append({"mask": name, "radius": s.radius, "epsilon": s.epsilon, "rate": s.rate,
                     "rate 10%": float(s.rates.quantile(0.1)), "rate 90%": float(s.rates.quantile(0.9)),
                     "log10 bound rate": log10_bound_rate(s.epsilon, s.radius),
                     "Theorem 1 bound": _bound_note(s, X0, config)})
    table = pd.DataFrame(rows).set_index("mask")
    sweep = pd.DataFrame([{"window": w, "radius": s.radius, "rate": s.rate,
                           "linear rate": linear_rate(config.mask("sliding_window", w))}
                          for w in config.sweep_windows
                          for s in [summarize_collapse(config.mask("sliding_window", w), config.system(),
                                                       layer)]])
    temperatures = pd.DataFrame([{"temperature": temp, "epsilon": s.epsilon, "rate": s.rate,
                                  "log10 bound rate": log10_bound_rate(s.epsilon, s.radius)}
                                 for temp in sorted(config.temperatures)
                                 for s in [summarize_collapse(config.mask("sliding_window"), config.system(),
                                                              DynamicsConfig(temperature=temp))]])
    linear_rows, linear_curves = [], {}
    for name in (m for m in config.paper_masks if m != "complete"):
        s = summarize_collapse(config.mask(name), config.system(qk_weights="zero", value_weights="identity"),
                               layer)
        linear_curves[name] = s.mu_exact.median(dim=0).values  # [layer + 1]
        predicted = linear_rate(config.mask(name))
        late = fit_decay_rate(s.mu_exact.log().median(dim=0).values, skip=config.n_layers // 2)
        linear_rows.append({"mask": name, "|lambda_2|": math.exp(-predicted),
                            "rate -log|lambda_2|": predicted, "measured late rate": late})
    linear = pd.DataFrame(linear_rows).set_index("mask")
    shape_layers = min(SHAPE_LAYERS, config.n_layers)
    X0, W_Q, W_K, W_V = sample_system(config.system())  # the complete mask's own draws
    complete = complete_mask_log_mu(X0, W_Q, W_K, W_V, shape_layers,
                                    config.temperature)  # [sample, layer + 1]
    shapes = {"complete": loglog_slope(complete.median(dim=0).values)}
    if "causal" in linear_curves:
        shapes["linear_causal"] = loglog_slope(linear_curves["causal"][: shape_layers + 1].log())
    panels = {"the paper's four masks": {m: summaries[m] for m in config.paper_masks},
              "other masks": {m: summaries[m] for m in config.zoo_masks}}
    return Theorem1Result(summaries, panels, table, sweep.set_index("window"),
                          temperatures.set_index("temperature"), linear, linear_curves, complete, max(gaps),
                          {**_numbers(config, table, sweep, linear), **_shape_numbers(shapes, shape_layers)})


def _shape_numbers(slopes: dict[str, float], layers: int) -> dict[str, object]:
    """The log(-log mu) slope per layer of each curve and the decay it reads as (``thm1_shape_<curve>``)."""
    numbers: dict[str, object] = {"thm1_shape_layers": layers}
    for name, slope in slopes.items():
        numbers[f"thm1_loglog_slope_{name}"] = slope
        numbers[f"thm1_shape_{name}"] = decay_shape(slope)
    return numbers


def _numbers(config: Theorem1Config, table: pd.DataFrame, sweep: pd.DataFrame,
                      linear: pd.DataFrame) -> dict[str, object]:
    """The values the Theorem 1 page glues into its prose."""
    none = table[table["radius"].isna()].index.tolist()
    narrow, wide = sweep.loc[sweep["radius"].idxmax()], sweep.loc[sweep["radius"].idxmin()]
    numbers: dict[str, object] = {
        "thm1_n_samples": config.n_samples, "thm1_n_layers": config.n_layers,
        "thm1_not_applicable": ", ".join(none) if none else "none",
        "thm1_sweep_rate_narrow": float(narrow["rate"]), "thm1_sweep_rate_wide": float(wide["rate"]),
        "thm1_sweep_radius_narrow": int(narrow["radius"]), "thm1_sweep_radius_wide": int(wide["radius"]),
        "thm1_temperature": config.temperature,
    }
    for name, row in table.iterrows():
        numbers[f"thm1_rate_{name}"] = float(row["rate"])
        numbers[f"thm1_radius_{name}"] = "none" if pd.isna(row["radius"]) else int(row["radius"])
    for name, row in linear.iterrows():
        numbers[f"thm1_linear_rate_{name}"] = float(row["measured late rate"])
        numbers[f"thm1_linear_lambda2_{name}"] = float(row["|lambda_2|"])
    if {"sliding_window", "causal_sliding_window"} <= set(table.index):
        uni, bi = table.loc["causal_sliding_window", "rate"], table.loc["sliding_window", "rate"]
        numbers["thm1_uni_vs_bi"] = faster_or_slower(uni, bi)
    return numbers


configure = own_config(Theorem1Config)


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers (``thm1_*``), its figures (the masks' bands, the rates, the linear case and the
    decay shape), its temperature table (``thm1_temperature_table``), per-mask table (``thm1_mask_table``),
    claims table (``thm1``, :func:`claims`) and closing check (``thm1_check``, :func:`check`)."""
    config, result, _ = results["main"]
    shown = {"fig-theorem1-masks": figures.summary_bands(result.panels, exact=True, y_min=config.y_min,
                                                         norms=dict.fromkeys(result.panels, "none")),
             "fig-theorem1-rates": figures.rate_figure(result.table, result.sweep, config.temperature),
             "fig-theorem1-linear": figures.linear_figure(result.linear_curves, result.linear),
             "fig-theorem1-shape": decay_shape_figure(result.complete_log_mu,
                                                      {"causal": result.linear_curves["causal"].log()})}
    temperatures = result.temperatures.style.format({"epsilon": "{:.2e}", "rate": "{:.3f}",
                                                     "log10 bound rate": "{:.1f}"})
    masks_table = result.table.style.format({"radius": "{:.0f}", "epsilon": "{:.2e}", "rate": "{:.3f}",
                                             "rate 10%": "{:.3f}", "rate 90%": "{:.3f}",
                                             "log10 bound rate": "{:.1f}"}, na_rep="—")
    tables = page_claims(results, parameters)
    return Shown(values={**result.numbers, **verdict_clauses(tables["thm1"], FINDING)},
                 markdown={"thm1_check": check(config, result)}, claims=tables,
                 tables={"thm1_temperature_table": temperatures, "thm1_mask_table": masks_table},
                 figures=config_figures(shown, config))


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``thm1``: :func:`claims`)."""
    config, result, _ = results["main"]
    return {"thm1": claims(config, result)}


def _checked(config: Theorem1Config, result: Theorem1Result) -> list[tuple[bool, Claim, str]]:
    """The paper's statements this page checks on its run: whether each holds, its claims row, and what the
    closing check says when it does not ("": an assert of :func:`check` guards it)."""
    n, depth = result.numbers, f"n_layers = {config.n_layers}, N = {config.n_tokens}"
    wide, narrow = n["thm1_sweep_rate_wide"], n["thm1_sweep_rate_narrow"]
    linear = n["thm1_linear_rate_causal"]
    table = result.table
    checked = table[table["Theorem 1 bound"].isin((BOUND_HOLDS, BOUND_VIOLATED))]
    cells = [Cell(mask, "holds" if row["Theorem 1 bound"] == BOUND_HOLDS else "does not hold",
                  f"rate {row['rate']:.3f}", f"the bound {row['Theorem 1 bound']}; median rate "
                  f"{row['rate']:.3f} per layer, the bound's rate 10^{row['log10 bound rate']:.1f}")
             for mask, row in checked.iterrows()]
    others = ", ".join(f"{mask_label(m)} ({note})" for m, note in table["Theorem 1 bound"].items()
                       if m not in checked.index)
    bound_holds = bool(not checked.empty and (checked["Theorem 1 bound"] == BOUND_HOLDS).all())
    bound = checked_claim(
        bound_holds, "Pure masked attention collapses at least exponentially under every mask with a center "
        "node", SOURCE, "the theory's SAN, orthogonal W_V: μ against the theorem's explicit bound at every "
        "layer of every seed, per mask with a center",
        f"{(checked['Theorem 1 bound'] == BOUND_HOLDS).sum()} of {len(checked)} masks checked: μ below the "
        f"bound at every layer" + (f"; not checked: {others}" if others else ""), cells)
    linear_holds = abs(linear / math.log(2) - 1) < 1e-2  # |lambda_2| = 1/2
    return [
        (bound_holds, bound, ""),
        (wide > narrow,
         checked_claim(wide > narrow, "The rate is set by the mask's radius: a wider window (smaller radius) "
                       "collapses faster", SOURCE, "the theory's SAN, sliding windows of every width: median "
                       "rate per layer at the smallest and the largest radius",
                       f"radius {n['thm1_sweep_radius_wide']}: {wide:.3f} per layer; radius "
                       f"{n['thm1_sweep_radius_narrow']}: {narrow:.3f} per layer"),
         f"not converged at this depth ({depth}): the widest window collapses at {wide:.3f} per layer, not "
         f"faster than the narrowest ({narrow:.3f}); more layers separate them"),
        (linear_holds,
         checked_claim(linear_holds, "The exponential rate cannot be improved in general: the linear case "
                       "decays at exactly −log |λ₂|", f"{SOURCE} (the linear case)",
                       "W_Q = W_K = 0, W_V = I, causal mask: rate per layer over the last half of the layers "
                       "against log 2 (|λ₂| = 1/2)",
                       f"{linear:.4f} per layer against log 2 = {math.log(2):.4f}"),
         f"not converged at this depth ({depth}): the linear causal case decays at {linear:.4f} per layer "
         f"over the last half of the layers, not yet within 1 % of log 2 = {math.log(2):.4f} "
         f"(|λ₂| = 1/2); more layers bring it there"),
    ]


def claims(config: Theorem1Config, result: Theorem1Result) -> list[Claim]:
    """The paper's statements this page checks, as claims rows: the explicit bound per mask with a center, the
    radius ordering the sliding windows' rates, the linear case's rate."""
    return [claim for _, claim, _ in _checked(config, result)]


def check(config: Theorem1Config, result: Theorem1Result) -> str:
    """The page's closing check of the claim on this run. Asserts that the exact and direct μ agree above the
    floor and that the explicit bound holds wherever it is checked; returns the check note (Markdown,
    :func:`~rankcollapse.book.shown.check_note`) on what holds only at enough depth: the widest window
    collapses faster than the narrowest, the linear causal case decays at log 2."""
    assert result.exact_gap < 10, \
        f"exact and direct mu differ by {result.exact_gap:.3g} rounding floors above the floor"
    assert not result.table["Theorem 1 bound"].eq(BOUND_VIOLATED).any(), result.table["Theorem 1 bound"]
    return check_note([(holds, words) for holds, _, words in _checked(config, result) if words])
