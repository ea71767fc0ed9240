"""The token normalizations of the book, one name each, used by the theory systems and the SAN engine.

| name | what it does to each token (row) x | resulting norm |
|---|---|---|
| ``none`` | nothing: pure attention | — |
| ``unit`` | ``x / ||x||``: the paper's ``D`` (LayerNorm without centring = RMSNorm without gain, up to sqrt(d)) | 1 |
| ``rms`` | ``x / rms(x)``: RMSNorm without gain (Llama, Mistral, with gain 1) | sqrt(d_model) |
| ``layernorm`` | ``(x - mean(x)) / sqrt(var(x) + eps)``: LayerNorm without affine, as a fresh model has it | about sqrt(d_model) |

The scale matters: attention logits are quadratic in X, so a norm of sqrt(d) instead of 1 is a factor d in
effective temperature (PAPER.md §4). A pretrained model's own trained norm (with its gain and bias) is
carried by the layers themselves (see :mod:`rankcollapse.san`).

Used by: :mod:`rankcollapse.dynamics`, :mod:`rankcollapse.san`, the pages' legends (``NORM_LABELS``).
"""

from __future__ import annotations

import torch

NORM_NAMES = ("none", "unit", "rms", "layernorm")
NORM_LABELS = {"none": "pure attention", "unit": "+ LayerNorm D (unit norm)", "rms": "+ RMSNorm (norm √d)",
               "layernorm": "+ LayerNorm, no affine (norm ≈ √d)"}
LAYERNORM_EPS = 1e-5  # PyTorch's nn.LayerNorm default


def check_norm(norm: str) -> None:
    """One ValueError naming ``norm`` and the allowed names.

    >>> check_norm("sphere")
    Traceback (most recent call last):
    ...
    ValueError: norm must be one of none, unit, rms, layernorm; got 'sphere'
    """
    if norm not in NORM_NAMES:
        raise ValueError(f"norm must be one of {', '.join(NORM_NAMES)}; got {norm!r}")


def rms_normalize(x: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps)`` along the last axis.  Shapes: [..., d] -> same."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def apply_norm(Y: torch.Tensor, norm: str, layernorm_eps: float = LAYERNORM_EPS) -> torch.Tensor:
    """The normalization ``norm`` (one of NORM_NAMES), token by token.

    Shapes: Y [..., token, d_model] -> same.
    """
    check_norm(norm)
    if norm == "none":
        return Y
    if norm == "unit":
        return Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True)
    if norm == "rms":
        return rms_normalize(Y)
    return torch.nn.functional.layer_norm(Y, Y.shape[-1:], eps=layernorm_eps)
