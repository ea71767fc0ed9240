"""The attention maths of one layer: joint Q/K/V weights, logit scale and bias, heads, the fused softmax.

For configuration c (row-vector convention, tokens are rows) the attention sublayer is

    Attn_c(X) = concat_h softmax_{mask_c}(Q_h K_h^T * scale_c + bias_h) V_h  W_O + b_O,

with ``scale_c = 1 / sqrt(temperature_c)`` (the paper's d_QK) or the layer's own scaling when the
temperature is ``None`` (:func:`logit_scale`), and ``bias_h`` = -inf where the mask (and the layer's own
window) forbids, plus the layer's score bias (:func:`attention_bias`). Q, K, V of every head come from one
matrix product (:class:`JointWeights`, Q, K, V side by side), QK-norm and RoPE act on Q and K, and the
masked softmax and the product with V run fused in ``scaled_dot_product_attention`` (with explicit logits
only in a layer with logit soft-capping or attention sinks). :func:`attend` is the sublayer;
:func:`attend_split` the same on split states (for :mod:`rankcollapse.engine.exact`); :func:`attend_explicit`
forms the attention matrices instead of fusing them, for the decomposition of mu
(``run_san(attention_stats=True)``). Skip and norm come on top, in :mod:`rankcollapse.engine.run`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rankcollapse.core.norms import rms_normalize
from rankcollapse.engine.layers import AttentionLayer


@dataclass(frozen=True, eq=False)
class JointWeights:
    """One layer's weights laid out for the engine, built once per run by :func:`joint_weights`.

    Shapes: W_qkv [d_model, (head + 2 kv_head) * d_head] (Q, K, V side by side, so one matrix product
    projects every head); b_qkv [(head + 2 kv_head) * d_head] or None; W_O [head * d_head, d_model] or None;
    for the exactly tracked states (:mod:`rankcollapse.engine.exact`) the same columns split, contiguous:
    W_QK [d_model, (head + kv_head) * d_head], b_QK or None, W_V [d_model, kv_head * d_head], b_V
    [kv_head * d_head] or None.
    """

    W_qkv: torch.Tensor
    b_qkv: torch.Tensor | None
    W_O: torch.Tensor | None
    W_QK: torch.Tensor
    b_QK: torch.Tensor | None
    W_V: torch.Tensor
    b_V: torch.Tensor | None


def joint_weights(layer: AttentionLayer) -> JointWeights:
    """Q, K and V weights side by side and W_O with its heads stacked (see :class:`JointWeights`)."""
    W = torch.cat([layer.W_Q, layer.W_K, layer.W_V], dim=0)  # [head + 2 kv_head, d_model, d_head]
    W = W.permute(1, 0, 2).reshape(layer.d_model, -1)  # [d_model, (head + 2 kv_head) * d_head]
    W_O = None if layer.W_O is None else layer.W_O.reshape(-1, layer.d_model)  # [head * d_head, d_model]
    n_qk = (layer.n_heads + layer.W_K.shape[0]) * layer.d_head  # query and key columns
    # [d_model, n_qk], [d_model, kv_head * d_head]
    W_QK, W_V = W[:, :n_qk].contiguous(), W[:, n_qk:].contiguous()
    if layer.b_Q is None and layer.b_K is None and layer.b_V is None:
        return JointWeights(W, None, W_O, W_QK, None, W_V, None)
    parts = [layer.b_Q, layer.b_K, layer.b_V]
    shapes = [layer.W_Q.shape[::2], layer.W_K.shape[::2], layer.W_V.shape[::2]]
    b = torch.cat([(torch.zeros(shape, dtype=W.dtype, device=W.device) if p is None else p).reshape(-1)
                   for p, shape in zip(parts, shapes)])  # [(head + 2 kv_head) * d_head]
    return JointWeights(W, b, W_O, W_QK, b[:n_qk], W_V, b[n_qk:])


def project_qkv(X: torch.Tensor, weights: JointWeights) -> torch.Tensor:
    """Every head's queries, keys and values in one matrix product.

    Shapes: X [sample, token, d_model] -> [sample * token, (head + 2 kv_head) * d_head].
    """
    flat = X.reshape(-1, X.shape[-1])  # [sample * token, d_model]
    return flat @ weights.W_qkv if weights.b_qkv is None else torch.addmm(weights.b_qkv, flat, weights.W_qkv)


def logit_scale(layer: AttentionLayer, temperature: float | None) -> float:
    """``1 / sqrt(temperature)`` (the paper's d_QK), or the layer's own scaling when the temperature is
    None."""
    if temperature is not None:
        return 1.0 / math.sqrt(temperature)
    return layer.scaling if layer.scaling is not None else 1.0 / math.sqrt(layer.d_head)


def attention_bias(layer: AttentionLayer, mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """The additive logit bias: -inf where the mask (and the layer's own window) forbids, plus the layer's
    score bias; None when nothing is forbidden or added.

    Shapes: mask [token, token] bool -> [token, token], [head, token, token] with a score bias, or None.
    """
    n_tokens = mask.shape[-1]
    if layer.window is not None:
        offsets = torch.arange(n_tokens, device=mask.device)
        mask = mask & ((offsets[:, None] - offsets[None, :]).abs() <= layer.window)  # [token, token]
    # [token, token]
    bias = (None if bool(mask.all())
            else torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf")))
    if layer.score_bias is not None:
        score_bias = layer.score_bias[..., :n_tokens, :n_tokens]  # [head, token, token]
        bias = score_bias if bias is None else score_bias + bias
    return bias


def _rotate(x: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> torch.Tensor:
    """Rotary embedding in HF's rotate-half layout, on the first 2 * len(inv_freq) features of each head (all
    of them but for a partial rotary embedding, Phi-3's ``partial_rotary_factor``; the rest pass unrotated).

    Shapes: x [..., token, d_head] -> same.
    """
    n_rotated = 2 * inv_freq.shape[-1]
    if n_rotated < x.shape[-1]:
        return torch.cat([_rotate(x[..., :n_rotated], inv_freq, scale), x[..., n_rotated:]], dim=-1)
    pos = torch.arange(x.shape[-2], device=x.device, dtype=x.dtype)
    freqs = torch.outer(pos, inv_freq.to(device=x.device, dtype=x.dtype))  # [token, d_head // 2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [token, d_head]
    cos, sin = emb.cos() * scale, emb.sin() * scale  # [token, d_head]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # [..., token, d_head]
    return x * cos + rotated * sin


def _heads(X: torch.Tensor, layer: AttentionLayer, weights: JointWeights, qkv: torch.Tensor | None,
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries (QK-norm and RoPE applied), keys and values of every head.

    Shapes: X [sample, token, d_model] -> q [sample, head, token, d_head], k, v [sample, kv_head, token,
    d_head].
    """
    n_samples, n_tokens, _ = X.shape
    n_heads, n_kv, d_head = layer.n_heads, layer.W_K.shape[0], layer.d_head
    qkv = project_qkv(X, weights) if qkv is None else qkv
    # [sample, h + 2 kv, token, e]
    qkv = qkv.view(n_samples, n_tokens, n_heads + 2 * n_kv, d_head).transpose(1, 2)
    q, k, v = qkv.split([n_heads, n_kv, n_kv], dim=1)  # [sample, head | kv_head, token, d_head]
    return (*_query_key(q, k, layer), v)


def _query_key(q: torch.Tensor, k: torch.Tensor, layer: AttentionLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """QK-norm and RoPE, where the layer has them.  Shapes: q [..., head, token, e], k [..., kv_head, token,
    e] -> same."""
    if layer.q_gain is not None:
        q = rms_normalize(q, layer.qk_norm_eps) * layer.q_gain
        k = rms_normalize(k, layer.qk_norm_eps) * layer.k_gain
    if layer.rope_inv_freq is not None:
        q = _rotate(q, layer.rope_inv_freq, layer.rope_scale)
        k = _rotate(k, layer.rope_inv_freq, layer.rope_scale)
    return q, k


def _grouped(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values repeated for grouped-query attention: kv head h // group serves query head h.

    Shapes: q [sample, head, token, d_head]; k, v [sample, kv_head, token, e] -> k, v [sample, head, token,
    e].
    """
    if k.shape[1] == q.shape[1]:
        return k, v
    group = q.shape[1] // k.shape[1]
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float,
               layer: AttentionLayer) -> torch.Tensor:
    """Masked softmax and the product with the values, fused (``scaled_dot_product_attention``); explicit
    logits only for a layer with soft-capping or sinks (:func:`_explicit_attention`).

    Shapes: q [sample, head, token, d_head]; k [sample, kv_head, token, d_head]; v [sample, kv_head, token, e]
    -> [sample, head, token, e].
    """
    k, v = _grouped(q, k, v)
    if layer.softcap is None and layer.sinks is None:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)
    return _explicit_attention(q, k, v, bias, scale, layer)[0]


def _explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None,
                        scale: float, layer: AttentionLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """The same as :func:`_attention` with the attention matrices formed: A = softmax(L + bias) with the
    scaled logits L = q k^T scale, soft-capped ``c tanh(L / c)`` before the bias (Gemma-2), and with per-head
    sinks, one extra logit per row whose softmax weight is dropped, so each row of A sums to less than 1
    (GPT-OSS).

    Shapes: as :func:`_attention` -> (ctx [sample, head, token, e], A [sample, head, token, token]).
    """
    k, v = _grouped(q, k, v)
    logits = q @ k.mT * scale  # [sample, head, token, token]
    if layer.softcap is not None:
        logits = torch.tanh(logits / layer.softcap) * layer.softcap
    if bias is not None:
        logits = logits + bias
    if layer.sinks is None:
        A = torch.softmax(logits, dim=-1)
    else:
        # [sample, head, token, 1]
        sink = layer.sinks.to(logits.dtype).view(1, -1, 1, 1).expand(*logits.shape[:-1], 1)
        A = torch.cat([logits, sink], dim=-1).softmax(-1)[..., :-1]
    return A @ v, A


@dataclass(frozen=True, eq=False)
class AttentionParts:
    """What a layer's decomposition of mu needs beyond its output (:func:`attend_explicit`).

    Shapes: identity [sample, token, d_model] (the sublayer with every A_h replaced by the identity: the
    value-mapped tokens sum_h X W_V^h W_O^h, plus constant bias rows); weights A [sample, head, token, token].
    """

    identity: torch.Tensor
    weights: torch.Tensor


def _output(ctx: torch.Tensor, layer: AttentionLayer, weights: JointWeights, with_bias: bool) -> torch.Tensor:
    """Heads concatenated, then W_O (and b_O when ``with_bias``).

    Shapes: ctx [sample, head, token, d_head] -> [sample, token, d_model].
    """
    n_samples, n_heads, n_tokens, d_head = ctx.shape
    # [sample * token, head * d_head]
    ctx = ctx.transpose(1, 2).reshape(n_samples * n_tokens, n_heads * d_head)
    if weights.W_O is None:
        return ctx.view(n_samples, n_tokens, -1)  # [sample, token, head * d_head = d_model]
    out = (ctx @ weights.W_O if layer.b_O is None or not with_bias
           else torch.addmm(layer.b_O, ctx, weights.W_O))
    return out.view(n_samples, n_tokens, -1)  # [sample, token, d_model]


def attend(X: torch.Tensor, layer: AttentionLayer, bias: torch.Tensor | None, scale: float, *,
           weights: JointWeights | None = None, qkv: torch.Tensor | None = None) -> torch.Tensor:
    """The attention sublayer (no skip, no norm) of one configuration, for a chunk of samples.

    ``bias`` comes from :func:`attention_bias`; ``scale`` multiplies the logits. ``weights`` are
    :func:`joint_weights` of ``layer`` (computed here when not given) and ``qkv`` is X's projection when
    it is already known (the first layer's, which every configuration shares). The masked softmax and
    the product with V run fused in ``scaled_dot_product_attention`` (flash attention on CPU).
    Shapes: X [sample, token, d_model]; bias see :func:`attention_bias`; qkv [sample * token,
    (head + 2 kv_head) * d_head] -> [sample, token, d_model].
    """
    weights = joint_weights(layer) if weights is None else weights
    q, k, v = _heads(X, layer, weights, qkv)
    return _output(_attention(q, k, v, bias, scale, layer), layer, weights, with_bias=True)


def attend_explicit(X: torch.Tensor, layer: AttentionLayer, bias: torch.Tensor | None, scale: float, *,
                    weights: JointWeights | None = None, qkv: torch.Tensor | None = None,
                    ) -> tuple[torch.Tensor, AttentionParts]:
    """:func:`attend` with the attention matrices formed (not fused), and the sublayer's output with A = I.

    Arguments as in :func:`attend`.  Shapes: -> ([sample, token, d_model], :class:`AttentionParts`).
    """
    weights = joint_weights(layer) if weights is None else weights
    q, k, v = _heads(X, layer, weights, qkv)
    ctx, A = _explicit_attention(q, k, v, bias, scale, layer)
    identity = _output(_grouped(q, k, v)[1], layer, weights, with_bias=True)  # [sample, token, d_model]
    return _output(ctx, layer, weights, with_bias=True), AttentionParts(identity, A)


def attend_split(X: torch.Tensor, gamma: torch.Tensor, R: torch.Tensor, layer: AttentionLayer,
                  bias: torch.Tensor | None, scale: float, *, weights: JointWeights | None = None,
                  qkv: torch.Tensor | None = None, explicit: bool = False,
                  ) -> tuple[torch.Tensor, torch.Tensor, AttentionParts | None]:
    """The attention sublayer of X = 1 gamma^T + s R (R centred) in split form: A from X, values from R.

    Since A1 = 1, Attn(X) = 1 y^T + s (sum_h A_h R W_V^h W_O^h) with y = Attn(1 gamma^T)'s row (the mean
    token's values through W_O, with every bias). Returns y, ``out = sum_h A_h R W_V^h W_O^h`` and, when
    ``explicit``, the parts of the decomposition of mu (:class:`AttentionParts`, identity = sum_h R W_V^h
    W_O^h, of R: meaningful far below the floor), else None; the caller forms gamma' = y + s mean(out) and
    R' = out - mean(out). ``qkv`` (X's full projection) may be given for the first layer. Arguments as in
    :func:`attend`.
    Shapes: X, R [sample, token, d_model]; gamma [sample, d_model] -> ([sample, d_model],
    [sample, token, d_model], AttentionParts or None).
    """
    weights = joint_weights(layer) if weights is None else weights
    n_samples, n_tokens, d_model = R.shape
    n_heads, n_kv, d_head = layer.n_heads, layer.W_K.shape[0], layer.d_head
    if qkv is None:
        qk = X.reshape(-1, d_model) @ weights.W_QK if weights.b_QK is None else torch.addmm(
            weights.b_QK, X.reshape(-1, d_model), weights.W_QK)  # [sample * token, (head + kv_head) * d_head]
        # [sample, h + kv, token, e]
        qk = qk.view(n_samples, n_tokens, n_heads + n_kv, d_head).transpose(1, 2)
        q, k = _query_key(*qk.split([n_heads, n_kv], dim=1), layer)
    else:
        q, k, _ = _heads(X, layer, weights, qkv)
    # [s, kv, t, e]
    v = (R.reshape(-1, d_model) @ weights.W_V).view(n_samples, n_tokens, n_kv, d_head).transpose(1, 2)
    parts = None
    if explicit:
        ctx, A = _explicit_attention(q, k, v, bias, scale, layer)
        parts = AttentionParts(_output(_grouped(q, k, v)[1], layer, weights, with_bias=False), A)
    else:
        ctx = _attention(q, k, v, bias, scale, layer)
    out = _output(ctx, layer, weights, with_bias=False)  # [sample, token, d_model]
    mean_v = gamma @ weights.W_V if weights.b_V is None else torch.addmm(weights.b_V, gamma, weights.W_V)
    mean_v = mean_v.view(n_samples, n_kv, 1, d_head)  # [sample, kv_head, 1, d_head]
    if n_kv != n_heads:
        mean_v = mean_v.repeat_interleave(n_heads // n_kv, dim=1)  # [sample, head, 1, d_head]
    y = _output(mean_v, layer, weights, with_bias=True)[:, 0]  # [sample, d_model]
    return y, out, parts
