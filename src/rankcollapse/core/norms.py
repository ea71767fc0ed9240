"""The token normalizations of the book, one name each, used by the theory systems and the SAN engine.

| name | what it does to each token (row) x | resulting norm |
|---|---|---|
| ``none`` | nothing: pure attention | — |
| ``unit`` | ``x / ||x||``: the paper's ``D`` (LayerNorm without centring = RMSNorm without gain,
  up to sqrt(d)) | 1 |
| ``rms`` | ``x / rms(x)``: RMSNorm without gain (Llama, Mistral, with gain 1) | sqrt(d_model) |
| ``layernorm`` | ``(x - mean(x)) / sqrt(var(x) + eps)``: LayerNorm without affine, as a fresh model has it
  | about sqrt(d_model) |
| ``model`` | the layer's own trained norm (:class:`TrainedNorm`: LayerNorm with γ, β or RMSNorm with its
  gain), at the layer's own position | set by γ |

The scale matters: attention logits are quadratic in X, so a norm of sqrt(d) instead of 1 is a factor d in
effective temperature (the paper's LayerNorm analysis uses the unit-norm ``D``; the scale of the other
norms is our reconstruction, marked [recon] in the book: ``book/theory/theorem2.md``,
``book/experiments/fig2.md``). ``model`` is what Dong et al.'s "SAN + LN" keeps in a pretrained model (their
BERT surgery keeps LayerNorm(dense(attn)) with the trained γ, β); the engine reads it from each layer
(:class:`rankcollapse.engine.AttentionLayer`), where it also says whether the norm sits after the attention
(post-norm, BERT) or before it (pre-norm, Llama, Gemma-3). A freshly initialized layer's own
norm is LayerNorm with γ = 1, β = 0 (:func:`fresh_layernorm`), so ``model`` equals ``layernorm`` there.
The first four need no weights (``FIXED_NORM_NAMES``): they are the ones the theory systems accept.

Used by: :mod:`rankcollapse.theory.dynamics`, :mod:`rankcollapse.engine`, :mod:`rankcollapse.hf.extract`, the
pages' legends (``NORM_LABELS``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FIXED_NORM_NAMES = ("none", "unit", "rms", "layernorm")  # need no weights: the theory systems' norms
NORM_NAMES = (*FIXED_NORM_NAMES, "model")  # "model": each layer's own trained norm (SAN engine only)
NORM_LABELS = {"none": "pure attention", "unit": "+ LayerNorm D (unit norm)", "rms": "+ RMSNorm (norm √d)",
               "layernorm": "+ LayerNorm, no affine (norm ≈ √d)",
               "model": "+ the model's own norm (γ, β: trained, or 1, 0 fresh)"}
NORM_KINDS = ("layernorm", "rms")  # the kinds of a trained norm: centred LayerNorm, or RMSNorm (no centring)
LAYERNORM_EPS = 1e-5  # PyTorch's nn.LayerNorm default


def check_norm(norm: str, allowed: tuple[str, ...] = NORM_NAMES) -> None:
    """One ValueError naming ``norm`` and the allowed names.

    >>> check_norm("sphere")
    Traceback (most recent call last):
    ...
    ValueError: norm must be one of none, unit, rms, layernorm, model; got 'sphere'
    """
    if norm not in allowed:
        raise ValueError(f"norm must be one of {', '.join(allowed)}; got {norm!r}")


@dataclass(frozen=True, eq=False)
class TrainedNorm:
    """A model's own normalization of one sublayer, with its trained gain and bias.

    ``kind="layernorm"``: ``(x - mean(x)) / sqrt(var(x) + eps) * weight + bias`` (torch LayerNorm);
    ``kind="rms"``: ``x / sqrt(mean(x^2) + eps) * weight`` (Llama's RMSNorm; Gemma-3 stores ``w`` and
    multiplies by ``1 + w``, which the extraction adds, so ``weight`` is always the gain itself).
    Shapes: weight [d_model]; bias [d_model] or None.
    """

    kind: str  # one of NORM_KINDS
    weight: torch.Tensor  # the gain γ, [d_model]
    bias: torch.Tensor | None = None  # β, [d_model]; None = no bias (RMSNorm)
    eps: float = LAYERNORM_EPS  # added to the variance (mean square for RMSNorm) before the square root

    def __post_init__(self) -> None:
        if self.kind not in NORM_KINDS:
            raise ValueError(f"kind must be one of {', '.join(NORM_KINDS)}; got {self.kind!r}")
        if self.weight.ndim != 1 or (self.bias is not None and self.bias.shape != self.weight.shape):
            raise ValueError(f"weight must be [d_model] and bias None or of the same shape; got "
                             f"{tuple(self.weight.shape)} and "
                             f"{None if self.bias is None else tuple(self.bias.shape)}")
        if not self.eps >= 0:
            raise ValueError(f"eps must be >= 0, got {self.eps!r}")

    def to(self, dtype: torch.dtype, device: torch.device | str = "cpu") -> TrainedNorm:
        """A copy with its tensors cast to ``dtype`` on ``device``."""
        bias = None if self.bias is None else self.bias.to(device=device, dtype=dtype)
        return TrainedNorm(self.kind, self.weight.to(device=device, dtype=dtype), bias, self.eps)


def fresh_layernorm(d_model: int, dtype: torch.dtype = torch.float64) -> TrainedNorm:
    """What a freshly initialized model's LayerNorm is: γ = 1, β = 0, eps = LAYERNORM_EPS.

    >>> fresh_layernorm(3).weight
    tensor([1., 1., 1.], dtype=torch.float64)
    """
    return TrainedNorm("layernorm", torch.ones(d_model, dtype=dtype), torch.zeros(d_model, dtype=dtype))


def rms_normalize(x: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps)`` along the last axis.  Shapes: [..., d] -> same."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def apply_trained_norm(Y: torch.Tensor, norm: TrainedNorm) -> torch.Tensor:
    """A model's own norm, token by token, in Y's dtype (the norm's tensors must be in it too).

    Shapes: Y [..., token, d_model] -> same.
    """
    if norm.kind == "layernorm":
        return torch.nn.functional.layer_norm(Y, Y.shape[-1:], norm.weight, norm.bias, norm.eps)
    out = rms_normalize(Y, norm.eps) * norm.weight
    return out if norm.bias is None else out + norm.bias


def apply_norm(Y: torch.Tensor, norm: str, layernorm_eps: float = LAYERNORM_EPS) -> torch.Tensor:
    """The normalization ``norm`` (one of FIXED_NORM_NAMES), token by token.

    ``model`` needs a layer's weights: use :func:`apply_trained_norm` with the layer's :class:`TrainedNorm`.
    Shapes: Y [..., token, d_model] -> same.
    """
    check_norm(norm, FIXED_NORM_NAMES)
    if norm == "none":
        return Y
    if norm == "unit":
        return Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True)
    if norm == "rms":
        return rms_normalize(Y)
    return torch.nn.functional.layer_norm(Y, Y.shape[-1:], eps=layernorm_eps)
