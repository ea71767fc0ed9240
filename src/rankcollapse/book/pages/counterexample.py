"""The counterexample page (book/theory/counterexample.md): the paper's Fig. 1, two tokens under LayerNorm
that keep full rank — fixed points and their stability, trajectories with and without LayerNorm, basin maps,
a Monte-Carlo fraction and the rotation invariance.

:class:`CounterexampleConfig` has exactly the fields of the page's ``parameters`` cell, with the same
defaults, and is validated once in ``__post_init__``; :func:`configure` builds it from a reader's parameters,
:func:`compute` gives what the page shows, its ``numbers`` the values its prose glues; :func:`show` is what
the page shows of it: those numbers, the clauses of its finding (:data:`FINDING`), the fixed-point
table, its three figures and its closing check (:func:`check`).

Used by: book/theory/counterexample.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_theory.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.book.pages._common import MAX_LAYERS, MAX_DRAWS, MAX_SEED, own_config, verdict_clauses
from rankcollapse.book.plotting import counterexample as figures
from rankcollapse.book.shown import Shown, check_note, checked_claim, config_figures
from rankcollapse.core import metrics
from rankcollapse.core.checks import check_choice, check_int, check_number, freeze_lists
from rankcollapse.theory import counterexample as ce
from rankcollapse.verdicts.claims import Claim


def _point_B(fixed: list[ce.FixedPoint], v1: Tensor) -> ce.FixedPoint | None:
    """The stable fixed point of token 2 other than +-v1 (the full-rank limit B), or None.

    Shapes: v1 ``[2]``.
    """
    return next((q for q in fixed
                 if q.stable and abs(q.point[0] * float(v1[0]) + q.point[1] * float(v1[1])) < 1 - 1e-9),
                None)


SOURCE = "the paper: Fig. 1"
# the clauses of the page's finding (its first paragraph): glue name -> the first words of the claim whose
# verdict and number it pastes (:func:`rankcollapse.book.pages._common.verdict_clauses`)
FINDING = {"ce_finding_plain": "Without LayerNorm both tokens",
           "ce_finding_full_rank": "With LayerNorm some starts",
           "ce_finding_arc": "The starts that keep full rank are an open arc",
           "ce_finding_measure": "The pairs that keep full rank",
           "ce_finding_rotation": "The counterexample does not rely",
           "ce_finding_zero": "A zero activation in the centre token"}


@dataclass(frozen=True)
class CounterexampleConfig:
    """The parameters of ``book/theory/counterexample.md``."""

    # value matrix, x <- LN(x W_V)
    W_V: tuple[tuple[float, float], tuple[float, float]] = ((0.5, 2.0), (0.0, 1.0))
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
            object.__setattr__(self, "W_V",
                               tuple(tuple(row) if isinstance(row, list) else row for row in self.W_V))
        freeze_lists(self, "starts_token2")
        W = self.W_V
        if (not isinstance(W, tuple) or len(W) != 2 or any(not isinstance(r, tuple) or len(r) != 2 for r in W)
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                       for r in W for v in r)):
            raise ValueError(f"W_V must be a 2 x 2 list of finite numbers, e.g. [[0.5, 2.0], [0.0, 1.0]]; "
                             f"got {W!r}")
        try:
            v1 = ce.token1_limit(self.matrix())
        except ValueError as error:
            raise ValueError(f"W_V={W!r}: {error}") from None
        if _point_B(ce.token2_fixed_points(self.matrix(), v1), v1) is None:
            raise ValueError(f"W_V={W!r} has no stable fixed point B besides token 1's limit; with "
                             f"W_V = [[a, c], [0, 1]] choose 0 < a < 1 and c^2 + (1 - a)^2 > 1")
        check_number("start_token1", self.start_token1, -10.0, 10.0)
        if not isinstance(self.starts_token2, tuple) or not self.starts_token2:
            raise ValueError(f"starts_token2 must be a non-empty list of angles in [-10, 10], "
                             f"got {self.starts_token2!r}")
        for angle in self.starts_token2:
            check_number("every entry of starts_token2", angle, -10.0, 10.0)
        for name, low in (("n_layers", 1), ("n_angles", 8), ("basin_layers", 1), ("mc_samples", 1),
                          ("mc_layers", 1)):
            check_int(name, getattr(self, name), low, MAX_DRAWS if name == "mc_samples" else MAX_LAYERS)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_number("rotation", self.rotation, -10.0, 10.0)
        check_choice("dtype", self.dtype, tuple(metrics.DTYPES))

    def matrix(self) -> Tensor:
        """W_V as a float64 tensor.  Shapes: -> ``[2, 2]``."""
        return torch.tensor(self.W_V, dtype=torch.float64)


@dataclass(frozen=True)
class CounterexampleResult:
    """Everything the counterexample page shows.

    Shapes: ``plain``, ``normed``, ``rotated`` ``[start, layer + 1, token, 2]``; ``basin``
    ``[theta1, theta2]``; ``strip`` and ``angles`` ``[theta2]``; ``start_arc`` ``[angle]``.
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
        """The named points of the circle picture: A, -A, B and U (unstable: drawn hollow).
        Shapes: each ``[2]``."""
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


