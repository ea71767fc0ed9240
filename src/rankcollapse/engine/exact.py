"""Exact tracking of pure attention: mu measured far below the dtype's rounding floor.

``SANConfig.exact_mu``, on by default, acts on configurations with norm ``none`` and no skip, and on stacks
where :func:`resolves_centred` holds: not on the complete mask with position-free logits, where the
collapse runs through A itself. With A row-stochastic (A1 = 1), the centred part R = (I - 11^T/N) X
evolves as R' = (I - 11^T/N) sum_h A_h R W_V^h W_O^h: the value and output biases add the same row to
every token and cancel, the score bias, RoPE, QK-norm and grouped heads only change A. The engine keeps X
in split form, X = 1 gamma^T + s R with R centred at unit norm and log s accumulated in float64
(:func:`split_state`, :func:`split_step`; the attention itself is
:func:`rankcollapse.engine.attention.attend_split`): A comes from X formed in the dtype, the values from
R alone (the mean token's row is one extra row), so tracking costs about what the direct layer costs, and
mu(X) = s is measured far below the dtype floor eps ||X|| where X itself only holds rounding noise. The
metrics ``mu`` and ``relative_mu`` (= exact mu / ||X||) then come from R (:func:`exact_values`); the
other metrics from X. Asked for the decomposition of mu (``run_san(attention_stats=True)``), a layer's
value gain and attention contraction come from R too (:class:`StepParts`), so they stay meaningful below the
floor. The metric ``exact`` (EXACT_METRIC) is 1.0 for the configurations tracked this way
(their floor is no limit), 0.0 for the others. mu below float64's smallest number (~1e-308) reads 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rankcollapse.core import metrics as rc_metrics
from rankcollapse.engine.attention import attend_split, AttentionParts, JointWeights
from rankcollapse.engine.layers import AttentionLayer

EXACT_METRIC = "exact"  # the metric flagging configurations whose mu is tracked exactly (1.0) or not (0.0)


@dataclass(frozen=True, eq=False)
class StepParts:
    """One attention sublayer's input, output and parts, for the decomposition of its change of mu
    (``engine.run._decomposition``): the attention input (X, or its tracked centred part R), the attention
    output (of R: ``sum_h A_h R W_V^h W_O^h``; centring removes the constant rows either way) and
    :class:`rankcollapse.engine.attention.AttentionParts`.

    Shapes: attended_in, attended_out [sample, token, d_model].
    """

    attended_in: torch.Tensor
    attended_out: torch.Tensor
    parts: AttentionParts


def split_state(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """X = 1 gamma^T + s R: the mean token gamma, R centred at unit norm (both in x's dtype), log s (float64).

    Shapes: x [sample, token, d_model] -> ([sample, d_model], [sample, token, d_model], [sample]).
    """
    x64 = x.to(torch.float64)
    gamma = x64.mean(-2)  # [sample, d_model]
    R, log_scale = _unit_centred(x64 - gamma[:, None])
    return gamma.to(x.dtype), R.to(x.dtype), log_scale


def split_step(X: torch.Tensor, split: tuple[torch.Tensor, torch.Tensor, torch.Tensor], layer: AttentionLayer,
                bias: torch.Tensor | None, scale: float, *, weights: JointWeights | None = None,
                qkv: torch.Tensor | None = None, explicit: bool = False,
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor], StepParts | None]:
    """One pure-attention layer in split form (:func:`rankcollapse.engine.attention.attend_split`): the new X,
    formed in its dtype, its (gamma, R, log s) and, when ``explicit``, the layer's :class:`StepParts`.

    Shapes: X [sample, token, d_model]; split as from :func:`split_state` -> same.
    """
    gamma, R, log_scale = split
    y, out, parts = attend_split(X, gamma, R, layer, bias, scale, weights=weights, qkv=qkv, explicit=explicit)
    step = None if parts is None else StepParts(R, out, parts)
    mean_out = out.mean(-2)  # [sample, d_model]
    R, log_norm = _unit_centred(out - mean_out[:, None])  # [sample, token, d_model], [sample]
    gamma = y + torch.exp(log_scale).to(X.dtype)[:, None] * mean_out  # [sample, d_model]; s underflows to 0
    log_scale = log_scale + log_norm  # [sample]
    X = gamma[:, None] + torch.exp(log_scale).to(X.dtype)[:, None, None] * R  # [sample, token, d_model]
    return X, (gamma, R, log_scale), step


def _unit_centred(R: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """R scaled to unit Frobenius norm per sample, and the float64 log of the norm (-inf for R = 0).

    Shapes: R [sample, token, d_model] -> ([sample, token, d_model], [sample]).
    """
    norm = torch.linalg.vector_norm(R, dim=(-2, -1), dtype=torch.float64)  # [sample]
    inverse = torch.where(norm > 0, 1.0 / norm, 0.0).to(R.dtype)  # [sample]
    return R * inverse[:, None, None], torch.log(norm)


def exact_values(values: dict[str, torch.Tensor], X: torch.Tensor, R: torch.Tensor, log_scale: torch.Tensor,
                  token_mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """``values`` with mu and relative_mu (where present) from tracked states
    X = 1 gamma^T + exp(log_scale) R.

    mu = exp(log_scale) * mu(R) (R is centred over all tokens with unit norm, so mu(R) = 1 without padding;
    with padding mu(R) is taken over the valid tokens).
    Shapes: X, R [sample, token, d_model]; log_scale [sample] -> each value [sample].
    """
    mu = torch.exp(log_scale)
    if token_mask is not None:
        mu = mu * rc_metrics.mu(R, token_mask)
    out = dict(values)
    if "mu" in out:
        out["mu"] = mu
    if "relative_mu" in out:
        norm = out["norm"] if "norm" in out else rc_metrics.frobenius_norm(X, token_mask)
        # below the dtype's smallest normal number X has underflowed (a bias-free stack shrinks it every
        # layer): its norm is no measurement, so neither is the ratio (NaN; the sweep stops with one error)
        out["relative_mu"] = torch.where(norm >= torch.finfo(X.dtype).tiny,
                                         mu / norm.clamp_min(torch.finfo(torch.float64).tiny), torch.nan)
    return out


def resolves_centred(biases: list[torch.Tensor | None], layers: list[AttentionLayer]) -> bool:
    """Whether exact tracking resolves mu below the floor: no layer attends with identical rows at collapse.

    With every key allowed for every query and no position-dependent logits (no RoPE, no score bias),
    the collapsed state's attention is the same for every row and P A R = P (A - 1 b^T) R: the contraction
    then comes from A's own dependence on the centred states (mu' ~ mu^2, Dong et al.'s doubly exponential
    collapse), which rounding erases together with X's centred part. Such runs stay direct (their floor
    is a limit). A layer with attention sinks (rows of A summing to less than 1) breaks the split form
    itself (A1 != 1: the mean token does not stay the mean), so a stack with one is never tracked exactly.
    Shapes: biases, one per layer, as from :func:`rankcollapse.engine.attention.attention_bias`.
    """
    return all((bias is not None or layer.rope_inv_freq is not None) and layer.sinks is None
               for bias, layer in zip(biases, layers))
