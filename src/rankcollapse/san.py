"""The batched SAN engine: stacks of self-attention layers, many configurations at once, metrics only.

A *SAN* (self-attention network, Dong et al.) keeps only the attention sublayers of a transformer. The
engine runs one stack of layers (randomly initialized, or extracted by :mod:`rankcollapse.models`) under
many configurations in one call: mask x temperature x norm x skip connection, all sharing the same X(0)
and the same weights. Samples are the batch axis, so each layer is two large matrix products (Q, K, V side
by side; W_O) around one fused attention call; configurations run one after another on the same block of
samples, and the first layer's projection, equal for all of them, is computed once. After every layer it
computes :func:`rankcollapse.metrics.all_metrics` (or ``norm_metrics``) and keeps only those, never the
hidden states. Blocks are sized to a memory budget and, on CPU, to the cache: on 2 EPYC cores, putting
configurations on a batch axis too (tensors of 100 MB and more) ran 1.5-2x slower than cache-sized blocks.

One layer, for configuration c (row-vector convention, tokens are rows):

    Y = Attn_c(X) + skip_c * X,     X' = Norm_c(Y),
    Attn_c(X) = concat_h softmax_{mask_c}(Q_h K_h^T * scale_c + bias_h) V_h  W_O + b_O,

with ``scale_c = 1 / sqrt(temperature_c)`` (the paper's d_QK) or the layer's own scaling when the
temperature is ``None``. Norms: the names of :mod:`rankcollapse.norms` (``none``, ``unit`` = the paper's
D, ``rms``, ``layernorm`` without affine).

Used by: the experiments behind Figs. 2-4, the response experiments and ``benchmarks/bench_san.py``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import torch

from rankcollapse import masks as rc_masks
from rankcollapse import metrics as rc_metrics
from rankcollapse.checks import check_choice, check_temperature
from rankcollapse.norms import apply_norm, check_norm, rms_normalize

INIT_NAMES = ("torch", "hf")  # how random layers are drawn: PyTorch's nn.Linear default, or Hugging Face's N(0, 0.02)
EXTENSION_NAMES = ("cycle", "random")


@dataclass(frozen=True, eq=False)
class AttentionLayer:
    """Weights of one multi-head self-attention sublayer (any family; see :mod:`rankcollapse.models`).

    Shapes: W_Q [head, d_model, d_head]; W_K, W_V [kv_head, d_model, d_head] (kv_head divides head:
    grouped-query attention, query head h reads kv head h // (head // kv_head)); W_O [head, d_head,
    d_model] or None (heads concatenated, needs head * d_head == d_model); b_Q [head, d_head];
    b_K, b_V [kv_head, d_head]; b_O [d_model]; q_gain, k_gain [d_head]; rope_inv_freq [d_head // 2];
    score_bias [head, token, token].
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
        """A copy with every floating tensor cast to ``dtype`` on ``device``."""
        moved = {k: (v.to(device=device, dtype=dtype) if isinstance(v, torch.Tensor) else v)
                 for k, v in self.__dict__.items()}
        return AttentionLayer(**moved)


@dataclass(frozen=True)
class SANConfig:
    """One configuration of the sweep; every configuration shares X(0) and the layer weights."""

    mask: str = "complete"  # a name from rankcollapse.masks.MASK_NAMES
    window: int | None = None  # window / stride passed to rankcollapse.masks.build_mask
    temperature: float | None = None  # d_QK: logits divided by sqrt(temperature); None = layer's own scaling
    norm: str = "none"  # one of rankcollapse.norms.NORM_NAMES, applied after the (skip-)sum
    skip: bool = False  # add the layer input back before the norm
    mask_options: tuple[tuple[str, object], ...] = field(default=())  # extra build_mask keywords

    def __post_init__(self) -> None:
        if self.mask not in rc_masks.MASK_NAMES:
            raise ValueError(f"mask must be one of {', '.join(rc_masks.MASK_NAMES)}; got {self.mask!r}")
        check_temperature("temperature", self.temperature, allow_none=True)
        check_norm(self.norm)

    def build_mask(self, n_tokens: int) -> torch.Tensor:
        """Shapes: -> [token, token] bool."""
        return rc_masks.build_mask(self.mask, n_tokens, self.window, **dict(self.mask_options))


def config_grid(masks: tuple[tuple[str, int | None], ...] = (("complete", None),),
                temperatures: tuple[float | None, ...] = (None,), norms: tuple[str, ...] = ("none",),
                skips: tuple[bool, ...] = (False,)) -> tuple[SANConfig, ...]:
    """Every combination mask x temperature x norm x skip, masks given as ``(name, window)`` pairs."""
    return tuple(SANConfig(mask=m, window=w, temperature=t, norm=n, skip=s)
                 for (m, w), t, n, s in itertools.product(masks, temperatures, norms, skips))


def random_layers(n_layers: int, d_model: int, n_heads: int, *, init: str = "torch", bias: bool = True,
                  output_projection: bool = True, seed: int = 0, dtype: torch.dtype = torch.float64,
                  ) -> list[AttentionLayer]:
    """Randomly initialized layers, from a seeded generator (never the global RNG).

    ``init="torch"``: PyTorch nn.Linear default, weights and biases U(-1/sqrt(in_dim), 1/sqrt(in_dim)) (the
    authors' response); ``init="hf"``: weights N(0, 0.02), biases 0 (Hugging Face BERT/GPT-2).
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
            b_O=bo if output_projection else None))
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
    projects every head); b_qkv [(head + 2 kv_head) * d_head] or None; W_O [head * d_head, d_model] or None.
    """

    W_qkv: torch.Tensor
    b_qkv: torch.Tensor | None
    W_O: torch.Tensor | None


def joint_weights(layer: AttentionLayer) -> JointWeights:
    """Q, K and V weights side by side and W_O with its heads stacked (see :class:`JointWeights`)."""
    W = torch.cat([layer.W_Q, layer.W_K, layer.W_V], dim=0)  # [head + 2 kv_head, d_model, d_head]
    W = W.permute(1, 0, 2).reshape(layer.d_model, -1)  # [d_model, (head + 2 kv_head) * d_head]
    W_O = None if layer.W_O is None else layer.W_O.reshape(-1, layer.d_model)  # [head * d_head, d_model]
    if layer.b_Q is None and layer.b_K is None and layer.b_V is None:
        return JointWeights(W, None, W_O)
    parts = [layer.b_Q, layer.b_K, layer.b_V]
    shapes = [layer.W_Q.shape[::2], layer.W_K.shape[::2], layer.W_V.shape[::2]]
    b = torch.cat([(torch.zeros(shape, dtype=W.dtype, device=W.device) if p is None else p).reshape(-1)
                   for p, shape in zip(parts, shapes)])  # [(head + 2 kv_head) * d_head]
    return JointWeights(W, b, W_O)


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
    n_samples, n_tokens, d_model = X.shape
    n_heads, n_kv, d_head = layer.n_heads, layer.W_K.shape[0], layer.d_head
    weights = joint_weights(layer) if weights is None else weights
    qkv = project_qkv(X, weights) if qkv is None else qkv
    qkv = qkv.view(n_samples, n_tokens, n_heads + 2 * n_kv, d_head).transpose(1, 2)  # [sample, h + 2 kv, token, e]
    q, k, v = qkv.split([n_heads, n_kv, n_kv], dim=1)  # [sample, head | kv_head, token, d_head]
    if layer.q_gain is not None:
        q = rms_normalize(q, layer.qk_norm_eps) * layer.q_gain
        k = rms_normalize(k, layer.qk_norm_eps) * layer.k_gain
    if layer.rope_inv_freq is not None:
        q = _rotate(q, layer.rope_inv_freq, layer.rope_scale)
        k = _rotate(k, layer.rope_inv_freq, layer.rope_scale)
    if n_kv != n_heads:
        k = k.repeat_interleave(n_heads // n_kv, dim=1)  # [sample, head, token, d_head]
        v = v.repeat_interleave(n_heads // n_kv, dim=1)  # [sample, head, token, d_head]
    ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)  # [s, h, t, e]
    ctx = ctx.transpose(1, 2).reshape(n_samples * n_tokens, n_heads * d_head)  # [sample * token, head * d_head]
    if weights.W_O is None:
        return ctx.view(n_samples, n_tokens, d_model)
    out = ctx @ weights.W_O if layer.b_O is None else torch.addmm(layer.b_O, ctx, weights.W_O)  # [s * t, d_model]
    return out.view(n_samples, n_tokens, d_model)  # [sample, token, d_model]


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
    dev = torch.device(device)
    if dev.type not in ("cpu", "cuda"):
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


def run_san(x0: torch.Tensor, layers: list[AttentionLayer], configs: tuple[SANConfig, ...] | list[SANConfig], *,
            token_mask: torch.Tensor | None = None, dtype: torch.dtype = torch.float64,
            device: str | torch.device = "cpu", memory_budget: int = 2**30,
            use_model_windows: bool = True, metric_names: tuple[str, ...] | None = None) -> SANResult:
    """Run every configuration on every sample through ``layers``; keep only the metrics after each layer.

    Samples go in blocks (:func:`samples_per_chunk`); each block runs configuration after configuration
    through every layer, so only one block's states of one configuration are alive at a time. The first
    layer's projection and the layer-0 metrics, equal for every configuration, are computed once per block.
    ``token_mask`` marks valid tokens for the metrics (padding rows are still propagated; give
    exactly-N-token samples, as :mod:`rankcollapse.data` does, to keep attention free of padding).
    ``use_model_windows=False`` drops extracted layers' own sliding windows. ``metric_names`` keeps a subset
    of METRIC_NAMES (default: all; see :func:`layer_metrics`). Deterministic: no randomness.
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
            per_layer = [at_zero]
            X = x
            for t, layer in enumerate(layers):
                Y = attend(X, layer, biases[c][t], scales[c][t], weights=weights[id(layer)],
                           qkv=first_qkv if t == 0 else None)  # [sample, token, d_model]
                X = apply_norm(Y + X if config.skip else Y, config.norm)
                per_layer.append(measure(X))
            for k in per_layer[0]:
                if k not in metrics:
                    metrics[k] = torch.empty(len(layers) + 1, len(configs), n_samples, dtype=per_layer[0][k].dtype)
                metrics[k][:, c, start:stop] = torch.stack([m[k] for m in per_layer]).cpu()
    return SANResult(metrics=metrics, configs=configs, dtype=dtype, device=str(dev), samples_per_chunk=block)


def attention_sublayer(X: torch.Tensor, layer: AttentionLayer, mask: torch.Tensor,
                       temperature: float | None = None) -> torch.Tensor:
    """The engine's attention sublayer for one mask, as used by the Hugging Face validation.

    Shapes: X [sample, token, d_model]; mask [token, token] bool -> [sample, token, d_model].
    """
    layer = layer.to(X.dtype, X.device)
    return attend(X, layer, attention_bias(layer, mask.to(X.device), X.dtype), logit_scale(layer, temperature))
