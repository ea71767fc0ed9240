"""How fast μ falls: exponential against doubly exponential decay, and why the linear case's rate is not
always its second eigenvalue (the reviewers' questions page, ``book/response/reviewers.md``).

* :func:`complete_mask_log_mu` follows pure attention under the **complete** mask far below the rounding
  floor. Write ``X = 1 m^T + sigma R`` (m the token mean, R the centred part with ``||R||_F = 1``, sigma =
  mu kept as its log) and ``M = W_Q W_K^T / sqrt(temperature)``. The logits ``x_i M x_j^T`` are, up to
  row constants (which the softmax ignores), ``a_j + b_ij`` with ``a_j = sigma m M r_j^T`` the same in every
  row and ``b_ij = sigma^2 r_i M r_j^T``. So ``A = 1 s^T + E`` with ``s = softmax(a)`` row-common and
  ``E_ij = s_j (e_ij - sum_k s_k e_ik) / (1 + sum_k s_k e_ik)``, ``e = expm1(b)``: E is exact to rounding
  relative to its own size, of order sigma^2. Centring removes every row-common term and ``1^T R = 0``,
  hence ``R(t+1) = (I - 11^T/N) E R W_V``: ``mu(t+1) ~ c mu(t)^3`` — cubic convergence, doubly
  exponential decay with base 3 — computed as ``sigma^3`` times a product of order-one matrices, so it can
  be followed to any depth.
* :func:`loglog_slope` tells the two decays apart: for ``mu(t) = mu(0) q^t`` the quantity
  ``log(-log(mu(t) / mu(0)))`` grows like ``log t`` (its slope per layer goes to 0); for
  ``mu(t) ~ exp(-c b^t)`` it grows linearly with slope ``log b``.
* :func:`jordan_ranks` gives the Jordan structure of a mask's uniform attention matrix exactly (rational
  arithmetic): the ranks of ``(A - lambda I)^k``, from which the sizes of its Jordan blocks follow.

Used by: the reviewers' questions page (:mod:`rankcollapse.book.pages._reviewers_theory`,
:mod:`rankcollapse.book.pages.reviewers`), :mod:`rankcollapse.book.pages.theorem1`; tests/unit/test_rates.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch
from torch import Tensor

from rankcollapse.core.stats import fit_decay_rate

# a log(-log mu) slope above this per layer (base b > e^0.5 = 1.65) reads as doubly exponential
DOUBLE_SLOPE = 0.5




def complete_mask_log_mu(X0: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, n_layers: int,
                         temperature: float = 1.0) -> Tensor:
    """Natural log of mu(X(t)) for pure attention under the complete mask, exact far below the rounding
    floor of X (module docstring); -inf once the tokens are exactly equal.

    Shapes: X0 ``[sample, token, d_model]``; W_Q, W_K ``[sample, layer, d_model, d_head]``; W_V
    ``[sample, layer, d_model, d_model]`` -> ``[sample, layer + 1]``.
    """
    if X0.dim() != 3 or n_layers < 1 or W_V.dim() != 4 or W_V.shape[1] < n_layers:
        raise ValueError(f"X0 must be [sample, token, d_model] and the weights "
                         f"[sample, layer >= n_layers, d, e]; "
                         f"got X0 {tuple(X0.shape)}, W_V {tuple(W_V.shape)}, n_layers={n_layers}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    m = X0.mean(dim=-2, keepdim=True)  # [sample, 1, d_model]
    R = X0 - m  # [sample, token, d_model]
    log_sigma = torch.log(torch.linalg.matrix_norm(R))  # [sample]
    R = R / log_sigma.exp()[:, None, None]
    log_mu = [log_sigma]
    for t in range(n_layers):
        M = W_Q[:, t] @ W_K[:, t].transpose(-2, -1) / math.sqrt(temperature)  # [sample, d_model, d_model]
        sigma, sigma2 = log_sigma.exp()[:, None, None], (2 * log_sigma).exp()[:, None, None]  # 0 once tiny
        s = torch.softmax(sigma * (m @ M @ R.transpose(-2, -1)), dim=-1)  # [sample, 1, token]
        b = R @ M @ R.transpose(-2, -1)  # b_ij / sigma^2  [sample, token, token]
        e = torch.where(sigma2 > 1e-300, torch.expm1(sigma2 * b) / sigma2.clamp(min=1e-300), b)  # e / sigma^2
        e_mean = (e * s).sum(dim=-1, keepdim=True)  # [sample, token, 1]
        E = s * (e - e_mean) / (1 + sigma2 * e_mean)  # E / sigma^2  [sample, token, token]
        ER = E @ R  # [sample, token, d_model]
        m = (m + sigma * (s @ R) + sigma * sigma2 * ER.mean(dim=-2, keepdim=True)) @ W_V[:, t]
        R = (ER - ER.mean(dim=-2, keepdim=True)) @ W_V[:, t]
        norm = torch.linalg.matrix_norm(R)  # [sample]
        log_sigma = 3 * log_sigma + torch.log(norm)  # -inf once R is exactly zero
        R = R / torch.where(norm > 0, norm, 1.0)[:, None, None]
        log_mu.append(log_sigma)
    return torch.stack(log_mu, dim=1)  # [sample, layer + 1]


def loglog_slope(log_mu: Tensor, first: int = 1) -> float:
    """Least-squares slope per layer of ``log(-log(mu(t) / mu(0)))`` over the layers ``t >= first`` where
    ``mu(t) < mu(0)`` and ``log_mu`` is finite: about ``log b`` for ``mu ~ exp(-c b^t)``, near 0 (like
    ``1 / t``) for exponential decay.

    Shapes: log_mu ``[layer + 1]`` (natural log).

    >>> t = torch.arange(8, dtype=torch.float64)
    >>> log_mu = 1.0 - 2.0 ** t
    >>> log_mu[0] = 1.0  # so that -log(mu(t) / mu(0)) = 2^t for t >= 1: slope log 2
    >>> round(loglog_slope(log_mu), 6)
    0.693147
    """
    drop = log_mu[0] - log_mu  # -log(mu(t) / mu(0))  [layer + 1]
    valid = torch.isfinite(drop) & (drop > 0) & (torch.arange(drop.shape[0]) >= first)
    return -fit_decay_rate(torch.where(valid, drop, 1.0).log(), valid)


def decay_shape(slope: float) -> str:
    """Words for a :func:`loglog_slope`: "doubly exponential" above :data:`DOUBLE_SLOPE`, else "exponential".

    >>> decay_shape(1.1), decay_shape(0.1)
    ('doubly exponential', 'exponential')
    """
    return "doubly exponential" if slope > DOUBLE_SLOPE else "exponential"


def layer_rates(log_mu: Tensor) -> Tensor:
    """The decay per layer ``log mu(t) - log mu(t + 1)``. Shapes: ``[..., layer + 1]`` -> ``[..., layer]``."""
    return log_mu[..., :-1] - log_mu[..., 1:]


def uniform_attention(mask: Tensor) -> list[list[Fraction]]:
    """The mask's uniform attention matrix (each row uniform over its allowed tokens), in exact fractions.

    Shapes: mask ``[token, token]`` bool -> N x N nested lists.
    """
    rows = mask.tolist()
    return [[Fraction(int(x), sum(row)) for x in row] for row in rows]


def _rank(matrix: list[list[Fraction]]) -> int:
    """The rank of a rational matrix by exact Gaussian elimination."""
    rows = [list(r) for r in matrix]
    rank, n_cols = 0, len(rows[0]) if rows else 0
    for col in range(n_cols):
        pivot = next((i for i in range(rank, len(rows)) if rows[i][col] != 0), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for i in range(rank + 1, len(rows)):
            factor = rows[i][col] / rows[rank][col]
            if factor:
                rows[i] = [a - factor * b for a, b in zip(rows[i], rows[rank])]
        rank += 1
    return rank


def _product(a: list[list[Fraction]], b: list[list[Fraction]]) -> list[list[Fraction]]:
    columns = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, col)) for col in columns] for row in a]


def jordan_ranks(mask: Tensor, eigenvalue: Fraction, max_power: int) -> list[int]:
    """``rank((A - eigenvalue I)^k)`` for k = 0..max_power, A the mask's uniform attention matrix, exactly.

    The ranks fall by the geometric multiplicity at k = 1 and stop falling at the size of the largest
    Jordan block; ``N - rank`` at that point is the algebraic multiplicity. One chain of length m (geometric
    multiplicity 1) shows as ranks N, N - 1, ..., N - m, N - m, ...

    Shapes: mask ``[token, token]`` bool.

    >>> from rankcollapse.core.masks import causal_sliding_window_mask
    >>> jordan_ranks(causal_sliding_window_mask(5, 1), Fraction(1, 2), 5)
    [5, 4, 3, 2, 1, 1]
    """
    if max_power < 1:
        raise ValueError(f"max_power must be >= 1, got {max_power}")
    A = uniform_attention(mask)
    n = len(A)
    shifted = [[A[i][j] - (eigenvalue if i == j else 0) for j in range(n)] for i in range(n)]
    power = [[Fraction(int(i == j)) for j in range(n)] for i in range(n)]
    ranks = [n]
    for _ in range(max_power):
        power = _product(power, shifted)
        ranks.append(_rank(power))
    return ranks
