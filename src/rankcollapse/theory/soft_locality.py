"""The linear case under a distance-decay bias (soft locality, ALiBi): with W_Q = W_K = 0 and W_V = I the
logits are the bias alone, so attention is the constant row-stochastic matrix
``A_ij ∝ mask_ij exp(-m |i - j|)`` and μ decays like ``|λ₂(A)|^t``, as under a hard mask's uniform
attention (:func:`rankcollapse.theory.dynamics.linear_rate`). The mask graph stays complete (or causal), so
Theorem 1 applies with radius 1, but its smallest weight ε shrinks like ``exp(-m (N - 1))``.

* :func:`decay_attention` is that A; :func:`decay_second_eigenvalue` its ``|λ₂|``. Under a causal mask A
  is lower-triangular and ``|λ₂| = 1 / (1 + e^-m)``, the second token's weight on itself: between any causal
  window's 1/2 (m = 0) and 1 (m → ∞), so no hard causal window matches a decay.
* :func:`matched_window` is the bidirectional hard window (half-width w) whose uniform ``|λ₂|`` is nearest to
  a bidirectional decay's: the decay's *effective width*.

Used by: tests/unit/test_soft_locality.py.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rankcollapse.core import masks
from rankcollapse.core.metrics import second_eigenvalue_modulus


def decay_attention(n_tokens: int, slope: float, causal: bool = False) -> Tensor:
    """The linear case's attention under a decay bias of slope ``slope`` (>= 0): each row the softmax of
    ``-slope |i - j|`` over its allowed keys (every key, or ``j <= i`` when ``causal``).

    Shapes: -> [token, token] float64, rows summing to 1.

    >>> decay_attention(2, math.log(3.0)).tolist()
    [[0.75, 0.25], [0.25, 0.75]]
    """
    if not isinstance(slope, (int, float)) or isinstance(slope, bool) or not 0 <= slope < math.inf:
        raise ValueError(f"slope must be a finite number >= 0, got {slope!r}")
    logits = masks.decay_bias(n_tokens, [float(slope)])[0]  # [token, token]
    if causal:
        logits = logits.masked_fill(~masks.causal_mask(n_tokens), -math.inf)
    return torch.softmax(logits, dim=-1)


def decay_second_eigenvalue(n_tokens: int, slope: float, causal: bool = False) -> float:
    """``|λ₂|`` of :func:`decay_attention`: the linear case's asymptotic contraction per layer (0 for a
    rank-one A, e.g. slope 0 without a causal mask).

    >>> round(decay_second_eigenvalue(64, 0.5, causal=True), 12) == round(1 / (1 + math.exp(-0.5)), 12)
    True
    """
    second = float(second_eigenvalue_modulus(decay_attention(n_tokens, slope, causal)))
    return 0.0 if second < 1e-12 else second


def matched_window(n_tokens: int, slope: float) -> int:
    """The half-width w (1 .. n_tokens - 1) of the bidirectional hard window whose uniform attention's
    ``|λ₂|`` is nearest to that of a bidirectional decay of slope ``slope``: its effective width (the
    smaller w on a tie).

    >>> matched_window(32, 0.0), matched_window(32, 20.0)
    (31, 1)
    """
    target = decay_second_eigenvalue(n_tokens, slope)
    gaps = []
    for w in range(1, n_tokens):
        window = masks.sliding_window_mask(n_tokens, w).to(torch.float64)
        uniform = window / window.sum(-1, keepdim=True)
        gaps.append(abs(float(second_eigenvalue_modulus(uniform)) - target))
    return 1 + min(range(len(gaps)), key=gaps.__getitem__)
