"""What the two LayerNorm pages compute: the two-token counterexample (the paper's Fig. 1) and the
equilibria of every rank. One frozen config (= the page's parameters) and one function per page, as in
:mod:`rankcollapse.book.pages.theorems`.

Used by: ``book/theory/counterexample.md``, ``book/theory/equilibria.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.theory import counterexample as ce
from rankcollapse.core import metrics
from rankcollapse.core.checks import check_choice, check_int, check_number
from rankcollapse.theory.dynamics import Trajectory
from rankcollapse.core.checks import check_ints, check_numbers, freeze_lists
from rankcollapse.book.pages.theorems import MAX_LAYERS, MAX_SAMPLES, MAX_SEED


def rotation_matrix(angle: float) -> Tensor:
    """The 2 x 2 rotation by ``angle`` radians (row convention: ``x Z`` rotates x by -angle).

    Shapes: -> ``[2, 2]``.
    """
    return torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]], dtype=torch.float64)


# ---------------------------------------------------------------- the counterexample


def point_B(fixed: list[ce.FixedPoint], v1: Tensor) -> ce.FixedPoint | None:
    """The stable fixed point of token 2 other than +-v1 (the full-rank limit B), or None.

    Shapes: v1 ``[2]``.
    """
    return next((q for q in fixed if q.stable and abs(q.point[0] * float(v1[0]) + q.point[1] * float(v1[1])) < 1 - 1e-9),
                None)


@dataclass(frozen=True)
class CounterexampleConfig:
    """The parameters of ``book/theory/counterexample.md``."""

    W_V: tuple[tuple[float, float], tuple[float, float]] = ((0.5, 2.0), (0.0, 1.0))  # value matrix, x <- LN(x W_V)
    n_layers: int = 60  # depth of the pictured trajectories
    start_token1: float = 1.2  # initial angle of token 1 (radians) in the pictures
    starts_token2: tuple[float, ...] = (2.9, 3.5, 4.1, 1.0, 2.2, 5.5)  # initial angles of token 2 (radians)
    n_angles: int = 240  # grid points per angle in the basin maps
    basin_layers: int = 200  # depth after which the basin map classifies a start
    mc_samples: int = 20000  # Monte-Carlo initial pairs (Gaussian)
    mc_layers: int = 200  # depth of the Monte-Carlo runs
    seed: int = 0  # seed of the torch.Generator (Monte Carlo)
    rotation: float = 0.7  # angle of the orthogonal Z in W_V -> Z^T W_V Z (radians)
    dtype: str = "float64"  # "float64" or "float32"

    def __post_init__(self) -> None:
        if isinstance(self.W_V, list):
            object.__setattr__(self, "W_V", tuple(tuple(row) if isinstance(row, list) else row for row in self.W_V))
        freeze_lists(self, "starts_token2")
        W = self.W_V
        if (not isinstance(W, tuple) or len(W) != 2 or any(not isinstance(r, tuple) or len(r) != 2 for r in W)
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                       for r in W for v in r)):
            raise ValueError(f"W_V must be a 2 x 2 list of finite numbers, e.g. [[0.5, 2.0], [0.0, 1.0]]; got {W!r}")
        try:
            v1 = ce.token1_limit(self.matrix())
        except ValueError as error:
            raise ValueError(f"W_V={W!r}: {error}") from None
        if point_B(ce.token2_fixed_points(self.matrix(), v1), v1) is None:
            raise ValueError(f"W_V={W!r} has no stable fixed point B besides token 1's limit; with "
                             f"W_V = [[a, c], [0, 1]] choose 0 < a < 1 and c^2 + (1 - a)^2 > 1")
        check_number("start_token1", self.start_token1, -10.0, 10.0)
        if not isinstance(self.starts_token2, tuple) or not self.starts_token2:
            raise ValueError(f"starts_token2 must be a non-empty list of angles in [-10, 10], got {self.starts_token2!r}")
        for angle in self.starts_token2:
            check_number("every entry of starts_token2", angle, -10.0, 10.0)
        for name, low in (("n_layers", 1), ("n_angles", 8), ("basin_layers", 1), ("mc_samples", 1), ("mc_layers", 1)):
            check_int(name, getattr(self, name), low, MAX_SAMPLES if name == "mc_samples" else MAX_LAYERS)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_number("rotation", self.rotation, -10.0, 10.0)
        check_choice("dtype", self.dtype, tuple(metrics.DTYPES))

    def matrix(self) -> Tensor:
        """W_V as a float64 tensor.  Shapes: -> ``[2, 2]``."""
        return torch.tensor(self.W_V, dtype=torch.float64)


@dataclass(frozen=True)
class CounterexampleResult:
    """Everything the counterexample page shows.

    Shapes: ``plain``, ``normed``, ``rotated`` ``[start, layer + 1, token, 2]``; ``basin`` ``[theta1, theta2]``;
    ``strip`` and ``angles`` ``[theta2]``; ``start_arc`` ``[angle]``.
    """

    v1: Tensor  # token 1's limit A, the unit left eigenvector of W_V  [2]
    fixed_points: pd.DataFrame  # token 2's fixed points: position, lambda, multipliers, residual
    B: ce.FixedPoint  # the stable fixed point off +-A (full rank)
    U: ce.FixedPoint  # the unstable fixed point bounding B's basin
    plain: Tensor  # pictured trajectories without LayerNorm
    normed: Tensor  # pictured trajectories with LayerNorm
    ends_at_B: Tensor  # [start] bool: token 2 ends at B (full rank)
    start_arc: Tensor  # token 2's starting angles that reach B, token 1 at its pictured start
    angles: Tensor  # the basin grid's angles (radians)
    basin: Tensor  # full rank after basin_layers, over (theta1, theta2)
    strip: Tensor  # full rank after basin_layers, token 1 at A, over theta2
    arc: tuple[float, float]  # the analytic basin of B with token 1 at A: from U to -A (radians)
    monte_carlo: ce.Proportion  # Gaussian pairs that keep full rank
    Z: Tensor  # the rotation  [2, 2]
    rotated: Tensor  # trajectories with Z^T W_V Z from X(0) Z
    numbers: dict[str, object]  # glued values

    def points(self) -> dict[str, Tensor]:
        """The named points of the circle picture: A, -A, B and U (unstable: drawn hollow).  Shapes: each ``[2]``."""
        B, U = (torch.tensor(q.point, dtype=torch.float64) for q in (self.B, self.U))
        return {"A": self.v1, "−A": -self.v1, "B": B, "U": U}

    def rotated_points(self) -> dict[str, Tensor]:
        """A Z and B Z, the limits of the rotated picture.  Shapes: each ``[2]``."""
        points = self.points()
        return {"AZ": points["A"] @ self.Z, "BZ": points["B"] @ self.Z}


def _arc_fraction(start: float, end: float, avoid: float) -> float:
    """Length / 2 pi of the arc from ``start`` to ``end`` (radians) that does not contain ``avoid``."""
    ccw = (end - start) % (2 * math.pi)  # counter-clockwise length
    return (2 * math.pi - ccw if (avoid - start) % (2 * math.pi) < ccw else ccw) / (2 * math.pi)


def counterexample_page(config: CounterexampleConfig) -> CounterexampleResult:
    """Fixed points with their stability (checked against one layer and a finite difference), the pictured
    trajectories with and without LayerNorm, the basin maps, the Monte-Carlo fraction and the rotation.

    Shapes: see :class:`CounterexampleResult`.
    """
    W, dtype = config.matrix(), metrics.resolve_dtype(config.dtype)
    v1 = ce.token1_limit(W)
    fixed = ce.token2_fixed_points(W, v1)
    rows = []
    for q in fixed:
        X = torch.stack([v1, torch.tensor(q.point, dtype=torch.float64)])[None]  # [1, token, 2]
        near_A = abs(q.point[0] * float(v1[0]) + q.point[1] * float(v1[1])) > 1 - 1e-9
        rows.append({"point": "A" if near_A else ("B" if q.stable else "U"), "x": q.point[0], "y": q.point[1], "lambda": q.scale, "multiplier": q.multiplier,
                     "finite difference": ce.numerical_multiplier(W, v1, q.angle), "stable": q.stable,
                     "one-layer residual": float((ce.pair_map(X, W) - X).abs().max())})
    B = point_B(fixed, v1)
    U = next(q for q in fixed if not q.stable)
    theta2 = torch.tensor(config.starts_token2, dtype=torch.float64)
    X0 = torch.stack([ce.points_on_circle(torch.full_like(theta2, config.start_token1)),
                      ce.points_on_circle(theta2)], dim=1)  # [start, token, 2]
    plain = ce.run_pair(X0.to(dtype), W.to(dtype), config.n_layers, layernorm=False).states
    normed = ce.run_pair(X0.to(dtype), W.to(dtype), config.n_layers).states  # [start, layer + 1, token, 2]
    ends_at_B = (normed[:, -1, 1] - torch.tensor(B.point, dtype=dtype)).norm(dim=-1) < 1e-6  # [start]
    grid = torch.linspace(0, 2 * math.pi, 721, dtype=torch.float64)[:-1]
    start_arc = grid[ce.basin_map(W, torch.tensor([config.start_token1], dtype=torch.float64), grid, config.n_layers)[0]]
    angles = torch.linspace(0, 2 * math.pi, config.n_angles + 1, dtype=torch.float64)[:-1]
    angle_A, angle_minus_A = (math.atan2(float(p[1]), float(p[0])) for p in (v1, -v1))
    basin = ce.basin_map(W, angles, angles, config.basin_layers)  # [theta1, theta2]
    strip = ce.basin_map(W, torch.tensor([angle_A], dtype=torch.float64), angles, config.basin_layers)[0]
    estimate = ce.full_rank_fraction(W, config.mc_samples, config.mc_layers, config.seed)
    Z = rotation_matrix(config.rotation)
    rotated = ce.run_pair(X0 @ Z, Z.T @ W @ Z, config.n_layers).states
    A_Z = (v1 @ Z).tolist()
    arc_fraction = _arc_fraction(U.angle, angle_minus_A, angle_A)
    numbers = {
        "ce_v1_x": float(v1[0]), "ce_v1_y": float(v1[1]), "ce_B_x": B.point[0], "ce_B_y": B.point[1],
        "ce_B_multiplier": B.multiplier, "ce_U_x": U.point[0], "ce_U_y": U.point[1], "ce_U_multiplier": U.multiplier,
        "ce_gap_plain": float((plain[:, -1, 0] - plain[:, -1, 1]).norm(dim=-1).max()),
        "ce_n_full_rank_starts": int(ends_at_B.sum()), "ce_n_starts": len(config.starts_token2),
        "ce_arc_fraction": arc_fraction, "ce_strip_fraction": float(strip.double().mean()),
        "ce_basin_fraction": float(basin.double().mean()), "ce_basin_layers": config.basin_layers,
        "ce_mc_fraction": estimate.fraction, "ce_mc_low": estimate.low, "ce_mc_high": estimate.high,
        "ce_mc_samples": config.mc_samples, "ce_mc_layers": config.mc_layers,
        "ce_rotation": config.rotation, "ce_rotation_gap": ce.rotation_invariance_gap(X0, W, Z, config.n_layers),
        "ce_AZ_x": A_Z[0], "ce_AZ_y": A_Z[1], "ce_AZ_min_abs": min(abs(a) for a in A_Z),
        "ce_max_residual": max(r["one-layer residual"] for r in rows),
        "ce_max_multiplier_error": max(abs(r["finite difference"] - r["multiplier"]) / max(1.0, abs(r["multiplier"]))
                                       for r in rows),
    }
    return CounterexampleResult(v1, pd.DataFrame(rows).set_index("point"), B, U, plain, normed, ends_at_B, start_arc, angles, basin,
                                strip, (U.angle, angle_minus_A), estimate, Z, rotated, numbers)


# ---------------------------------------------------------------- equilibria of every rank


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
        check_int("n_samples", self.n_samples, 1, MAX_SAMPLES)
        check_int("n_layers", self.n_layers, 1, MAX_LAYERS)
        check_number("perturbation", self.perturbation, 0.0, 0.1, open_low=True)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_number("rank_rtol", self.rank_rtol, 0.0, 1.0, open_low=True, open_high=True)
        check_number("fixed_point_tol", self.fixed_point_tol, 0.0, 1.0, open_low=True, open_high=True)
        check_ints("sweep_d_models", self.sweep_d_models, 2, min(self.n_tokens, 64))
        check_numbers("sweep_factors", self.sweep_factors, 0.0, 100.0)
        if min(self.sweep_factors) >= 1 or max(self.sweep_factors) <= 1:
            raise ValueError(f"sweep_factors must hold values below and above 1 (c / c*), got {self.sweep_factors!r}")
        check_int("sweep_samples", self.sweep_samples, 1, MAX_SAMPLES)
        check_int("sweep_layers", self.sweep_layers, 1, MAX_LAYERS)


@dataclass(frozen=True)
class EquilibriaResult:
    """Everything the equilibria page shows.  Shapes: ``steps`` ``[sample, layer]``, ``final_ranks`` ``[sample]``."""

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
    X0 = torch.randn(n_samples, n_tokens, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    final = ce.star_map(X0, ce.every_rank_value_matrix(d_model, a, c), n_layers)  # [sample, token, d_model]
    return ce.wilson_interval(int((metrics.numerical_rank(final, rtol=rank_rtol) > 1).sum()), n_samples)


def equilibria_page(config: EquilibriaConfig) -> EquilibriaResult:
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
    X0 = torch.randn(config.n_samples, config.n_tokens, config.d_model, generator=generator, dtype=torch.float64)
    steps, final_ranks = _final_ranks(ce.run_star(X0, W_V, config.n_layers), config.rank_rtol)
    settled = int((final_ranks > 0).sum())
    max_rank = min(config.n_tokens, config.d_model)
    fractions = pd.DataFrame([{"rank": k, **vars(ce.wilson_interval(int((final_ranks == k).sum()), max(settled, 1)))}
                              for k in range(1, max_rank + 1)]).set_index("rank")
    sweep = pd.DataFrame([{"d": d, "c / c*": f, "c": f * ce.every_rank_threshold(d, config.a),
                           **vars(uncollapsed_fraction(d, config.a, f * ce.every_rank_threshold(d, config.a),
                                                       config.n_tokens, config.sweep_samples, config.sweep_layers,
                                                       config.seed, config.rank_rtol))}
                          for d in config.sweep_d_models for f in sorted(config.sweep_factors)])
    below, above = sweep[sweep["c / c*"] < 1], sweep[sweep["c / c*"] > 1]
    numbers = {
        "eq_threshold": ce.every_rank_threshold(config.d_model, config.a), "eq_d_model": config.d_model,
        "eq_a": config.a, "eq_c": config.c, "eq_n_tokens": config.n_tokens, "eq_n_samples": config.n_samples,
        "eq_n_layers": config.n_layers, "eq_max_rank": max_rank, "eq_perturbation": config.perturbation,
        "eq_max_residual": max(r["one-layer residual"] for r in rows), "eq_n_unsettled": config.n_samples - settled,
        "eq_sweep_max_below": float(below["fraction"].max()), "eq_sweep_samples": config.sweep_samples,
        "eq_sweep_min_above": float(above[above["c / c*"] == above["c / c*"].max()]["fraction"].min()),
        "eq_sweep_layers": config.sweep_layers, "eq_sweep_factor_low": float(below["c / c*"].max()),
    }
    for k, row in fractions.iterrows():
        numbers[f"eq_fraction_rank{k}"], numbers[f"eq_low_rank{k}"] = float(row["fraction"]), float(row["low"])
    numbers["eq_fraction_full"], numbers["eq_low_full"] = numbers[f"eq_fraction_rank{max_rank}"], numbers[
        f"eq_low_rank{max_rank}"]
    step_floor = float(metrics.rounding_floor(math.sqrt(config.n_tokens), torch.float64))
    return EquilibriaResult(numbers["eq_threshold"], step_floor, pd.DataFrame(rows).set_index("rank"), fractions, steps,
                            final_ranks, sweep, numbers)
