"""The LayerNorm counterexample (the paper's Fig. 1) and equilibria of every rank.

Row convention ``x <- LN(x W_V)`` with uniform attention (W_Q = W_K = 0) and the causal mask on N = 2
tokens: token 1 follows ``x1 <- LN(x1 W_V)`` and converges to a left eigenvector v1 of W_V; token 2
follows ``x2 <- LN(v1 W_V + x2 W_V)`` once token 1 has arrived. Mechanism (author response, W4): W_V
has a v2 with ``v2 W_V = v1 + v2`` (up to scale), so a -v2 component of token 2 cancels token 1's pull
and LayerNorm keeps the cancellation alive. The paper's matrices are unknown; ``COUNTEREXAMPLE_W_V``
is our instance. Token 1 -> (0, 1); token 2 -> B ~ (-0.2585, -0.9660) from an open arc of starts.

Equilibria of every rank: the star mask (token 1 attends to itself, every other token to token 1 and
itself) with ``W_V = [[a I_{d-1}, c 1], [0, 1]]`` (0 < a < 1); each token plays the 2-D picture in its
own plane span(u, e_d), u the direction of its first d - 1 coordinates; uncollapsed equilibria exist
exactly when ``c > sqrt(a (2 - a) / (d - 1))`` (:func:`every_rank_threshold`).
Used by ``book/theory/counterexample.md`` and ``book/theory/equilibria.md`` (via
:mod:`rankcollapse.book.pages.layernorm`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core import masks
from rankcollapse.core.metrics import mu
from rankcollapse.core.stats import Proportion, wilson_interval
from rankcollapse.theory.dynamics import DynamicsConfig, Trajectory, sample_weights, simulate

COUNTEREXAMPLE_W_V = torch.tensor([[0.5, 2.0], [0.0, 1.0]], dtype=torch.float64)  # ours, not the paper's


def rotation_matrix(angle: float) -> Tensor:
    """The 2 x 2 rotation by ``angle`` radians (row convention: ``x Z`` rotates x by -angle).

    Shapes: -> ``[2, 2]``.
    """
    return torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]],
                        dtype=torch.float64)


def _check_pair_matrix(W_V: Tensor) -> None:
    if W_V.shape != (2, 2) or not bool(torch.isfinite(W_V).all()):
        raise ValueError(f"W_V must be a finite 2 x 2 matrix, got shape {tuple(W_V.shape)}")


def run_pair(X0: Tensor, W_V: Tensor, n_layers: int, layernorm: bool = True,
             keep_states: bool = True) -> Trajectory:
    """Two tokens, causal mask, uniform attention; with the unit-norm LayerNorm or without any norm.

    Shapes: X0 ``[sample, 2, 2]``, W_V ``[2, 2]``.
    """
    _check_pair_matrix(W_V)
    zero = torch.zeros(2, 2, dtype=X0.dtype)
    config = DynamicsConfig(norm="unit" if layernorm else "none", keep_states=keep_states)
    return simulate(X0, masks.causal_mask(2), zero, zero, W_V.to(X0.dtype), n_layers, config)


def points_on_circle(theta: Tensor) -> Tensor:
    """Shapes: theta ``[...]`` (radians) -> ``[..., 2]`` = (cos, sin)."""
    return torch.stack([torch.cos(theta), torch.sin(theta)], dim=-1)


def _pairs_from_angles(theta1: Tensor, theta2: Tensor) -> Tensor:
    """All pairs (token 1 at theta1[i], token 2 at theta2[j]). Shapes: ``[n]``, ``[m]``
    -> ``[n * m, 2, 2]``."""
    t1, t2 = torch.meshgrid(theta1, theta2, indexing="ij")  # [n, m] each
    return torch.stack([points_on_circle(t1), points_on_circle(t2)], dim=-2).reshape(-1, 2, 2)  # [n*m, 2, 2]


def token1_limit(W_V: Tensor) -> Tensor:
    """The unit left eigenvector of W_V for its largest real positive eigenvalue (sign: last entry >= 0).

    Shapes: W_V ``[2, 2]`` -> ``[2]``.
    """
    _check_pair_matrix(W_V)
    eigvals, eigvecs = np.linalg.eig(W_V.double().numpy().T)  # left eigenvectors = right ones of W_V^T
    real = [k for k in range(eigvals.shape[0]) if abs(eigvals[k].imag) < 1e-12 and eigvals[k].real > 0]
    if not real:
        raise ValueError("W_V has no real positive eigenvalue; token 1 has no fixed point on the circle")
    k = max(real, key=lambda k: eigvals[k].real)
    v = torch.from_numpy(eigvecs[:, k].real.copy())
    v = v / torch.linalg.vector_norm(v)
    return -v if float(v[-1]) < 0 or (float(v[-1]) == 0 and float(v[0]) < 0) else v


@dataclass(frozen=True)
class FixedPoint:
    """A fixed point of token 2's circle map ``x <- LN(v1 W_V + x W_V)``."""

    angle: float  # position on the circle, radians in (-pi, pi]
    point: tuple[float, float]  # (cos angle, sin angle)
    scale: float  # lambda > 0 with v1 W_V + x W_V = lambda x
    multiplier: float  # derivative of the circle map at the point: |multiplier| < 1 is stable
    stable: bool  # |multiplier| < 1


