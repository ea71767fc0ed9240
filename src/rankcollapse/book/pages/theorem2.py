"""The Theorem 2 page (book/theory/theorem2.md): LayerNorm with a fresh orthogonal W_V per layer on every
mask, and the contrast with one fixed W_V per seed, orthogonal or random.

:class:`Theorem2Config` has exactly the fields of the page's ``parameters`` cell, with the same defaults,
and is validated once in ``__post_init__``; :func:`configure` builds it from a reader's parameters,
:func:`compute` gives what the page shows, its ``numbers`` the values its prose glues; :func:`show` is what
the page shows of it: those numbers, the clauses of its finding (:func:`finding_clauses`), its two figures,
the rate table and its closing check (:func:`check`).

Used by: book/theory/theorem2.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_theory.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from rankcollapse.book.pages._common import (MAX_LAYERS, MAX_DRAWS, MAX_SYSTEM_TOKENS, check_system,
                                             own_config, row_of, verdict_clause)
from rankcollapse.book.plotting import theory as figures
from rankcollapse.book.labels import mask_label
from rankcollapse.book.shown import Shown, check_note, checked_claim, config_figures
from rankcollapse.core import masks, metrics
from rankcollapse.core.checks import (check_choice, check_choices, check_int, check_number, check_temperature,
                                      freeze_lists)
from rankcollapse.core.masks import PAPER_MASKS
from rankcollapse.core.stats import wilson_interval
from rankcollapse.theory.dynamics import (WEIGHT_LAWS, CollapseSummary, DynamicsConfig, SystemConfig,
                                          run_system, summarize_collapse)
from rankcollapse.verdicts.claims import Cell, Claim


@dataclass(frozen=True)
class Theorem2Config:
    """The parameters of ``book/theory/theorem2.md``."""

    n_tokens: int = 16  # N
    d_model: int = 8  # d (also d_QK)
    n_layers: int = 80  # depth
    n_samples: int = 16  # seeds (spread bands)
    seed: int = 0  # seed of the torch.Generator
    dtype: str = "float64"  # "float64" or "float32"
    temperature: float = 8.0  # d_QK: logits are divided by sqrt(temperature)
    qk_weights: str = "gaussian"  # law of W_Q, W_K
    window: int = 2  # window of the window masks
    norms: tuple[str, ...] = ("unit", "layernorm")  # the paper's D ("unit") and the variants to compare
    masks_shown: tuple[str, ...] = PAPER_MASKS  # masks of the orthogonal runs
    # masks of the orthogonal vs random contrast
    contrast_masks: tuple[str, ...] = ("causal", "causal_sliding_window")
    contrast_window: int = 1  # window of the contrast masks
    contrast_n_tokens: int = 8  # N of the contrast
    contrast_d_model: int = 2  # d of the contrast (small d: the counterexample's regime; also its d_QK)
    contrast_layers: int = 400  # depth of the contrast
    contrast_samples: int = 200  # seeds of the contrast
    # mu(X) at the last layer below this (or 100 rounding floors) counts as collapsed
    collapse_tol: float = 1e-8

    def __post_init__(self) -> None:
        freeze_lists(self, "norms", "masks_shown", "contrast_masks")
        check_system(self)
        check_temperature("temperature", self.temperature)
        check_choice("qk_weights", self.qk_weights, WEIGHT_LAWS)
        check_int("window", self.window, 1, self.n_tokens - 1)
        check_choices("norms", self.norms, ("unit", "rms", "layernorm"))
        if self.norms[0] != "unit":
            raise ValueError(f"norms must start with 'unit' (the paper's D, the theorem's setting), "
                             f"got {self.norms!r}")
        check_choices("masks_shown", self.masks_shown, masks.MASK_NAMES)
        check_choices("contrast_masks", self.contrast_masks, masks.MASK_NAMES)
        check_int("contrast_n_tokens", self.contrast_n_tokens, 2, MAX_SYSTEM_TOKENS)
        check_int("contrast_window", self.contrast_window, 1, self.contrast_n_tokens - 1)
        check_int("contrast_d_model", self.contrast_d_model, 2, 4096)
        check_int("contrast_layers", self.contrast_layers, 1, MAX_LAYERS)
        check_int("contrast_samples", self.contrast_samples, 1, MAX_DRAWS)
        check_number("collapse_tol", self.collapse_tol, 0.0, 1.0, open_low=True)


_NORM_WORDS = {"unit": "LayerNorm D (unit norm, the paper's)", "rms": "RMSNorm (norm √d)",
              "layernorm": "LayerNorm without affine (norm ≈ √d)"}  # panel titles of the Theorem 2 page
_CONTRAST_LAWS = ("orthogonal", "gaussian", "uniform")  # the value-matrix laws of the Theorem 2 contrast
SOURCE = "the paper: Theorem 2"


@dataclass(frozen=True)
class Theorem2Result:
    """Everything the Theorem 2 page shows. Shapes: curves in ``summaries`` are ``[sample, layer + 1]``."""

    panels: dict[str, dict[str, CollapseSummary]]  # norm in words -> mask -> run with orthogonal W_V
    rates: pd.DataFrame  # per (norm, mask): radius, rate (median, 10 %, 90 %, slowest seed)
    contrast: pd.DataFrame  # per (mask, W_V law): fraction not collapsed with its Wilson interval
    numbers: dict[str, object]  # glued values


def compute(config: Theorem2Config) -> Theorem2Result:
    """LayerNorm with a fresh orthogonal W_V per layer on every mask, and the contrast: one fixed W_V per
    seed, orthogonal or random, counting the seeds that have not collapsed.

    Shapes: see :class:`Theorem2Result`.
    """
    system = SystemConfig(n_tokens=config.n_tokens, d_model=config.d_model, n_layers=config.n_layers,
                          n_samples=config.n_samples, qk_weights=config.qk_weights,
                          value_weights="orthogonal", hemisphere=True, seed=config.seed, dtype=config.dtype)
    panels, rows = {}, []
    for norm in config.norms:
        panel = panels[_NORM_WORDS[norm]] = {}
        for name in config.masks_shown:
            mask = masks.build_mask(name, config.n_tokens, window=config.window)
            s = panel[name] = summarize_collapse(mask, system, DynamicsConfig(norm, config.temperature))
            rows.append({"norm": norm, "mask": name, "radius": s.radius, "rate": s.rate,
                         "rate 10%": float(s.rates.quantile(0.1)), "rate 90%": float(s.rates.quantile(0.9)),
                         "slowest rate": float(s.rates.min())})
    rates = pd.DataFrame(rows).set_index(["norm", "mask"])
    contrast_rows = []
    for name in config.contrast_masks:
        mask = masks.build_mask(name, config.contrast_n_tokens, window=config.contrast_window)
        for law in _CONTRAST_LAWS:
            contrast_system = SystemConfig(
                n_tokens=config.contrast_n_tokens, d_model=config.contrast_d_model,
                n_layers=config.contrast_layers, n_samples=config.contrast_samples,
                qk_weights=config.qk_weights, value_weights=law, share_layers=True, hemisphere=True,
                seed=config.seed, dtype=config.dtype)
            final = run_system(mask, contrast_system, DynamicsConfig("unit", float(config.contrast_d_model),
                                                                      keep_states=False)).final
            floor = metrics.rounding_floor(metrics.frobenius_norm(final), metrics.resolve_dtype(config.dtype))
            alive = int((metrics.mu(final) > torch.clamp(100 * floor, min=config.collapse_tol)).sum())
            p = wilson_interval(alive, config.contrast_samples)
            contrast_rows.append({"mask": name, "W_V": law, "not collapsed": p.fraction, "low": p.low,
                                  "high": p.high})
    contrast = pd.DataFrame(contrast_rows)
    random_max = float(contrast[contrast["W_V"] != "orthogonal"]["not collapsed"].max())
    numbers: dict[str, object] = {
        "thm2_n_samples": config.n_samples, "thm2_contrast_d": config.contrast_d_model,
        "thm2_contrast_n_tokens": config.contrast_n_tokens, "thm2_contrast_layers": config.contrast_layers,
        "thm2_contrast_samples": config.contrast_samples, "thm2_collapse_tol": config.collapse_tol,
        "thm2_alive_max_random": random_max,
        "thm2_other_norms": ", ".join(_NORM_WORDS[n] for n in config.norms[1:]) or "none",
        "thm2_random_verdict": ("so the theorem's hypothesis is not a technicality" if random_max > 0 else
                                "so this run shows no difference: try a smaller contrast width or more "
                                "layers"),
    }
    for name in config.masks_shown:
        numbers[f"thm2_rate_{name}"] = float(rates.loc[("unit", name), "rate"])
    for row in contrast.itertuples():
        numbers[f"thm2_alive_{row.mask}_{row.W_V}"] = float(row._3)
    return Theorem2Result(panels, rates, contrast, numbers)


configure = own_config(Theorem2Config)


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers (``thm2_*``), its figures (orthogonal W_V per norm and mask, the contrast), its rate
    table (``thm2_rate_table``), claims table (``thm2``, :func:`claims`) and closing check (``thm2_check``,
    :func:`check`)."""
    config, result, _ = results["main"]
    norms = {words: norm for norm, words in _NORM_WORDS.items()}  # each panel's norm, for its line style
    shown = {"fig-theorem2-orthogonal": figures.summary_bands(result.panels, exact=False, norms=norms),
             "fig-theorem2-random": figures.contrast_figure(result.contrast, config.collapse_tol,
                                                            config.contrast_layers)}
    tables = page_claims(results, parameters)
    return Shown(values={**result.numbers, **finding_clauses(tables["thm2"])},
                 markdown={"thm2_check": check(config, result)}, claims=tables,
                 tables={"thm2_rate_table": result.rates.style.format(precision=3)},
                 figures=config_figures(shown, config))