def compute(config: CounterexampleConfig) -> CounterexampleResult:
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
        rows.append({"point": "A" if near_A else ("B" if q.stable else "U"), "x": q.point[0], "y": q.point[1],
                     "lambda": q.scale, "multiplier": q.multiplier,
                     "finite difference": ce.numerical_multiplier(W, v1, q.angle), "stable": q.stable,
                     "one-layer residual": float((ce.pair_map(X, W) - X).abs().max())})
    B = _point_B(fixed, v1)
    U = next(q for q in fixed if not q.stable)
    theta2 = torch.tensor(config.starts_token2, dtype=torch.float64)
    X0 = torch.stack([ce.points_on_circle(torch.full_like(theta2, config.start_token1)),
                      ce.points_on_circle(theta2)], dim=1)  # [start, token, 2]
    plain = ce.run_pair(X0.to(dtype), W.to(dtype), config.n_layers, layernorm=False).states
    normed = ce.run_pair(X0.to(dtype), W.to(dtype), config.n_layers).states  # [start, layer + 1, token, 2]
    ends_at_B = (normed[:, -1, 1] - torch.tensor(B.point, dtype=dtype)).norm(dim=-1) < 1e-6  # [start]
    grid = torch.linspace(0, 2 * math.pi, 721, dtype=torch.float64)[:-1]
    start_arc = grid[ce.basin_map(W, torch.tensor([config.start_token1], dtype=torch.float64), grid,
                                  config.n_layers)[0]]
    angles = torch.linspace(0, 2 * math.pi, config.n_angles + 1, dtype=torch.float64)[:-1]
    angle_A, angle_minus_A = (math.atan2(float(p[1]), float(p[0])) for p in (v1, -v1))
    basin = ce.basin_map(W, angles, angles, config.basin_layers)  # [theta1, theta2]
    strip = ce.basin_map(W, torch.tensor([angle_A], dtype=torch.float64), angles, config.basin_layers)[0]
    estimate = ce.full_rank_fraction(W, config.mc_samples, config.mc_layers, config.seed)
    Z = ce.rotation_matrix(config.rotation)
    rotated = ce.run_pair(X0 @ Z, Z.T @ W @ Z, config.n_layers).states
    A_Z = (v1 @ Z).tolist()
    arc_fraction = _arc_fraction(U.angle, angle_minus_A, angle_A)
    numbers = {
        "ce_v1_x": float(v1[0]), "ce_v1_y": float(v1[1]), "ce_B_x": B.point[0], "ce_B_y": B.point[1],
        "ce_B_multiplier": B.multiplier, "ce_U_x": U.point[0], "ce_U_y": U.point[1],
        "ce_U_multiplier": U.multiplier,
        "ce_gap_plain": float((plain[:, -1, 0] - plain[:, -1, 1]).norm(dim=-1).max()),
        "ce_n_full_rank_starts": int(ends_at_B.sum()), "ce_n_starts": len(config.starts_token2),
        "ce_arc_fraction": arc_fraction, "ce_strip_fraction": float(strip.double().mean()),
        "ce_basin_fraction": float(basin.double().mean()), "ce_basin_layers": config.basin_layers,
        "ce_mc_fraction": estimate.fraction, "ce_mc_low": estimate.low, "ce_mc_high": estimate.high,
        "ce_mc_samples": config.mc_samples, "ce_mc_layers": config.mc_layers,
        "ce_rotation": config.rotation,
        "ce_rotation_gap": ce.rotation_invariance_gap(X0, W, Z, config.n_layers),
        "ce_AZ_x": A_Z[0], "ce_AZ_y": A_Z[1], "ce_AZ_min_abs": min(abs(a) for a in A_Z),
        **_zero_activation_numbers(),
        "ce_max_residual": max(r["one-layer residual"] for r in rows),
        "ce_max_multiplier_error": max(abs(r["finite difference"] - r["multiplier"])
                                       / max(1.0, abs(r["multiplier"])) for r in rows),
    }
    return CounterexampleResult(v1, pd.DataFrame(rows).set_index("point"), B, U, plain, normed, ends_at_B,
                                start_arc, angles, basin, strip, (U.angle, angle_minus_A), estimate, Z,
                                rotated, numbers)