def token2_fixed_points(W_V: Tensor, v1: Tensor) -> list[FixedPoint]:
    """All fixed points of token 2's circle map, from the roots of a quartic (analytic), sorted by angle.

    With ``g(x) = p + x W_V`` (``p = v1 W_V``) and ``x = (cos t, sin t)``, ``x`` is fixed iff
    ``g x ∥ x`` with a positive factor. The cross product ``g_1 sin t - g_2 cos t`` is a trigonometric
    polynomial of degree 2, i.e. a quartic in ``z = e^{it}``; its unimodular roots with ``<g, x> > 0``
    are the fixed points (``g = 0`` is the point where LayerNorm is undefined, excluded). The
    multiplier is ``tau W_V tau^T / lambda`` with tau the unit tangent.

    Shapes: W_V ``[2, 2]``, v1 ``[2]``.
    """
    _check_pair_matrix(W_V)
    W = W_V.double().numpy()
    p = v1.double().numpy() @ W
    # cross(t) = c0 + a1 cos t + b1 sin t + a2 cos 2t + b2 sin 2t
    c0, a1, b1 = (W[1, 0] - W[0, 1]) / 2, -p[1], p[0]
    a2, b2 = -(W[1, 0] + W[0, 1]) / 2, (W[0, 0] - W[1, 1]) / 2
    quartic = [a2 / 2 + b2 / 2j, a1 / 2 + b1 / 2j, c0, a1 / 2 - b1 / 2j, a2 / 2 - b2 / 2j]  # z^4 ... z^0
    points = []
    for z in np.roots(quartic):
        if abs(abs(z) - 1) > 1e-6:
            continue
        t = float(np.angle(z))
        x = np.array([math.cos(t), math.sin(t)])
        g = p + x @ W
        scale = float(g @ x)
        if scale <= 1e-9 or any(abs(t - q.angle) < 1e-7 for q in points):
            continue
        tau = np.array([-x[1], x[0]])
        multiplier = float(tau @ W @ tau) / scale
        points.append(FixedPoint(t, (float(x[0]), float(x[1])), scale, multiplier, abs(multiplier) < 1))
    return sorted(points, key=lambda q: q.angle)


def pair_map(X: Tensor, W_V: Tensor) -> Tensor:
    """One layer of the LayerNorm pair dynamics. Shapes: X ``[sample, 2, 2]`` -> ``[sample, 2, 2]``."""
    return run_pair(X, W_V, 1, keep_states=False).final


def numerical_multiplier(W_V: Tensor, v1: Tensor, angle: float, h: float = 1e-6) -> float:
    """Central finite difference of token 2's circle map at ``angle`` (token 1 held at v1).

    Independent of :func:`token2_fixed_points`: it runs the dynamics itself. Shapes: W_V ``[2, 2]``,
    v1 ``[2]``.
    """
    angles = torch.tensor([angle - h, angle + h], dtype=torch.float64)
    X = torch.stack([v1.to(torch.float64).expand(2, 2), points_on_circle(angles)], dim=1)  # [2, token, 2]
    images = pair_map(X, W_V)[:, 1]  # [2, 2]
    moved = torch.atan2(images[:, 1], images[:, 0])  # [2]
    return float(torch.remainder(moved[1] - moved[0] + math.pi, 2 * math.pi) - math.pi) / (2 * h)


