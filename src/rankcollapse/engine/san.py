"""The batched SAN engine: stacks of self-attention layers, many configurations at once, metrics only.

A *SAN* (self-attention network, Dong et al.) keeps only the attention sublayers of a transformer. The
engine runs one stack of layers (randomly initialized, or extracted by :mod:`rankcollapse.hf.load`) under
many configurations in one call: mask x temperature x norm x skip connection, all sharing the same X(0)
and the same weights. Samples are the batch axis, so each layer is two large matrix products (Q, K, V side
by side; W_O) around one fused attention call; configurations run one after another on the same block of
samples, and the first layer's projection, equal for all of them, is computed once. After every layer it
computes :func:`rankcollapse.core.metrics.all_metrics` (or ``norm_metrics``) and keeps only those, never the
hidden states. Blocks are sized to a memory budget and, on CPU, to the cache: on 2 EPYC cores, putting
configurations on a batch axis too (tensors of 100 MB and more) ran 1.5-2x slower than cache-sized blocks.

One layer, for configuration c (row-vector convention, tokens are rows):

    Y = Attn_c(X) + skip_c * X,     X' = Norm_c(Y),
    Attn_c(X) = concat_h softmax_{mask_c}(Q_h K_h^T * scale_c + bias_h) V_h  W_O + b_O,

with ``scale_c = 1 / sqrt(temperature_c)`` (the paper's d_QK) or the layer's own scaling when the
temperature is ``None``. Norms: the names of :mod:`rankcollapse.core.norms` (``none``, ``unit`` = the paper's
D, ``rms``, ``layernorm`` without affine, ``model``). ``model`` is each layer's own trained norm
(``AttentionLayer.norm``) at the layer's own position:

* ``norm_position="post"`` (BERT, MiniLM, MPNet; fresh random layers): ``X' = N(Attn(X) [+ X])`` -- the
  placement above, with the trained γ, β (Dong et al.'s SAN + LN keeps exactly this, without the skip);
* ``norm_position="pre"`` (GPT-2, Llama/SmolLM2, Gemma-3): ``X' = O(Attn(N(X))) [+ X]``, N the norm in
  front of the attention (``input_layernorm``, ``ln_1``) and O the norm on its output before the residual
  sum where the model has one (Gemma-3's ``post_attention_layernorm``), else the identity. Llama's
  ``post_attention_layernorm`` despite its name belongs to the MLP sublayer (it normalizes the residual
  stream in front of the MLP), so the SAN drops it, as it drops the MLP.

**Exact tracking of pure attention** (``SANConfig.exact_mu``, on by default; it acts on configurations
with norm ``none`` and no skip, and on stacks where :func:`resolves_centred` holds: not on the complete
mask with position-free logits, where the collapse runs through A itself). With A row-stochastic
(A1 = 1), the centred part R = (I - 11^T/N) X evolves as R' = (I - 11^T/N) sum_h A_h R W_V^h W_O^h: the
value and output biases add the same row to every token and cancel, the score bias, RoPE, QK-norm and
grouped heads only change A. The engine keeps X in split form, X = 1 gamma^T + s R with R centred at
unit norm and log s accumulated in float64 (:func:`attend_split`): A comes from X formed in the dtype,
the values from R alone (the mean token's row is one extra row), so tracking costs about what the
direct layer costs, and mu(X) = s is measured far below the dtype floor eps ||X|| where X itself only
holds rounding noise. The metrics ``mu`` and ``relative_mu`` (= exact mu / ||X||) then come from R; the
other metrics from X. The metric ``exact`` (EXACT_METRIC) is 1.0 for the configurations tracked this way
(their floor is no limit), 0.0 for the others. mu below float64's smallest number (~1e-308) reads 0.

Used by: the experiments behind Figs. 2-4, the response experiments and ``benchmarks/bench_san.py``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import torch

from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics as rc_metrics
from rankcollapse.core.checks import check_choice, check_temperature
from rankcollapse.core.norms import (TrainedNorm, apply_norm, apply_trained_norm, check_norm, fresh_layernorm,
                               rms_normalize)

INIT_NAMES = ("torch", "hf")  # how random layers are drawn: PyTorch's nn.Linear default, or Hugging Face's N(0, 0.02)
EXTENSION_NAMES = ("cycle", "random")
NORM_POSITIONS = ("post", "pre")  # where a layer's own norm sits (module docstring)
EXACT_METRIC = "exact"  # the metric flagging configurations whose mu is tracked exactly (1.0) or not (0.0)


@dataclass(frozen=True, eq=False)
class AttentionLayer:
    """Weights of one multi-head self-attention sublayer (any family; see :mod:`rankcollapse.hf.load`).

    Shapes: W_Q [head, d_model, d_head]; W_K, W_V [kv_head, d_model, d_head] (kv_head divides head:
    grouped-query attention, query head h reads kv head h // (head // kv_head)); W_O [head, d_head,
    d_model] or None (heads concatenated, needs head * d_head == d_model); b_Q [head, d_head];
    b_K, b_V [kv_head, d_head]; b_O [d_model]; q_gain, k_gain [d_head]; rope_inv_freq [d_head // 2];
    score_bias [head, token, token]; norm, output_norm: see :class:`rankcollapse.core.norms.TrainedNorm` [d_model].
    """

    W_Q: torch.Tensor  # query weights, [head, d_model, d_head]
    W_K: torch.Tensor  # key weights, [kv_head, d_model, d_head]
    W_V: torch.Tensor  # value weights, [kv_head, d_model, d_head]
    W_O: torch.Tensor | None = None  # output projection [head, d_head, d_model]; None = concatenate heads
    b_Q: torch.Tensor | None = None  # query bias [head, d_head]
    b_K: torch.Tensor | None = None  # key bias [kv_head, d_head]
    b_V: torch.Tensor | None = None  # value bias [kv_head, d_head]
    b_O: torch.Tensor | None = None  # output bias [d_model]
    scaling: float | None = None  # the model's own logit scale; None = 1 / sqrt(d_head)
    q_gain: torch.Tensor | None = None  # QK-norm: RMS-normalize each query head, then multiply by this gain
    k_gain: torch.Tensor | None = None  # QK-norm gain for the keys
    qk_norm_eps: float = 1e-6  # epsilon of the QK RMSNorm
    rope_inv_freq: torch.Tensor | None = None  # rotary embedding (HF rotate-half layout); None = no RoPE
    rope_scale: float = 1.0  # multiplies cos and sin (HF ``attention_scaling``)
    window: int | None = None  # the model's own sliding window: keys with |i - j| <= window only
    score_bias: torch.Tensor | None = None  # additive logit bias (MPNet relative positions), per token count
    norm: TrainedNorm | None = None  # the sublayer's own norm (used by norm "model"); None = the layer has none
    norm_position: str = "post"  # "post": X' = norm(Attn(X) [+ X]); "pre": X' = output_norm(Attn(norm(X))) [+ X]
    output_norm: TrainedNorm | None = None  # pre-norm only: norm of the attention output before the residual sum

    def __post_init__(self) -> None:
        if self.W_Q.ndim != 3 or self.W_K.shape != self.W_V.shape or self.W_K.ndim != 3:
            raise ValueError("W_Q must be [head, d_model, d_head] and W_K, W_V equal [kv_head, d_model, d_head]")
        n_heads, d_model, d_head = self.W_Q.shape
        n_kv = self.W_K.shape[0]
        if self.W_K.shape[1:] != (d_model, d_head) or n_heads % n_kv:
            raise ValueError(f"W_K, W_V must be [kv_head, {d_model}, {d_head}] with kv_head dividing {n_heads}")
        if self.W_O is None and n_heads * d_head != d_model:
            raise ValueError("W_O may be None only when head * d_head == d_model")
        if self.W_O is not None and self.W_O.shape != (n_heads, d_head, d_model):
            raise ValueError(f"W_O must be [{n_heads}, {d_head}, {d_model}], got {tuple(self.W_O.shape)}")
        if self.window is not None and self.window < 0:
            raise ValueError(f"window must be None or an integer >= 0, got {self.window!r}")
        if self.norm_position not in NORM_POSITIONS:
            raise ValueError(f"norm_position must be one of {', '.join(NORM_POSITIONS)}; got {self.norm_position!r}")
        if self.output_norm is not None and self.norm_position != "pre":
            raise ValueError("output_norm is allowed only with norm_position='pre' (a post-norm layer has one norm)")
        for name in ("norm", "output_norm"):
            value = getattr(self, name)
            if value is not None and value.weight.shape != (d_model,):
                raise ValueError(f"{name} must act on d_model={d_model} features, got weight {tuple(value.weight.shape)}")

    @property
    def n_heads(self) -> int:
        return self.W_Q.shape[0]

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[1]

    @property
    def d_head(self) -> int:
        return self.W_Q.shape[2]

    def to(self, dtype: torch.dtype, device: torch.device | str = "cpu") -> AttentionLayer:
        """A copy with every floating tensor (the norms' too) cast to ``dtype`` on ``device``."""
        moved = {k: (v.to(device=device, dtype=dtype) if isinstance(v, torch.Tensor)
                     else v.to(dtype, device) if isinstance(v, TrainedNorm) else v)
                 for k, v in self.__dict__.items()}
        return AttentionLayer(**moved)


@dataclass(frozen=True)
class SANConfig:
    """One configuration of the sweep; every configuration shares X(0) and the layer weights."""

    mask: str = "complete"  # a name from rankcollapse.core.masks.MASK_NAMES
    window: int | None = None  # window / stride passed to rankcollapse.core.masks.build_mask
    temperature: float | None = None  # d_QK: logits divided by sqrt(temperature); None = layer's own scaling
    norm: str = "none"  # one of rankcollapse.core.norms.NORM_NAMES, after the (skip-)sum; "model": the layer's own
    skip: bool = False  # add the layer input back (before the norm; after it for a pre-norm layer's own norm)
    mask_options: tuple[tuple[str, object], ...] = field(default=())  # extra build_mask keywords
    exact_mu: bool = True  # pure attention (norm none, no skip): track mu exactly below the floor (module doc)

    def __post_init__(self) -> None:
        if self.mask not in rc_masks.MASK_NAMES:
            raise ValueError(f"mask must be one of {', '.join(rc_masks.MASK_NAMES)}; got {self.mask!r}")
        check_temperature("temperature", self.temperature, allow_none=True)
        check_norm(self.norm)

    def build_mask(self, n_tokens: int) -> torch.Tensor:
        """Shapes: -> [token, token] bool."""
        return rc_masks.build_mask(self.mask, n_tokens, self.window, **dict(self.mask_options))

    @property
    def tracks_exactly(self) -> bool:
        """Whether mu is tracked exactly: pure attention (norm none, no skip) with ``exact_mu`` on."""
        return self.exact_mu and self.norm == "none" and not self.skip


def config_grid(masks: tuple[tuple[str, int | None], ...] = (("complete", None),),
                temperatures: tuple[float | None, ...] = (None,), norms: tuple[str, ...] = ("none",),
                skips: tuple[bool, ...] = (False,), exact_mu: bool = True) -> tuple[SANConfig, ...]:
    """Every combination mask x temperature x norm x skip, masks given as ``(name, window)`` pairs."""
    return tuple(SANConfig(mask=m, window=w, temperature=t, norm=n, skip=s, exact_mu=exact_mu)
                 for (m, w), t, n, s in itertools.product(masks, temperatures, norms, skips))


def random_layers(n_layers: int, d_model: int, n_heads: int, *, init: str = "torch", bias: bool = True,
                  output_projection: bool = True, seed: int = 0, dtype: torch.dtype = torch.float64,
                  ) -> list[AttentionLayer]:
    """Randomly initialized layers, from a seeded generator (never the global RNG).

    ``init="torch"``: PyTorch nn.Linear default, weights and biases U(-1/sqrt(in_dim), 1/sqrt(in_dim)) (the
    authors' response); ``init="hf"``: weights N(0, 0.02), biases 0 (Hugging Face BERT/GPT-2). Each layer's
    own norm is a fresh post-norm LayerNorm, γ = 1, β = 0 (so norm "model" equals "layernorm" here).
    Shapes: each layer W_Q, W_K, W_V [head, d_model, d_model // head], W_O [head, d_head, d_model].
    """
    check_choice("init", init, INIT_NAMES)
    if n_layers < 1 or d_model < 1 or n_heads < 1 or d_model % n_heads:
        raise ValueError(f"need n_layers >= 1 and n_heads dividing d_model, got {n_layers=}, {d_model=}, {n_heads=}")
    gen = torch.Generator().manual_seed(seed)
    d_head = d_model // n_heads

    def linear(d_in: int, d_out: int) -> tuple[torch.Tensor, torch.Tensor]:
        if init == "torch":
            bound = 1.0 / math.sqrt(d_in)
            w = (torch.rand(d_in, d_out, generator=gen, dtype=torch.float64) * 2 - 1) * bound  # [in, out]
            b = (torch.rand(d_out, generator=gen, dtype=torch.float64) * 2 - 1) * bound  # [out]
        else:
            w = torch.randn(d_in, d_out, generator=gen, dtype=torch.float64) * 0.02  # [in, out]
            b = torch.zeros(d_out, dtype=torch.float64)  # [out]
        return w.to(dtype), (b.to(dtype) if bias else None)

    layers = []
    for _ in range(n_layers):
        (wq, bq), (wk, bk), (wv, bv), (wo, bo) = (linear(d_model, d_model) for _ in range(4))
        heads = lambda w: w.reshape(d_model, n_heads, d_head).permute(1, 0, 2)  # [head, d_model, d_head]
        hbias = lambda b: None if b is None else b.reshape(n_heads, d_head)  # [head, d_head]
        layers.append(AttentionLayer(
            W_Q=heads(wq), W_K=heads(wk), W_V=heads(wv), b_Q=hbias(bq), b_K=hbias(bk), b_V=hbias(bv),
            W_O=wo.reshape(n_heads, d_head, d_model) if output_projection else None,  # [head, d_head, d_model]
            b_O=bo if output_projection else None, norm=fresh_layernorm(d_model, dtype)))
    return layers


def extend_layers(layers: list[AttentionLayer], n_layers: int, mode: str = "cycle", *, init: str = "torch",
                  seed: int = 0) -> list[AttentionLayer]:
    """``n_layers`` layers: the given ones, then more by cycling through them or fresh random layers."""
    if mode not in EXTENSION_NAMES:
        raise ValueError(f"depth extension must be one of {', '.join(EXTENSION_NAMES)}; got {mode!r}")
    if n_layers <= len(layers):
        return list(layers[:n_layers])
    if mode == "cycle":
        return [layers[i % len(layers)] for i in range(n_layers)]
    first = layers[0]
    fresh = random_layers(n_layers - len(layers), first.d_model, first.n_heads, init=init, seed=seed,
                          dtype=first.W_Q.dtype, output_projection=first.W_O is not None)
    return list(layers) + fresh


def _rotate(x: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> torch.Tensor:
    """Rotary embedding in HF's rotate-half layout.  Shapes: x [..., token, d_head] -> same."""
    pos = torch.arange(x.shape[-2], device=x.device, dtype=x.dtype)
    freqs = torch.outer(pos, inv_freq.to(device=x.device, dtype=x.dtype))  # [token, d_head // 2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [token, d_head]
    cos, sin = emb.cos() * scale, emb.sin() * scale  # [token, d_head]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # [..., token, d_head]
    return x * cos + rotated * sin


@dataclass(frozen=True, eq=False)
class JointWeights:
    """One layer's weights laid out for the engine, built once per run by :func:`joint_weights`.

    Shapes: W_qkv [d_model, (head + 2 kv_head) * d_head] (Q, K, V side by side, so one matrix product
    projects every head); b_qkv [(head + 2 kv_head) * d_head] or None; W_O [head * d_head, d_model] or None;
    for the exactly tracked states (module docstring) the same columns split, contiguous: W_QK [d_model,
    (head + kv_head) * d_head], b_QK or None, W_V [d_model, kv_head * d_head], b_V [kv_head * d_head] or None.
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
    W_QK, W_V = W[:, :n_qk].contiguous(), W[:, n_qk:].contiguous()  # [d_model, n_qk], [d_model, kv_head * d_head]
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
    """``1 / sqrt(temperature)`` (the paper's d_QK), or the layer's own scaling when the temperature is None."""
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
    bias = None if bool(mask.all()) else torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
        ~mask, float("-inf"))  # [token, token]
    if layer.score_bias is not None:
        score_bias = layer.score_bias[..., :n_tokens, :n_tokens]  # [head, token, token]
        bias = score_bias if bias is None else score_bias + bias
    return bias


def _heads(X: torch.Tensor, layer: AttentionLayer, weights: JointWeights, qkv: torch.Tensor | None,
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries (QK-norm and RoPE applied), keys and values of every head.

    Shapes: X [sample, token, d_model] -> q [sample, head, token, d_head], k, v [sample, kv_head, token, d_head].
    """
    n_samples, n_tokens, _ = X.shape
    n_heads, n_kv, d_head = layer.n_heads, layer.W_K.shape[0], layer.d_head
    qkv = project_qkv(X, weights) if qkv is None else qkv
    qkv = qkv.view(n_samples, n_tokens, n_heads + 2 * n_kv, d_head).transpose(1, 2)  # [sample, h + 2 kv, token, e]
    q, k, v = qkv.split([n_heads, n_kv, n_kv], dim=1)  # [sample, head | kv_head, token, d_head]
    return (*_query_key(q, k, layer), v)


def _query_key(q: torch.Tensor, k: torch.Tensor, layer: AttentionLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """QK-norm and RoPE, where the layer has them.  Shapes: q [..., head, token, e], k [..., kv_head, token, e] -> same."""
    if layer.q_gain is not None:
        q = rms_normalize(q, layer.qk_norm_eps) * layer.q_gain
        k = rms_normalize(k, layer.qk_norm_eps) * layer.k_gain
    if layer.rope_inv_freq is not None:
        q = _rotate(q, layer.rope_inv_freq, layer.rope_scale)
        k = _rotate(k, layer.rope_inv_freq, layer.rope_scale)
    return q, k


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float,
               ) -> torch.Tensor:
    """Masked softmax and the product with the values, fused (``scaled_dot_product_attention``).

    Shapes: q [sample, head, token, d_head]; k [sample, kv_head, token, d_head]; v [sample, kv_head, token, e]
    -> [sample, head, token, e].
    """
    if k.shape[1] != q.shape[1]:  # grouped-query attention: kv head h // group serves query head h
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # [sample, head, token, d_head]
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)  # [sample, head, token, e]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)


def _output(ctx: torch.Tensor, layer: AttentionLayer, weights: JointWeights, with_bias: bool) -> torch.Tensor:
    """Heads concatenated, then W_O (and b_O when ``with_bias``).

    Shapes: ctx [sample, head, token, d_head] -> [sample, token, d_model].
    """
    n_samples, n_heads, n_tokens, d_head = ctx.shape
    ctx = ctx.transpose(1, 2).reshape(n_samples * n_tokens, n_heads * d_head)  # [sample * token, head * d_head]
    if weights.W_O is None:
        return ctx.view(n_samples, n_tokens, -1)
    out = ctx @ weights.W_O if layer.b_O is None or not with_bias else torch.addmm(layer.b_O, ctx, weights.W_O)
    return out.view(n_samples, n_tokens, -1)  # [sample, token, d_model]


def attend(X: torch.Tensor, layer: AttentionLayer, bias: torch.Tensor | None, scale: float, *,
           weights: JointWeights | None = None, qkv: torch.Tensor | None = None) -> torch.Tensor:
    """The attention sublayer (no skip, no norm) of one configuration, for a block of samples.

    ``bias`` comes from :func:`attention_bias`; ``scale`` multiplies the logits. ``weights`` are
    :func:`joint_weights` of ``layer`` (computed here when not given) and ``qkv`` is X's projection when
    it is already known (the first layer's, which every configuration shares). The masked softmax and
    the product with V run fused in ``scaled_dot_product_attention`` (flash attention on CPU).
    Shapes: X [sample, token, d_model]; bias see :func:`attention_bias`; qkv [sample * token,
    (head + 2 kv_head) * d_head] -> [sample, token, d_model].
    """
    weights = joint_weights(layer) if weights is None else weights
    q, k, v = _heads(X, layer, weights, qkv)
    return _output(_attention(q, k, v, bias, scale), layer, weights, with_bias=True)


def attend_split(X: torch.Tensor, gamma: torch.Tensor, R: torch.Tensor, layer: AttentionLayer,
                 bias: torch.Tensor | None, scale: float, *, weights: JointWeights | None = None,
                 qkv: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention sublayer of X = 1 gamma^T + s R (R centred) in split form: A from X, values from R.

    Since A1 = 1, Attn(X) = 1 y^T + s (sum_h A_h R W_V^h W_O^h) with y = Attn(1 gamma^T)'s row (the mean
    token's values through W_O, with every bias). Returns y and ``out = sum_h A_h R W_V^h W_O^h``; the
    caller forms gamma' = y + s mean(out) and R' = out - mean(out). ``qkv`` (X's full projection) may be
    given for the first layer. Arguments as in :func:`attend`.
    Shapes: X, R [sample, token, d_model]; gamma [sample, d_model] -> ([sample, d_model], [sample, token, d_model]).
    """
    weights = joint_weights(layer) if weights is None else weights
    n_samples, n_tokens, d_model = R.shape
    n_heads, n_kv, d_head = layer.n_heads, layer.W_K.shape[0], layer.d_head
    if qkv is None:
        qk = X.reshape(-1, d_model) @ weights.W_QK if weights.b_QK is None else torch.addmm(
            weights.b_QK, X.reshape(-1, d_model), weights.W_QK)  # [sample * token, (head + kv_head) * d_head]
        qk = qk.view(n_samples, n_tokens, n_heads + n_kv, d_head).transpose(1, 2)  # [sample, h + kv, token, e]
        q, k = _query_key(*qk.split([n_heads, n_kv], dim=1), layer)
    else:
        q, k, _ = _heads(X, layer, weights, qkv)
    v = (R.reshape(-1, d_model) @ weights.W_V).view(n_samples, n_tokens, n_kv, d_head).transpose(1, 2)  # [s, kv, t, e]
    out = _output(_attention(q, k, v, bias, scale), layer, weights, with_bias=False)  # [sample, token, d_model]
    mean_v = gamma @ weights.W_V if weights.b_V is None else torch.addmm(weights.b_V, gamma, weights.W_V)
    mean_v = mean_v.view(n_samples, n_kv, 1, d_head)  # [sample, kv_head, 1, d_head]
    if n_kv != n_heads:
        mean_v = mean_v.repeat_interleave(n_heads // n_kv, dim=1)  # [sample, head, 1, d_head]
    y = _output(mean_v, layer, weights, with_bias=True)[:, 0]  # [sample, d_model]
    return y, out


def split_state(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """X = 1 gamma^T + s R: the mean token gamma, R centred at unit norm (both in x's dtype), log s (float64).

    Shapes: x [sample, token, d_model] -> ([sample, d_model], [sample, token, d_model], [sample]).
    """
    x64 = x.to(torch.float64)
    gamma = x64.mean(-2)  # [sample, d_model]
    R, log_scale = unit_centred(x64 - gamma[:, None])
    return gamma.to(x.dtype), R.to(x.dtype), log_scale


def split_step(X: torch.Tensor, split: tuple[torch.Tensor, torch.Tensor, torch.Tensor], layer: AttentionLayer,
               bias: torch.Tensor | None, scale: float, *, weights: JointWeights | None = None,
               qkv: torch.Tensor | None = None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """One pure-attention layer in split form (:func:`attend_split`): the new X, formed in its dtype, and
    its (gamma, R, log s). Shapes: X [sample, token, d_model]; split as from :func:`split_state` -> same."""
    gamma, R, log_scale = split
    y, out = attend_split(X, gamma, R, layer, bias, scale, weights=weights, qkv=qkv)
    mean_out = out.mean(-2)  # [sample, d_model]
    R, log_norm = unit_centred(out - mean_out[:, None])  # [sample, token, d_model], [sample]
    gamma = y + torch.exp(log_scale).to(X.dtype)[:, None] * mean_out  # [sample, d_model]; s underflows to 0
    log_scale = log_scale + log_norm  # [sample]
    X = gamma[:, None] + torch.exp(log_scale).to(X.dtype)[:, None, None] * R  # [sample, token, d_model]
    return X, (gamma, R, log_scale)


def unit_centred(R: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """R scaled to unit Frobenius norm per sample, and the float64 log of the norm (-inf for R = 0).

    Shapes: R [sample, token, d_model] -> ([sample, token, d_model], [sample]).
    """
    norm = torch.linalg.vector_norm(R, dim=(-2, -1), dtype=torch.float64)  # [sample]
    inverse = torch.where(norm > 0, 1.0 / norm, 0.0).to(R.dtype)  # [sample]
    return R * inverse[:, None, None], torch.log(norm)


def exact_values(values: dict[str, torch.Tensor], X: torch.Tensor, R: torch.Tensor, log_scale: torch.Tensor,
                 token_mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """``values`` with mu and relative_mu (where present) from tracked states X = 1 gamma^T + exp(log_scale) R.

    mu = exp(log_scale) * mu(R) (R is centred over all tokens with unit norm, so mu(R) = 1 without padding;
    with padding mu(R) is taken over the valid tokens). Shapes: X, R [sample, token, d_model]; log_scale
    [sample] -> each value [sample].
    """
    mu = torch.exp(log_scale)
    if token_mask is not None:
        mu = mu * rc_metrics.mu(R, token_mask)
    out = dict(values)
    if "mu" in out:
        out["mu"] = mu
    if "relative_mu" in out:
        norm = out["norm"] if "norm" in out else rc_metrics.frobenius_norm(X, token_mask)
        out["relative_mu"] = mu / norm.clamp_min(torch.finfo(torch.float64).tiny)
    return out


def resolves_centred(biases: list[torch.Tensor | None], layers: list[AttentionLayer]) -> bool:
    """Whether exact tracking resolves mu below the floor: no layer attends with identical rows at collapse.

    With every key allowed for every query and no position-dependent logits (no RoPE, no score bias),
    the collapsed state's attention is the same for every row and P A R = P (A - 1 b^T) R: the contraction
    then comes from A's own dependence on the centred states (mu' ~ mu^2, Dong et al.'s doubly exponential
    collapse), which rounding erases together with X's centred part. Such runs stay direct (their floor
    is a limit). Shapes: biases, one per layer, as from :func:`attention_bias`.
    """
    return all(bias is not None or layer.rope_inv_freq is not None for bias, layer in zip(biases, layers))


def check_model_norms(layers: list[AttentionLayer], norms: set[str] | tuple[str, ...]) -> None:
    """One ValueError when norm "model" is asked for and a layer carries no norm of its own."""
    if "model" in norms and any(layer.norm is None for layer in layers):
        raise ValueError("norm 'model' needs layers that carry their own norm (AttentionLayer.norm): extracted "
                         "layers (rankcollapse.hf.extract) or random_layers; these have none")


def layer_step(X: torch.Tensor, layer: AttentionLayer, norm: str, skip: bool, bias: torch.Tensor | None,
               scale: float, *, weights: JointWeights | None = None, qkv: torch.Tensor | None = None,
               ) -> torch.Tensor:
    """One layer of one configuration: attention, skip, norm (placements in the module docstring).

    ``qkv`` (X's projection, when known) is not used where a pre-norm layer's own norm changes the
    attention input. Other arguments as in :func:`attend`. Shapes: X [sample, token, d_model] -> same.
    """
    if norm == "model" and layer.norm_position == "pre":
        Y = attend(apply_trained_norm(X, layer.norm), layer, bias, scale, weights=weights)
        Y = Y if layer.output_norm is None else apply_trained_norm(Y, layer.output_norm)
        return Y + X if skip else Y
    Y = attend(X, layer, bias, scale, weights=weights, qkv=qkv)
    Y = Y + X if skip else Y
    return apply_trained_norm(Y, layer.norm) if norm == "model" else apply_norm(Y, norm)


@dataclass(frozen=True, eq=False)
class SANResult:
    """Per-layer metrics of a run.  Shapes: each ``metrics[name]`` is [layer + 1, config, sample]."""

    metrics: dict[str, torch.Tensor]  # layer 0 is X(0); float64 (int64 for numerical_rank), on the CPU
    configs: tuple[SANConfig, ...]  # the configuration axis, in order
    dtype: torch.dtype  # the dtype the hidden states were computed in
    device: str  # where they were computed
    samples_per_chunk: int  # samples run together (one block), set by the cache target and the memory budget


def resolve_device(device: str | torch.device) -> torch.device:
    """``"cpu"`` or ``"cuda"`` (``"cuda:k"``), with one clear error when CUDA is asked for and absent."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but CUDA is not available here; use device='cpu'")
    return dev


def layer_metrics(X: torch.Tensor, token_mask: torch.Tensor | None, dtype: torch.dtype,
                  metric_names: tuple[str, ...] | None = None) -> dict[str, torch.Tensor]:
    """The metrics of one layer's states: all of METRIC_NAMES, or only ``metric_names``.

    A subset of metrics.NORM_METRIC_NAMES skips the SVD and the pairwise cosines. Shapes: X [..., token, d_model] -> [...].
    """
    if metric_names is None:
        return rc_metrics.all_metrics(X, token_mask=token_mask, dtype=dtype)
    unknown = set(metric_names) - set(rc_metrics.METRIC_NAMES)
    if unknown or not metric_names:
        raise ValueError(f"metric_names must be a non-empty subset of {', '.join(rc_metrics.METRIC_NAMES)}; "
                         f"got {metric_names!r}")
    cheap = set(metric_names) <= set(rc_metrics.NORM_METRIC_NAMES)
    values = (rc_metrics.norm_metrics if cheap else rc_metrics.all_metrics)(X, token_mask=token_mask, dtype=dtype)
    return {k: values[k] for k in metric_names}


# On CPU the engine works on blocks of samples small enough to stay in cache: CPU_BLOCK_BYTES of states
# (their projections are 3-4x that, their float64 copy for the metrics 2x). Measured on 2 AMD EPYC cores
# (benchmarks/bench_san.py): blocks of 4-8 MiB ran 1.5-2x faster than 100 MB tensors doing the same work.
CPU_BLOCK_BYTES = 8 * 2**20


def bytes_per_sample(n_tokens: int, layer: AttentionLayer, dtype: torch.dtype) -> int:
    """Bytes one sample needs in a block: the largest live tensors of one layer of one configuration."""
    item = torch.finfo(dtype).bits // 8
    width = max(layer.d_model, layer.n_heads * layer.d_head)
    return (3 * layer.n_heads * n_tokens * n_tokens * item + 12 * n_tokens * width * item
            + 6 * n_tokens * layer.d_model * 8)  # attention weights, q/k/v/out, metrics (float64)


def samples_per_chunk(n_tokens: int, layer: AttentionLayer, dtype: torch.dtype, memory_budget: int,
                      device: torch.device = torch.device("cpu")) -> int:
    """Samples per block: what fits the memory budget (bytes) by :func:`bytes_per_sample`, and on CPU at
    most a cache-sized block (CPU_BLOCK_BYTES of states)."""
    item = torch.finfo(dtype).bits // 8
    block = memory_budget // bytes_per_sample(n_tokens, layer, dtype)
    if device.type == "cpu":
        block = min(block, CPU_BLOCK_BYTES // (n_tokens * layer.d_model * item))
    return max(1, block)


@torch.no_grad()  # never differentiated: no autograd graph over samples x layers
def run_san(x0: torch.Tensor, layers: list[AttentionLayer], configs: tuple[SANConfig, ...] | list[SANConfig], *,
            token_mask: torch.Tensor | None = None, dtype: torch.dtype = torch.float64,
            device: str | torch.device = "cpu", memory_budget: int = 2**30,
            use_model_windows: bool = True, metric_names: tuple[str, ...] | None = None) -> SANResult:
    """Run every configuration on every sample through ``layers``; keep only the metrics after each layer.

    Samples go in blocks (:func:`samples_per_chunk`); each block runs configuration after configuration
    through every layer, so only one block's states of one configuration are alive at a time. The first
    layer's projection and the layer-0 metrics, equal for every configuration, are computed once per block.
    ``token_mask`` marks valid tokens for the metrics (padding rows are still propagated; give
    exactly-N-token samples, as :mod:`rankcollapse.experiments.data` does, to keep attention free of padding).
    ``use_model_windows=False`` drops extracted layers' own sliding windows. ``metric_names`` keeps a subset
    of METRIC_NAMES (default: all; see :func:`layer_metrics`); the metric EXACT_METRIC is always added
    (1.0 where mu and relative_mu are tracked exactly, see the module docstring). Deterministic: no randomness.
    Shapes: x0 [sample, token, d_model]; token_mask [sample, token] -> metrics [layer + 1, config, sample].
    """
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    if x0.ndim != 3 or not layers or x0.shape[-1] != layers[0].d_model:
        raise ValueError("x0 must be [sample, token, d_model] matching the layers' d_model, with >= 1 layer")
    if not configs:
        raise ValueError("configs must hold at least one SANConfig")
    dev = resolve_device(device)
    configs = tuple(configs)
    check_model_norms(layers, {c.norm for c in configs})
    tracked = metric_names is None or bool({"mu", "relative_mu"} & set(metric_names))  # exact mu wanted at all
    n_samples, n_tokens, _ = x0.shape
    moved = {id(la): (la if use_model_windows else AttentionLayer(**{**la.__dict__, "window": None})).to(dtype, dev)
             for la in layers}  # a cycled layer is moved (and laid out) once
    layers = [moved[id(la)] for la in layers]
    weights = {id(la): joint_weights(la) for la in layers}
    biases = [[attention_bias(la, c.build_mask(n_tokens).to(dev), dtype) for la in layers] for c in configs]
    scales = [[logit_scale(la, c.temperature) for la in layers] for c in configs]
    block = samples_per_chunk(n_tokens, max(layers, key=lambda la: la.n_heads), dtype, memory_budget, dev)

    metrics: dict[str, torch.Tensor] = {}
    for start in range(0, n_samples, block):
        stop = min(start + block, n_samples)
        x = x0[start:stop].to(device=dev, dtype=dtype)  # [sample, token, d_model]
        tm = None if token_mask is None else token_mask[start:stop].to(dev)  # [sample, token]
        measure = lambda X: layer_metrics(X, tm, dtype, metric_names)  # noqa: E731
        first_qkv = project_qkv(x, weights[id(layers[0])])  # every configuration's first projection
        at_zero = measure(x)
        for c, config in enumerate(configs):
            exact = tracked and config.tracks_exactly and resolves_centred(biases[c], layers)
            flag = torch.full((stop - start,), float(exact), dtype=torch.float64, device=dev)  # [sample]
            flagged = lambda values: {**values, EXACT_METRIC: flag}  # noqa: E731
            per_layer = [flagged(at_zero)]
            X = x
            split = split_state(x) if exact else None  # (gamma, R, log s)
            for t, layer in enumerate(layers):
                step = dict(weights=weights[id(layer)], qkv=first_qkv if t == 0 else None)
                if split is not None:
                    X, split = split_step(X, split, layer, biases[c][t], scales[c][t], **step)
                    per_layer.append(flagged(exact_values(measure(X), X, split[1], split[2], tm)))
                else:
                    X = layer_step(X, layer, config.norm, config.skip, biases[c][t], scales[c][t], **step)
                    per_layer.append(flagged(measure(X)))
            for k in per_layer[0]:
                if k not in metrics:
                    metrics[k] = torch.empty(len(layers) + 1, len(configs), n_samples, dtype=per_layer[0][k].dtype)
                metrics[k][:, c, start:stop] = torch.stack([m[k] for m in per_layer]).cpu()
    return SANResult(metrics=metrics, configs=configs, dtype=dtype, device=str(dev), samples_per_chunk=block)


def attention_sublayer(X: torch.Tensor, layer: AttentionLayer, mask: torch.Tensor, temperature: float | None = None,
                       *, norm: str = "none", skip: bool = False) -> torch.Tensor:
    """The engine's layer for one mask, norm and skip, as used by the Hugging Face validation (by default
    the bare attention sublayer; ``norm="model", skip=True`` is the model's own attention block).

    Shapes: X [sample, token, d_model]; mask [token, token] bool -> [sample, token, d_model].
    """
    check_norm(norm)
    check_model_norms([layer], (norm,))
    layer = layer.to(X.dtype, X.device)
    return layer_step(X, layer, norm, skip, attention_bias(layer, mask.to(X.device), X.dtype),
                      logit_scale(layer, temperature))