configure = own_config(CounterexampleConfig)


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers (``ce_*``), its fixed-point table (``ce_fixed_point_table``), its figures (Fig. 1,
    the basins, the rotation), claims table (``ce``, :func:`claims`) and closing check (``ce_check``,
    :func:`check`)."""
    config, result, _ = results["main"]
    shown = {"fig-counterexample-fig1": figures.pair_figure(result.plain, result.normed, result.ends_at_B,
                                                            result.start_arc, result.points()),
             "fig-counterexample-basins": figures.basin_figure(result.angles, result.basin, result.strip,
                                                               {"U": result.arc[0], "−A": result.arc[1]}),
             "fig-counterexample-rotation": figures.rotation_figure(result.rotated[:, :, 1], result.ends_at_B,
                                                                    result.start_arc - config.rotation,
                                                                    result.rotated_points())}
    fixed_points = (result.fixed_points.style.format(precision=4)
                    .format("{:.1e}", subset=["one-layer residual"]))
    tables = page_claims(results, parameters)
    return Shown(values={**result.numbers, **verdict_clauses(tables["ce"], FINDING)},
                 markdown={"ce_check": check(config, result)}, claims=tables,
                 tables={"ce_fixed_point_table": fixed_points},
                 figures=config_figures(shown, config))


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``ce``: :func:`claims`)."""
    config, result, _ = results["main"]
    return {"ce": claims(config, result)}


ZERO_LAYERS = 200  # depth of the response's zero-activation example (W4): μ falls about ½ per layer


def _zero_activation_numbers() -> dict[str, float | bool]:
    """The response's second zero-activation example (W4), measured
    (:func:`rankcollapse.theory.counterexample.zero_activation_run`: causal mask, W_V = I, no LayerNorm, a
    zero in token 1): token 1's drift, its zero kept, μ over its start at the last layer, the other tokens'
    distance to token 1 there."""
    run = ce.zero_activation_run(n_layers=ZERO_LAYERS)
    log_drop = float((run.log_mu[:, -1] - run.log_mu[:, 0]).max())  # the least drop over the samples
    return {"ce_zero_drift": run.token1_drift, "ce_zero_kept": run.zero_kept,
            "ce_zero_log10_drop": log_drop / math.log(10), "ce_zero_spread": run.others_to_token1}