def full_rank(final: Tensor, tol: float = 1e-6) -> Tensor:
    """True where the two tokens end apart (rank 2 for unit tokens that are not +-equal).

    Shapes: final ``[sample, 2, 2]`` -> ``[sample]`` bool.
    """
    return torch.linalg.det(final).abs() > tol


def basin_map(W_V: Tensor, theta1: Tensor, theta2: Tensor, n_layers: int) -> Tensor:
    """Which starting pairs on the circle keep full rank after ``n_layers`` LayerNorm layers.

    Shapes: theta1 ``[n]``, theta2 ``[m]`` -> ``[n, m]`` bool.
    """
    final = run_pair(_pairs_from_angles(theta1, theta2), W_V, n_layers, keep_states=False).final
    return full_rank(final).reshape(theta1.shape[0], theta2.shape[0])  # [n, m]


def full_rank_fraction(W_V: Tensor, n_samples: int, n_layers: int, seed: int) -> Proportion:
    """Fraction of Gaussian initial pairs that keep full rank under the LayerNorm pair dynamics.

    Shapes: W_V ``[2, 2]``; the pairs are ``[sample, 2, 2]`` internally.
    """
    if n_samples < 1 or n_layers < 1:
        raise ValueError(f"n_samples={n_samples} and n_layers={n_layers} must be >= 1")
    generator = torch.Generator().manual_seed(seed)
    X0 = torch.randn(n_samples, 2, 2, generator=generator, dtype=torch.float64)  # [sample, token, d_model]
    final = run_pair(X0, W_V, n_layers, keep_states=False).final
    return wilson_interval(int(full_rank(final).sum()), n_samples)


def rotation_invariance_gap(X0: Tensor, W_V: Tensor, Z: Tensor, n_layers: int) -> float:
    """max_t ||X_Z(t) - X(t) Z|| where X_Z runs with ``Z^T W_V Z`` from ``X0 Z`` (response, Q2).

    Shapes: X0 ``[sample, 2, 2]``, W_V and Z ``[2, 2]`` (Z orthogonal).
    """
    plain = run_pair(X0, W_V, n_layers).states
    rotated = run_pair(X0 @ Z, Z.T @ W_V @ Z, n_layers).states
    return float((rotated - plain @ Z).abs().max())


def _star_mask(n_tokens: int) -> Tensor:
    """Token 1 (index 0) attends only to itself; every other token to token 1 and itself.

    Shapes: -> ``[token, token]`` bool.
    """
    matrix = torch.zeros(n_tokens, n_tokens, dtype=torch.bool)
    matrix[:, 0] = True
    return masks.mask_from_matrix(matrix)


def every_rank_value_matrix(d_model: int, a: float, c: float) -> Tensor:
    """``W_V = [[a I_{d-1}, c 1], [0, 1]]``. Shapes: -> ``[d_model, d_model]``."""
    if d_model < 2 or not 0 < a < 1:
        raise ValueError(f"d_model={d_model} must be >= 2 and a={a} must lie in (0, 1)")
    W = torch.zeros(d_model, d_model, dtype=torch.float64)
    W[:-1, :-1] = a * torch.eye(d_model - 1, dtype=torch.float64)
    W[:-1, -1] = c
    W[-1, -1] = 1.0
    return W


def every_rank_threshold(d_model: int, a: float) -> float:
    """The coupling ``c*`` above which the star-mask LayerNorm dynamics has uncollapsed equilibria.

    A token ``x = (y, beta)`` keeps the direction ``u`` of ``y``; in the plane span(u, e_d) it plays the
    2-D picture with ``W = [[a, c 1^T u], [0, 1]]``, which has the fixed points off e_d exactly when the line
    ``c (1^T u) p + (1 - a) q = -1`` meets the unit circle: ``(c 1^T u)^2 + (1 - a)^2 > 1``. Since
    ``max_u 1^T u = sqrt(d - 1)`` (at ``u = 1 / sqrt(d - 1)``), some direction (an open set of them) keeps
    a token apart exactly when ``c > c* = sqrt(a (2 - a) / (d - 1))``; below it every start collapses.

    >>> round(every_rank_threshold(3, 0.2), 4)
    0.4243
    """
    if d_model < 2 or not 0 < a < 1:
        raise ValueError(f"d_model={d_model} must be >= 2 and a={a} must lie in (0, 1)")
    return math.sqrt(a * (2 - a) / (d_model - 1))


