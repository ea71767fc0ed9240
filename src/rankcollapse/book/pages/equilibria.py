"""The equilibria page (book/theory/equilibria.md): LayerNorm dynamics on a star mask with equilibria of
every rank, the ranks random starts reach, and the threshold c* above which they stop collapsing.

:class:`EquilibriaConfig` has exactly the fields of the page's ``parameters`` cell, with the same defaults,
and is validated once in ``__post_init__``; :func:`configure` builds it from a reader's parameters,
:func:`compute` gives what the page shows, its ``numbers`` the values its prose glues; :func:`show` is what
the page shows of it: those numbers, the clauses of its finding (:data:`FINDING`), the table of
constructed equilibria, its two figures and its closing check (:func:`check`).

Used by: book/theory/equilibria.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_theory.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.book.pages._common import MAX_LAYERS, MAX_DRAWS, MAX_SEED, own_config, verdict_clauses
from rankcollapse.book.plotting import theory as figures
from rankcollapse.book.shown import Shown, check_note, checked_claim, config_figures
from rankcollapse.core import metrics
from rankcollapse.core.checks import check_int, check_ints, check_number, check_numbers, freeze_lists
from rankcollapse.core.stats import wilson_interval
from rankcollapse.theory import counterexample as ce
from rankcollapse.theory.dynamics import Trajectory
from rankcollapse.verdicts.claims import Cell, Claim

SOURCE = "the paper: equilibria of every rank"
CONSTRUCTION = "this book's construction"  # the threshold c* is of our construction, not the paper's
# the clauses of the page's finding (its first paragraph): glue name -> the first words of the claim whose
# verdict and number it pastes (:func:`rankcollapse.book.pages._common.verdict_clauses`)
FINDING = {"eq_finding_equilibria": "LayerNorm dynamics can have equilibria",
           "eq_finding_ranks": "Each rank is reached",
           "eq_finding_below": "Below the threshold c*", "eq_finding_above": "Above the threshold c*"}


@dataclass(frozen=True)
class EquilibriaConfig:
    """The parameters of ``book/theory/equilibria.md``."""

    n_tokens: int = 6  # N (at least d, so every rank up to d is possible)
    d_model: int = 3  # d
    a: float = 0.2  # diagonal of W_V's upper block, in (0, 1)
    c: float = 4.0  # coupling of W_V's last column; must exceed sqrt(a (2 - a) / (d - 1))
    n_samples: int = 4000  # random initial X(0) for the histogram
    n_layers: int = 100  # depth after which the rank is read off
    perturbation: float = 1e-4  # size of the random kick in the stability check
    seed: int = 0  # seed of the torch.Generator
    rank_rtol: float = 1e-6  # relative tolerance of the numerical rank of the final X
    fixed_point_tol: float = 1e-12  # tolerance of the fixed-point check
    sweep_d_models: tuple[int, ...] = (2, 3, 4)  # widths d of the threshold sweep
    sweep_factors: tuple[float, ...] = (0.8, 0.9, 0.95, 1.05, 1.25, 1.5, 2.0)  # c / c* of the threshold sweep
    sweep_samples: int = 500  # random initial X(0) per point of the sweep
    sweep_layers: int = 300  # depth of the sweep (convergence is slow near the threshold)

    def __post_init__(self) -> None:
        freeze_lists(self, "sweep_d_models", "sweep_factors")
        check_int("n_tokens", self.n_tokens, 2, 256)
        check_int("d_model", self.d_model, 2, min(self.n_tokens, 64))
        check_number("a", self.a, 0.0, 1.0, open_low=True, open_high=True)
        threshold = ce.every_rank_threshold(self.d_model, self.a)
        check_number("c", self.c, threshold * 1.01, 1e6)  # equilibria are placed 1 % above c*
        check_int("n_samples", self.n_samples, 1, MAX_DRAWS)
        check_int("n_layers", self.n_layers, 1, MAX_LAYERS)
        check_number("perturbation", self.perturbation, 0.0, 0.1, open_low=True)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_number("rank_rtol", self.rank_rtol, 0.0, 1.0, open_low=True, open_high=True)
        check_number("fixed_point_tol", self.fixed_point_tol, 0.0, 1.0, open_low=True, open_high=True)
        check_ints("sweep_d_models", self.sweep_d_models, 2, min(self.n_tokens, 64))
        check_numbers("sweep_factors", self.sweep_factors, 0.0, 100.0)
        if min(self.sweep_factors) >= 1 or max(self.sweep_factors) <= 1:
            raise ValueError(f"sweep_factors must hold values below and above 1 (c / c*), "
                             f"got {self.sweep_factors!r}")
        check_int("sweep_samples", self.sweep_samples, 1, MAX_DRAWS)
        check_int("sweep_layers", self.sweep_layers, 1, MAX_LAYERS)


@dataclass(frozen=True)
class EquilibriaResult:
    """Everything the equilibria page shows.  Shapes: ``steps`` ``[sample, layer]``, ``final_ranks``
    ``[sample]``."""

    threshold: float  # c* = sqrt(a (2 - a) / (d - 1)) at the page's d and a
    step_floor: float  # rounding floor of an update: eps(float64) * ||X||_F with unit tokens
    equilibria: pd.DataFrame  # per constructed equilibrium: rank, residual, rank and distance after a kick
    fractions: pd.DataFrame  # per rank: fraction of settled random starts, Wilson interval
    steps: Tensor  # ||X(t) - X(t-1)||_F per sample and layer
    final_ranks: Tensor  # numerical rank of the final X (settled samples get their rank, others -1)
    sweep: pd.DataFrame  # per (d, c / c*): c, fraction of starts not collapsed, Wilson interval
    numbers: dict[str, object]  # glued values


def _final_ranks(trajectory: Trajectory, rank_rtol: float) -> tuple[Tensor, Tensor]:
    """Per sample the size of every update and the final numerical rank (-1 while still moving).

    Shapes: -> ``[sample, layer]``, ``[sample]``.
    """
    steps = (trajectory.states[:, 1:] - trajectory.states[:, :-1]).flatten(2).norm(dim=-1)  # [sample, layer]
    ranks = metrics.numerical_rank(trajectory.final, rtol=rank_rtol)  # [sample]
    return steps, torch.where(steps[:, -1] < 1e-9, ranks, -1)


def uncollapsed_fraction(d_model: int, a: float, c: float, n_tokens: int, n_samples: int, n_layers: int,
                         seed: int, rank_rtol: float = 1e-6) -> ce.Proportion:
    """Fraction of Gaussian starts of the star-mask LayerNorm dynamics whose final X has rank > 1."""
    X0 = torch.randn(n_samples, n_tokens, d_model, generator=torch.Generator().manual_seed(seed),
                     dtype=torch.float64)
    final = ce.star_map(X0, ce.every_rank_value_matrix(d_model, a, c), n_layers)  # [sample, token, d_model]
    return wilson_interval(int((metrics.numerical_rank(final, rtol=rank_rtol) > 1).sum()), n_samples)


def compute(config: EquilibriaConfig) -> EquilibriaResult:
    """The constructed equilibria (fixed, and stable in rank under a kick), the ranks reached from random
    starts, and the sweep over c / c* showing that uncollapsed starts appear exactly above c*.

    Shapes: see :class:`EquilibriaResult`.
    """
    W_V = ce.every_rank_value_matrix(config.d_model, config.a, config.c)
    generator = torch.Generator().manual_seed(config.seed)
    rows = []
    for X in ce.every_rank_equilibria(config.n_tokens, config.d_model, config.a, config.c):
        kicked = X + config.perturbation * torch.randn(X.shape, generator=generator, dtype=torch.float64)
        back = ce.star_map(kicked[None], W_V, config.n_layers)[0]  # [token, d_model]
        rows.append({"rank": int(metrics.numerical_rank(X)),
                     "one-layer residual": float((ce.star_map(X[None], W_V)[0] - X).abs().max()),
                     "rank after a kick": int(metrics.numerical_rank(back, rtol=config.rank_rtol)),
                     "distance moved after the kick": float((back - X).norm())})
    X0 = torch.randn(config.n_samples, config.n_tokens, config.d_model, generator=generator,
                     dtype=torch.float64)
    steps, final_ranks = _final_ranks(ce.run_star(X0, W_V, config.n_layers), config.rank_rtol)
    settled = int((final_ranks > 0).sum())
    max_rank = min(config.n_tokens, config.d_model)
    fractions = pd.DataFrame([{"rank": k,
                               **vars(wilson_interval(int((final_ranks == k).sum()), max(settled, 1)))}
                              for k in range(1, max_rank + 1)]).set_index("rank")
    sweep = pd.DataFrame([{"d": d, "c / c*": f, "c": f * ce.every_rank_threshold(d, config.a),
                           **vars(uncollapsed_fraction(d, config.a, f * ce.every_rank_threshold(d, config.a),
                                                       config.n_tokens, config.sweep_samples,
                                                       config.sweep_layers, config.seed, config.rank_rtol))}
                          for d in config.sweep_d_models for f in sorted(config.sweep_factors)])
    below, above = sweep[sweep["c / c*"] < 1], sweep[sweep["c / c*"] > 1]
    numbers = {
        "eq_threshold": ce.every_rank_threshold(config.d_model, config.a), "eq_d_model": config.d_model,
        "eq_a": config.a, "eq_c": config.c, "eq_n_tokens": config.n_tokens, "eq_n_samples": config.n_samples,
        "eq_n_layers": config.n_layers, "eq_max_rank": max_rank, "eq_perturbation": config.perturbation,
        "eq_max_residual": max(r["one-layer residual"] for r in rows),
        "eq_n_unsettled": config.n_samples - settled,
        "eq_sweep_max_below": float(below["fraction"].max()), "eq_sweep_samples": config.sweep_samples,
        "eq_sweep_min_above": float(above[above["c / c*"] == above["c / c*"].max()]["fraction"].min()),
        "eq_sweep_layers": config.sweep_layers, "eq_sweep_factor_low": float(below["c / c*"].max()),
    }
    for k, row in fractions.iterrows():
        numbers[f"eq_fraction_rank{k}"], numbers[f"eq_low_rank{k}"] = (float(row["fraction"]),
                                                                       float(row["low"]))
    numbers["eq_fraction_full"], numbers["eq_low_full"] = numbers[f"eq_fraction_rank{max_rank}"], numbers[
        f"eq_low_rank{max_rank}"]
    step_floor = float(metrics.rounding_floor(math.sqrt(config.n_tokens), torch.float64))
    return EquilibriaResult(numbers["eq_threshold"], step_floor, pd.DataFrame(rows).set_index("rank"),
                            fractions, steps, final_ranks, sweep, numbers)


configure = own_config(EquilibriaConfig)


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers (``eq_*``), its table of constructed equilibria (``eq_equilibrium_table``), its
    figures (the ranks reached, the threshold sweep), claims table (``eq``, :func:`claims`) and closing check
    (``eq_check``, :func:`check`)."""
    config, result, _ = results["main"]
    shown = {"fig-equilibria-ranks": figures.rank_figure(result.fractions, result.steps, result.final_ranks,
                                                         result.step_floor),
             "fig-equilibria-threshold": figures.threshold_figure(result.sweep)}
    equilibria = result.equilibria.style.format({"one-layer residual": "{:.1e}",
                                                 "distance moved after the kick": "{:.1e}"})
    tables = page_claims(results, parameters)
    return Shown(values={**result.numbers, **verdict_clauses(tables["eq"], FINDING)},
                 markdown={"eq_check": check(config, result)}, claims=tables,
                 tables={"eq_equilibrium_table": equilibria},
                 figures=config_figures(shown, config))


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``eq``: :func:`claims`)."""
    config, result, _ = results["main"]
    return {"eq": claims(config, result)}


def _checked(config: EquilibriaConfig, result: EquilibriaResult) -> list[tuple[bool, Claim, str]]:
    """The statements this page checks on its run, one entry each: whether it holds, its claims row, and
    what the closing check says when it does not."""
    eq, n = result.equilibria, result.numbers
    kicked = eq[eq["rank after a kick"] != eq.index]
    missing = result.fractions.index[result.fractions["low"] <= 0].tolist()
    top = result.sweep[result.sweep["c / c*"] == result.sweep["c / c*"].max()]
    sweep_none = top.loc[top["fraction"] == 0, "d"].tolist()
    ranks = [Cell(f"rank {k}", "holds" if row["low"] > 0 else "does not hold",
                  f"{row['fraction']:.3g} (≥ {row['low']:.2g})",
                  f"{row['fraction']:.3g} of the settled starts, 95 % interval from {row['low']:.2g}")
             for k, row in result.fractions.iterrows()]
    checks = [
        (kicked.empty, "LayerNorm dynamics can have equilibria of every rank, each keeping its rank", SOURCE,
         f"the constructed equilibria of ranks 1 to {n['eq_max_rank']}: one-layer residual, and the rank "
         f"after a kick of {config.perturbation:g}", f"{len(eq) - len(kicked)} of {len(eq)} keep their rank; "
         f"residual ≤ {n['eq_max_residual']:.1e}", (),
         f"not converged at this depth (n_layers = {config.n_layers}): after a kick of "
         f"{config.perturbation:g} the "
         + ", ".join(f"rank-{k} equilibrium has rank {r}" for k, r in kicked["rank after a kick"].items())),
        (not missing, "Each rank is reached from a set of initial conditions of positive measure", SOURCE,
         f"{config.n_samples} Gaussian starts, {config.n_layers} layers: share settling at each rank, with "
         f"the lower end of its 95 % interval", f"{len(ranks) - len(missing)} of {len(ranks)} ranks reached; "
         f"{n['eq_n_unsettled']} starts still moving", ranks,
         f"not every rank was reached (n_samples = {config.n_samples}, n_layers = {config.n_layers}, "
         f"{n['eq_n_unsettled']} starts still moving): no settled start of rank "
         f"{', '.join(map(str, missing))}"),
        (n["eq_sweep_max_below"] == 0, "Below the threshold c* every start collapses", CONSTRUCTION,
         f"sweep of c / c*, {config.sweep_layers} layers: largest share of starts apart below c*",
         f"{n['eq_sweep_max_below']:.3f}", (),
         f"not converged at this depth (sweep_layers = {config.sweep_layers}): below c* a fraction "
         f"{n['eq_sweep_max_below']:.3f} of the starts has not collapsed yet"),
        (n["eq_sweep_min_above"] > 0, "Above the threshold c* some starts stay apart, for every width d",
         CONSTRUCTION, f"sweep of c / c*, {config.sweep_samples} starts: smallest share apart over d at "
         f"c / c* = {result.sweep['c / c*'].max():g}", f"{n['eq_sweep_min_above']:.3f}", (),
         f"too few samples (sweep_samples = {config.sweep_samples}): at the sweep's largest c / c* some "
         f"width d has no start that stays apart: " + ", ".join(f"d = {d}" for d in sweep_none)),
    ]
    return [(bool(holds), checked_claim(bool(holds), claim, source, measured, number, cells), words)
            for holds, claim, source, measured, number, cells, words in checks]


def claims(config: EquilibriaConfig, result: EquilibriaResult) -> list[Claim]:
    """The statements this page checks, as claims rows: every rank has an equilibrium that keeps its rank and
    is reached with positive probability; the threshold c* of this book's construction."""
    return [claim for _, claim, _ in _checked(config, result)]


def check(config: EquilibriaConfig, result: EquilibriaResult) -> str:
    """The page's closing check of the construction and the threshold on this run. Asserts that every
    constructed equilibrium is a fixed point; returns the check note (Markdown,
    :func:`~rankcollapse.book.shown.check_note`) on what holds only at enough depth or samples: every
    equilibrium keeps its rank after a kick, every rank has positive probability, below c* no start stays
    apart and at the sweep's largest c some do, for every d."""
    eq = result.equilibria
    assert (eq["one-layer residual"] < config.fixed_point_tol).all(), \
        (f"an equilibrium moves by {eq['one-layer residual'].max():.3g} in one layer "
         f"(fixed_point_tol = {config.fixed_point_tol:g})")
    return check_note([(holds, words) for holds, _, words in _checked(config, result)])