def _checked(config: CounterexampleConfig, result: CounterexampleResult) -> list[tuple[bool, Claim, str]]:
    """The statements this page checks on its run, one entry each: whether it holds, its claims row, and
    what the closing check says when it does not."""
    n = result.numbers
    full, starts = n["ce_n_full_rank_starts"], n["ce_n_starts"]
    strip, arc = n["ce_strip_fraction"], n["ce_arc_fraction"]
    checks = [
        (n["ce_gap_plain"] < 1e-6, "Without LayerNorm both tokens converge to one common point", SOURCE,
         "the pictured pairs without LayerNorm: largest distance between the two tokens at the last layer",
         f"{n['ce_gap_plain']:.3g} after {config.n_layers} layers",
         f"not converged at this depth (n_layers = {config.n_layers}): without LayerNorm the pictured pairs "
         f"are still {n['ce_gap_plain']:.3g} apart"),
        (0 < full < starts, "With LayerNorm some starts keep full rank at every depth, others collapse",
         SOURCE, "the pictured starts of token 2 with LayerNorm: how many end at B (full rank)",
         f"{full} of {starts} starts",
         f"{full} of the {starts} pictured starts end at B after {config.n_layers} layers, where the picture "
         f"shows some that do and some that do not (not converged at this depth, or starts_token2 all on one "
         f"side of U)"),
        (abs(strip - arc) < 2.5 / config.n_angles,
         "The starts that keep full rank are an open arc, the basin of the stable point B",
         f"{SOURCE} (our analysis)", "the basin map: share of the circle whose start ends at B against the "
         "predicted arc", f"{strip:.3f} against {arc:.3f} of the circle",
         f"not converged at this depth (basin_layers = {config.basin_layers}, n_angles = {config.n_angles}): "
         f"the computed basin covers {strip:.3f} of the circle, the predicted arc {arc:.3f}"),
        (n["ce_mc_low"] > 0, "The pairs that keep full rank have positive measure", SOURCE,
         f"{config.mc_samples} Gaussian starts, {config.mc_layers} layers: share that keeps full rank, "
         f"lower end of its 95 % interval", f"{n['ce_mc_fraction']:.3g} (≥ {n['ce_mc_low']:.3g})",
         f"too few or too short Monte-Carlo runs (mc_samples = {config.mc_samples}, mc_layers = "
         f"{config.mc_layers}): the full-rank fraction {n['ce_mc_fraction']:.3g} has a lower 95 % bound "
         f"of 0"),
        (n["ce_AZ_min_abs"] > 1e-3, "The counterexample does not rely on a zero activation of token 1",
         "the response: W4", f"the instance rotated by {config.rotation} rad: smallest coordinate of A Z",
         f"{n['ce_AZ_min_abs']:.2g}; the rotated run is the rotated original within "
         f"{n['ce_rotation_gap']:.1e}",
         f"the rotation {config.rotation} puts A Z on an axis (smallest coordinate "
         f"{n['ce_AZ_min_abs']:.2g}), so the rotated picture shows a zero activation"),
    ]
    zero = (n["ce_zero_drift"] == 0 and n["ce_zero_kept"] and n["ce_zero_log10_drop"] < -12
            and n["ce_zero_spread"] < 1e-6)
    checks.append((zero,
                   "A zero activation in the centre token does not stop rank collapse (without LayerNorm)",
                   "the response: W4", f"causal mask, W_V = I, no LayerNorm, token 1 with a zero coordinate, "
                   f"{ZERO_LAYERS} layers: token 1's drift, μ at the last layer over μ at X(0), the other "
                   "tokens' distance to token 1",
                   f"token 1 moves by {n['ce_zero_drift']:.1g} and keeps its zero; μ falls by "
                   f"10^{n['ce_zero_log10_drop']:.0f}; the others end within {n['ce_zero_spread']:.1g} of it",
                   "the zero-activation example did not collapse onto token 1 in its layers"))
    return [(bool(holds), checked_claim(bool(holds), claim, source, measured, number), words)
            for holds, claim, source, measured, number, words in checks]


def claims(config: CounterexampleConfig, result: CounterexampleResult) -> list[Claim]:
    """The statements this page checks, as claims rows: without LayerNorm the pair collapses; with it some
    starts keep full rank, on the predicted arc, with positive measure; the rotated instance has no zero
    activation."""
    return [claim for _, claim, _ in _checked(config, result)]


def check(config: CounterexampleConfig, result: CounterexampleResult) -> str:
    """The page's closing check of the proposition on this run. Asserts that the fixed points are fixed, that
    their stability matches a finite difference and that the rotated picture is the rotated original; returns
    the check note (Markdown, :func:`~rankcollapse.book.shown.check_note`) on what holds only at enough depth
    or samples: without LayerNorm the pictured pairs meet, some but not all pictured starts keep full rank,
    the computed basin is the predicted arc, the full-rank set has positive measure, A Z has no zero entry."""
    n = result.numbers
    assert n["ce_max_residual"] < 1e-12, f"a fixed point moves by {n['ce_max_residual']:.3g} in one layer"
    assert n["ce_max_multiplier_error"] < 1e-5, \
        f"multipliers differ from a finite difference by {n['ce_max_multiplier_error']:.3g}"
    assert n["ce_rotation_gap"] < 1e-10, \
        f"the rotated run differs from the rotated original by {n['ce_rotation_gap']:.3g}"
    return check_note([(holds, words) for holds, _, words in _checked(config, result)])