def _plane_directions(d_model: int, a: float, c: float, count: int) -> Tensor:
    """``count`` independent unit directions u in R^{d-1} with ``(c 1^T u)^2 + (1 - a)^2 > 1``:
    the axes e_k when c allows it, else ``normalize(e_k + lam 1)`` with the smallest working lam.

    Shapes: -> ``[count, d_model - 1]``.
    """
    need = math.sqrt(a * (2 - a)) * (1 + 1e-3) / abs(c)  # 1^T u must exceed this
    eye = torch.eye(d_model - 1, dtype=torch.float64)[:count]  # [count, d - 1]
    for lam in [0.0] + [2.0**k for k in range(-6, 21)]:
        u = eye + lam
        u = u / torch.linalg.vector_norm(u, dim=-1, keepdim=True)  # [count, d - 1]
        if float(u.sum(dim=-1).min()) > need:
            return u
    raise ValueError(f"c={c} is too close to the threshold {every_rank_threshold(d_model, a):.6f} to place "
                     f"equilibria; choose c further above it")


def every_rank_equilibria(n_tokens: int, d_model: int, a: float, c: float) -> list[Tensor]:
    """One equilibrium of each rank 1..min(n_tokens, d_model) of the star-mask LayerNorm dynamics.

    Token 1 sits at e_d; for rank r, tokens 2..r sit at the stable point B of the 2-D picture in the
    planes span(u_k, e_d) of r - 1 independent directions u_k (the axes e_k when
    ``c^2 + (1 - a)^2 > 1``), and the remaining tokens at e_d. Needs ``c > every_rank_threshold``.

    Shapes: -> list of ``[token, d_model]``.
    """
    threshold = every_rank_threshold(d_model, a)
    if not abs(c) > threshold:
        raise ValueError(f"a={a}, c={c} give no second stable point in any plane; choose |c| > "
                         f"sqrt(a (2 - a) / (d_model - 1)) = {threshold:.4f}")
    max_rank = min(n_tokens, d_model)
    directions = _plane_directions(d_model, a, c, max(1, max_rank - 1))  # [rank - 1, d - 1]
    equilibria = []
    for rank in range(1, max_rank + 1):
        X = torch.zeros(n_tokens, d_model, dtype=torch.float64)
        X[:, -1] = 1.0
        for k in range(rank - 1):
            u = directions[k]  # [d - 1]
            plane = torch.tensor([[a, c * float(u.sum())], [0.0, 1.0]], dtype=torch.float64)
            B = next(q for q in token2_fixed_points(plane, torch.tensor([0.0, 1.0])) if q.stable
                     and abs(q.point[0]) > 1e-9)
            X[k + 1, :-1], X[k + 1, -1] = B.point[0] * u, B.point[1]
        equilibria.append(X)
    return equilibria


def run_star(X0: Tensor, W_V: Tensor, n_layers: int, keep_states: bool = True) -> Trajectory:
    """The star-mask LayerNorm dynamics with uniform attention.

    Shapes: X0 ``[sample, token, d_model]``, W_V ``[d_model, d_model]``.
    """
    zero = torch.zeros_like(W_V)
    config = DynamicsConfig(norm="unit", keep_states=keep_states)
    return simulate(X0, _star_mask(X0.shape[-2]), zero, zero, W_V, n_layers, config)


def star_map(X: Tensor, W_V: Tensor, n_layers: int = 1) -> Tensor:
    """``n_layers`` of :func:`run_star`. Shapes: X ``[sample, token, d_model]`` -> same."""
    return run_star(X, W_V, n_layers, keep_states=False).final


def value_path(W_from: Tensor, W_to: Tensor, s: float) -> Tensor:
    """The value matrix ``(1 - s) W_from + s W_to`` on the straight path. Shapes: ``[2, 2]`` -> ``[2, 2]``."""
    _check_pair_matrix(W_from)
    _check_pair_matrix(W_to)
    return (1 - s) * W_from.double() + s * W_to.double()