def finding_clauses(rows: list[Claim]) -> dict[str, str]:
    """The page's finding as the clauses its first paragraph pastes: the verdict and number of the collapse
    with a fresh orthogonal W_V per layer (``thm2_finding_collapse``) and with one fixed orthogonal W_V
    (``thm2_finding_fixed``)."""
    fixed = row_of(rows, "With one fixed orthogonal W_V")
    return {"thm2_finding_collapse": verdict_clause(row_of(rows, "With LayerNorm and orthogonal value")),
            "thm2_finding_fixed": verdict_clause(fixed, f"{fixed.number} of the seeds still apart")}


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``thm2``: :func:`claims`)."""
    config, result, _ = results["main"]
    return {"thm2": claims(config, result)}


def _checked(config: Theorem2Config, result: Theorem2Result) -> list[tuple[bool, Claim, str]]:
    """The paper's statements this page checks on its run: whether each holds, its claims row, and what the
    closing check says when it does not."""
    slowest = result.rates.loc["unit"]["slowest rate"]
    orthogonal = result.contrast.query("W_V == 'orthogonal'").set_index("mask")["not collapsed"]
    every_seed = bool((slowest > 0).all())
    none_alive = bool((orthogonal == 0).all())
    collapse = checked_claim(
        every_seed, "With LayerNorm and orthogonal value matrices tokens still collapse, under every mask",
        SOURCE, "the paper's D, a fresh orthogonal W_V per layer: the slowest seed's rate per layer, per "
        "mask",
        f"slowest rate {slowest.min():.3g} per layer ({mask_label(slowest.idxmin())})",
        [Cell(m, "holds" if v > 0 else "does not hold", f"slowest {v:.3g}",
              f"the slowest of {config.n_samples} seeds collapses at {v:.3g} per layer")
         for m, v in slowest.items()])
    contrast = checked_claim(
        none_alive, "With one fixed orthogonal W_V every seed collapses", SOURCE,
        f"the paper's D, one orthogonal W_V per seed, N = {config.contrast_n_tokens}, d = "
        f"{config.contrast_d_model}: share of the {config.contrast_samples} seeds not collapsed after "
        f"{config.contrast_layers} layers, per mask",
        ", ".join(f"{mask_label(m)}: {100 * v:.1f} %" for m, v in orthogonal.items()),
        [Cell(m, "holds" if v == 0 else "does not hold", f"{100 * v:.1f} % apart",
              f"{100 * v:.1f} % of the seeds keep μ above {config.collapse_tol:g}")
         for m, v in orthogonal.items()])
    return [
        (every_seed, collapse,
         f"not converged at this depth (n_layers = {config.n_layers}): the slowest seed's rate is "
         f"{slowest.min():.3g} per layer (mask {slowest.idxmin()}), not yet positive"),
        (none_alive, contrast,
         f"not converged at this depth (contrast_layers = {config.contrast_layers}): with an orthogonal W_V, "
         + ", ".join(f"{100 * v:.1f} % of the {m} seeds" for m, v in orthogonal.items() if v > 0)
         + f" have not collapsed yet (μ above {config.collapse_tol:g}); Theorem 2 says they do, given more "
           f"layers"),
    ]


def claims(config: Theorem2Config, result: Theorem2Result) -> list[Claim]:
    """The paper's statements this page checks, as claims rows: every seed of every mask collapses with the
    paper's D, and none survives with one fixed orthogonal W_V."""
    return [claim for _, claim, _ in _checked(config, result)]


def check(config: Theorem2Config, result: Theorem2Result) -> str:
    """The page's closing check of the theorem on this run: the check note (Markdown,
    :func:`~rankcollapse.book.shown.check_note`) on what holds only at enough depth: with the paper's D every
    seed of every mask collapses at a positive rate, and no seed with an orthogonal W_V survives the
    contrast."""
    return check_note([(holds, words) for holds, _, words in _checked(config, result)])