def path_mu(X0: Tensor, W_from: Tensor, W_to: Tensor, s: Tensor, n_layers: int) -> Tensor:
    """mu(X(n_layers)) of the LayerNorm pair dynamics with W_V = :func:`value_path` at every ``s``, all
    points in one batch (response Q1: token trajectories are not continuous in the value matrices under
    LayerNorm).

    Shapes: X0 ``[sample, 2, 2]``, s ``[point]`` -> ``[point, sample]``.
    """
    _check_pair_matrix(W_from)
    _check_pair_matrix(W_to)
    n_points, n_samples = s.shape[0], X0.shape[0]
    weights = (1 - s.double())[:, None, None] * W_from.double() + s.double()[:, None, None] * W_to.double()
    # [point*sample, layer, 2, 2]
    W_V = weights.repeat_interleave(n_samples, dim=0)[:, None].expand(-1, n_layers, 2, 2)
    zero = torch.zeros(2, 2, dtype=torch.float64)
    final = simulate(X0.double().repeat(n_points, 1, 1), masks.causal_mask(2), zero, zero, W_V, n_layers,
                     DynamicsConfig(norm="unit", keep_states=False)).final  # [point * sample, 2, 2]
    return mu(final).reshape(n_points, n_samples)


def has_second_stable_point(W_V: Tensor, tol: float = 1e-6) -> bool:
    """Whether token 2's circle map (token 1 at its limit v1) has a stable fixed point other than v1:
    the condition for the pair to end apart from some starts."""
    v1 = token1_limit(W_V)
    return any(q.stable
               and float(torch.linalg.vector_norm(torch.tensor(q.point, dtype=torch.float64) - v1)) > tol
               for q in token2_fixed_points(W_V, v1))


def locate_switch(predicate, low: float, high: float, rounds: int, points: int = 16) -> tuple[float, float]:
    """Shrink ``[low, high]`` (predicate false at low, true at high, switching once) around the switch:
    each round evaluates ``points`` inner points in one call and keeps the interval between the last false
    and the first true one, ``points + 1`` times shorter. ``predicate``: s ``[k]`` -> bool ``[k]``."""
    ends = predicate(torch.tensor([low, high], dtype=torch.float64))
    if bool(ends[0]) or not bool(ends[1]):
        raise ValueError(f"the predicate must be false at low={low} and true at high={high}")
    for _ in range(rounds):
        grid = torch.linspace(low, high, points + 2, dtype=torch.float64)
        true = torch.cat([torch.tensor([False]), predicate(grid[1:-1]), torch.tensor([True])])
        first = int(true.nonzero()[0])
        low, high = float(grid[first - 1]), float(grid[first])
    return low, high


@dataclass(frozen=True)
class ZeroActivation:
    """The response's second example (W4), measured: a zero in the centre token does not stop the collapse.

    Shapes: log_mu [sample, layer + 1] (natural log of μ, tracked exactly).
    """

    log_mu: Tensor  # μ over the layers, exactly below the rounding floor
    token1_drift: float  # largest change of token 1 over the layers and samples (0: it stays where it began)
    zero_kept: bool  # token 1's zero coordinate is still exactly 0 at the end
    others_to_token1: float  # largest distance of a token to token 1 at the end, over token 1's norm


def zero_activation_run(n_tokens: int = 8, d_model: int = 4, n_layers: int = 200, n_samples: int = 16,
                        seed: int = 0) -> ZeroActivation:
    """The response's example (W4): the causal mask, ``W_V = I``, no LayerNorm, random W_Q, W_K (PyTorch's
    default U(±1/√d), bounded: A2), and a token 1 whose first coordinate is 0. Token 1 attends only to itself,
    so it stays where it began — zero activation included, and never passed on — while every other token is
    pulled to it: Theorem 1 applies (the causal mask's centre is token 1), and μ → 0.

    Shapes: -> log_mu [sample, layer + 1].
    """
    generator = torch.Generator().manual_seed(seed)
    X0 = torch.randn(n_samples, n_tokens, d_model, generator=generator, dtype=torch.float64)
    X0[:, 0, 0] = 0.0  # token 1's zero activation
    W_Q, W_K = (sample_weights("uniform", d_model, n_layers, n_samples, generator) for _ in range(2))
    W_V = torch.eye(d_model, dtype=torch.float64)
    run = simulate(X0, masks.build_mask("causal", n_tokens), W_Q, W_K, W_V, n_layers)
    token1 = run.states[:, :, 0]  # [sample, layer + 1, d_model]
    final = run.final  # [sample, token, d_model]
    spread = (final - final[:, :1]).norm(dim=-1).amax() / final[:, 0].norm(dim=-1).amin()
    return ZeroActivation(run.log_mu_exact, float((token1 - token1[:, :1]).abs().amax()),
                          bool((final[:, 0, 0] == 0).all()), float(spread))
