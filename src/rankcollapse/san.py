"""The batched SAN engine: stacks of self-attention layers, many configurations at once, metrics only.

A *SAN* (self-attention network, Dong et al.) keeps only the attention sublayers of a transformer. The
engine runs one stack of layers (randomly initialized, or extracted by :mod:`rankcollapse.models`) under
many configurations at once: mask x temperature x norm x skip connection, all sharing the same X(0) and
the same weights. Configurations and samples are batch axes, so each layer is a few large einsums.
After every layer it computes :func:`rankcollapse.metrics.all_metrics` and keeps only those, never the
hidden states; samples are processed in chunks sized to a memory budget.

One layer, for configuration c (row-vector convention, tokens are rows):

    Y = Attn_c(X) + skip_c * X,     X' = Norm_c(Y),
    Attn_c(X) = concat_h softmax_{mask_c}(Q_h K_h^T * scale_c + bias_h) V_h  W_O + b_O,

with ``scale_c = 1 / sqrt(temperature_c)`` (the paper's d_QK) or the layer's own scaling when the
temperature is ``None``. Norms: ``none``; ``unit`` (each token divided by its Euclidean norm: the
paper's D, norm 1); ``rms`` (RMSNorm without gain: norm sqrt(d_model)); ``layernorm`` (torch LayerNorm,
centred, eps 1e-5, no affine: norm about sqrt(d_model)).

Used by: the experiments behind Figs. 2-4, the response experiments and ``benchmarks/bench_san.py``.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
from dataclasses import dataclass, field

import torch

from rankcollapse import masks as rc_masks
from rankcollapse import metrics as rc_metrics

NORM_NAMES = ("none", "unit", "rms", "layernorm")
INIT_NAMES = ("torch", "hf")
EXTENSION_NAMES = ("cycle", "random")
LAYERNORM_EPS = 1e-5


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
    norm: str = "none"  # one of NORM_NAMES, applied after the (skip-)sum
    skip: bool = False  # add the layer input back before the norm
    mask_options: tuple[tuple[str, object], ...] = field(default=())  # extra build_mask keywords

    def __post_init__(self) -> None:
        if self.mask not in rc_masks.MASK_NAMES:
            raise ValueError(f"mask must be one of {', '.join(rc_masks.MASK_NAMES)}; got {self.mask!r}")
        if self.temperature is not None and not (isinstance(self.temperature, (int, float)) and self.temperature > 0):
            raise ValueError(f"temperature must be None or a number > 0, got {self.temperature!r}")
        if self.norm not in NORM_NAMES:
            raise ValueError(f"norm must be one of {', '.join(NORM_NAMES)}; got {self.norm!r}")

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
    if init not in INIT_NAMES:
        raise ValueError(f"init must be one of {', '.join(INIT_NAMES)}; got {init!r}")
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


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rotate(x: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> torch.Tensor:
    """Rotary embedding in HF's rotate-half layout.  Shapes: x [..., token, d_head] -> same."""
    pos = torch.arange(x.shape[-2], device=x.device, dtype=x.dtype)
    freqs = torch.outer(pos, inv_freq.to(device=x.device, dtype=x.dtype))  # [token, d_head // 2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [token, d_head]
    cos, sin = emb.cos() * scale, emb.sin() * scale  # [token, d_head]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # [..., token, d_head]
    return x * cos + rotated * sin


def _joint_projection(layer: AttentionLayer) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Q, K and V weights side by side, so one matrix product projects all heads.

    Shapes: -> W [d_model, (head + 2 kv_head) * d_head], b [(head + 2 kv_head) * d_head] or None.
    """
    W = torch.cat([layer.W_Q, layer.W_K, layer.W_V], dim=0)  # [head + 2 kv_head, d_model, d_head]
    W = W.permute(1, 0, 2).reshape(layer.d_model, -1)  # [d_model, (head + 2 kv_head) * d_head]
    if layer.b_Q is None and layer.b_K is None and layer.b_V is None:
        return W, None
    parts = [layer.b_Q, layer.b_K, layer.b_V]
    shapes = [layer.W_Q.shape[::2], layer.W_K.shape[::2], layer.W_V.shape[::2]]
    b = torch.cat([(torch.zeros(shape, dtype=W.dtype, device=W.device) if p is None else p).reshape(-1)
                   for p, shape in zip(parts, shapes)])  # [(head + 2 kv_head) * d_head]
    return W, b


def attend(X: torch.Tensor, layer: AttentionLayer, mask: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The attention sublayer (no skip, no norm) for every configuration at once.

    ``mask`` is combined with the layer's own window, if any. Shapes: X [config, sample, token, d_model];
    mask [config, token, token] bool; scale [config] -> [config, sample, token, d_model].
    """
    n_configs, n_samples, n_tokens, d_model = X.shape
    n_heads, n_kv, d_head = layer.n_heads, layer.W_K.shape[0], layer.d_head
    W, b = _joint_projection(layer)
    flat = X.reshape(-1, d_model)  # [config * sample * token, d_model]
    qkv = flat @ W if b is None else torch.addmm(b, flat, W)  # [config * sample * token, (head + 2 kv_head) * d_head]
    qkv = qkv.view(n_configs, n_samples, n_tokens, n_heads + 2 * n_kv, d_head).transpose(2, 3)  # [c, s, h+2kv, token, e]
    q, k, v = qkv.split([n_heads, n_kv, n_kv], dim=2)  # [config, sample, head | kv_head, token, d_head]
    if layer.q_gain is not None:
        q = _rms(q, layer.qk_norm_eps) * layer.q_gain
        k = _rms(k, layer.qk_norm_eps) * layer.k_gain
    if layer.rope_inv_freq is not None:
        q = _rotate(q, layer.rope_inv_freq, layer.rope_scale)
        k = _rotate(k, layer.rope_inv_freq, layer.rope_scale)
    q = q * scale.to(X.dtype)[:, None, None, None, None]  # [config, sample, head, token, d_head]
    if n_kv != n_heads:
        k = k.repeat_interleave(n_heads // n_kv, dim=2)  # [config, sample, head, token, d_head]
        v = v.repeat_interleave(n_heads // n_kv, dim=2)  # [config, sample, head, token, d_head]
    if layer.window is not None:
        offsets = torch.arange(n_tokens, device=X.device)
        mask = mask & ((offsets[:, None] - offsets[None, :]).abs() <= layer.window)  # [config, token, token]
    bias = torch.zeros(mask.shape, dtype=X.dtype, device=X.device).masked_fill_(~mask, float("-inf"))  # [c, t, t]
    scores = torch.matmul(q, k.transpose(-1, -2))  # [config, sample, head, token, token]
    scores += bias[:, None, None]
    if layer.score_bias is not None:
        scores += layer.score_bias[..., :n_tokens, :n_tokens]
    attn = torch.softmax(scores, dim=-1)  # [config, sample, head, token, token]
    ctx = torch.matmul(attn, v).transpose(2, 3).reshape(n_configs, n_samples, n_tokens, n_heads * d_head)  # [c,s,t,h*e]
    if layer.W_O is None:
        return ctx  # [config, sample, token, d_model]
    W_O = layer.W_O.reshape(n_heads * d_head, d_model)  # [head * d_head, d_model]
    if layer.b_O is None:
        return ctx @ W_O  # [config, sample, token, d_model]
    out = torch.addmm(layer.b_O, ctx.reshape(-1, n_heads * d_head), W_O)  # [config * sample * token, d_model]
    return out.view(n_configs, n_samples, n_tokens, d_model)  # [config, sample, token, d_model]


def apply_norm(Y: torch.Tensor, norm: str) -> torch.Tensor:
    """One of NORM_NAMES, token by token.  Shapes: Y [..., token, d_model] -> same."""
    if norm == "none":
        return Y
    if norm == "unit":
        return Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True)
    if norm == "rms":
        return _rms(Y, 0.0)
    if norm == "layernorm":
        return torch.nn.functional.layer_norm(Y, Y.shape[-1:], eps=LAYERNORM_EPS)
    raise ValueError(f"norm must be one of {', '.join(NORM_NAMES)}; got {norm!r}")


@dataclass(frozen=True, eq=False)
class SANResult:
    """Per-layer metrics of a run.  Shapes: each ``metrics[name]`` is [layer + 1, config, sample]."""

    metrics: dict[str, torch.Tensor]  # layer 0 is X(0); float64 (int64 for numerical_rank), on the CPU
    configs: tuple[SANConfig, ...]  # the configuration axis, in order
    dtype: torch.dtype  # the dtype the hidden states were computed in
    device: str  # where they were computed
    samples_per_chunk: int  # samples run together under the memory budget


def resolve_device(device: str | torch.device) -> torch.device:
    """``"cpu"`` or ``"cuda"`` (``"cuda:k"``), with one clear error when CUDA is asked for and absent."""
    dev = torch.device(device)
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but CUDA is not available here; use device='cpu'")
    return dev


CHEAP_METRICS = ("mu", "relative_mu", "norm", "floor")


def layer_metrics(X: torch.Tensor, token_mask: torch.Tensor | None, dtype: torch.dtype,
                  metric_names: tuple[str, ...] | None = None) -> dict[str, torch.Tensor]:
    """The metrics of one layer's states: all of METRIC_NAMES, or only ``metric_names``.

    A subset of CHEAP_METRICS skips the SVD and the pairwise cosines. Shapes: X [..., token, d_model] -> [...].
    """
    if metric_names is None:
        return rc_metrics.all_metrics(X, token_mask=token_mask, dtype=dtype)
    unknown = set(metric_names) - set(rc_metrics.METRIC_NAMES)
    if unknown or not metric_names:
        raise ValueError(f"metric_names must be a non-empty subset of {', '.join(rc_metrics.METRIC_NAMES)}; "
                         f"got {metric_names!r}")
    if set(metric_names) <= set(CHEAP_METRICS):
        mu, norm = rc_metrics.mu(X, token_mask), rc_metrics.frobenius_norm(X, token_mask)
        values = {"mu": mu, "norm": norm, "relative_mu": mu / norm.clamp_min(torch.finfo(torch.float64).tiny),
                  "floor": rc_metrics.rounding_floor(norm, dtype)}
    else:
        values = rc_metrics.all_metrics(X, token_mask=token_mask, dtype=dtype)
    return {k: values[k] for k in metric_names}


def samples_per_chunk(n_configs: int, n_tokens: int, layer: AttentionLayer, dtype: torch.dtype,
                      memory_budget: int) -> int:
    """How many samples fit the memory budget (bytes), from the largest live tensors of one layer."""
    item = torch.finfo(dtype).bits // 8
    width = max(layer.d_model, layer.n_heads * layer.d_head)
    per_sample = n_configs * (3 * layer.n_heads * n_tokens * n_tokens * item + 12 * n_tokens * width * item
                              + 6 * n_tokens * layer.d_model * 8)  # scores/softmax, q/k/v/out, metrics (fp64)
    return max(1, memory_budget // per_sample)


@functools.cache
def release_freed_chunks_to_os() -> bool:
    """Fix glibc's mmap threshold at 1 MiB, once per process; True when it was set (False off glibc).

    Every chunk of samples allocates and frees buffers of 10-100 MB. glibc's default *dynamic* threshold
    rises after such frees, so later buffers come from the heap and fragment it: 3000 BERT-base samples x
    16 configurations then peak at 9.4 GiB instead of 2.0 GiB (``benchmarks/bench_san.py --memory-only``).
    A fixed threshold (the same as ``MALLOC_MMAP_THRESHOLD_=1048576``) returns freed buffers to the OS.
    It is process-wide and only changes where glibc places allocations of 1 MiB and more.
    """
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_mmap_threshold = -3  # from <malloc.h>
    return bool(mallopt(m_mmap_threshold, 1 << 20))


def run_san(x0: torch.Tensor, layers: list[AttentionLayer], configs: tuple[SANConfig, ...] | list[SANConfig], *,
            token_mask: torch.Tensor | None = None, dtype: torch.dtype = torch.float64,
            device: str | torch.device = "cpu", memory_budget: int = 2**30,
            use_model_windows: bool = True, metric_names: tuple[str, ...] | None = None) -> SANResult:
    """Run every configuration on every sample through ``layers``; keep only the metrics after each layer.

    ``token_mask`` marks valid tokens for the metrics (padding rows are still propagated; give
    exactly-N-token samples, as :mod:`rankcollapse.data` does, to keep attention free of padding).
    On CPU it calls :func:`release_freed_chunks_to_os` so peak memory stays flat in the number of samples.
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
    if dev.type == "cpu":
        release_freed_chunks_to_os()
    configs = tuple(configs)
    n_samples, n_tokens, _ = x0.shape
    layers = [
        (layer if use_model_windows else AttentionLayer(**{**layer.__dict__, "window": None})).to(dtype, dev)
        for layer in layers]
    masks = torch.stack([c.build_mask(n_tokens) for c in configs]).to(dev)  # [config, token, token]
    scale = torch.tensor([float("nan") if c.temperature is None else 1.0 / math.sqrt(c.temperature)
                          for c in configs], dtype=torch.float64)  # [config]; NaN = the layer's own scaling
    own_scale = [layer.scaling if layer.scaling is not None else 1.0 / math.sqrt(layer.d_head) for layer in layers]
    skip = torch.tensor([float(c.skip) for c in configs], dtype=dtype, device=dev)  # [config]
    norm_groups = {n: [i for i, c in enumerate(configs) if c.norm == n] for n in NORM_NAMES}
    chunk = samples_per_chunk(len(configs), n_tokens, max(layers, key=lambda la: la.n_heads), dtype, memory_budget)

    collected: list[dict[str, torch.Tensor]] = []
    for start in range(0, n_samples, chunk):
        x = x0[start:start + chunk].to(device=dev, dtype=dtype)  # [sample, token, d_model]
        tm = None if token_mask is None else token_mask[start:start + chunk].to(dev)  # [sample, token]
        X = x.expand(len(configs), *x.shape).contiguous()  # [config, sample, token, d_model]
        per_layer = [layer_metrics(X, tm, dtype, metric_names)]
        for layer, own in zip(layers, own_scale):
            layer_scale = torch.where(scale.isnan(), torch.full_like(scale, own), scale).to(dev)  # [config]
            Y = attend(X, layer, masks, layer_scale) + skip[:, None, None, None] * X  # [config, sample, token, d]
            for norm, idx in norm_groups.items():
                if idx and norm != "none":
                    Y[idx] = apply_norm(Y[idx], norm)
            X = Y
            per_layer.append(layer_metrics(X, tm, dtype, metric_names))
        collected.append({k: torch.stack([m[k] for m in per_layer]).cpu() for k in per_layer[0]})
    metrics = {k: torch.cat([c[k] for c in collected], dim=2) for k in collected[0]}  # [layer + 1, config, sample]
    return SANResult(metrics=metrics, configs=configs, dtype=dtype, device=str(dev), samples_per_chunk=chunk)


def attention_sublayer(X: torch.Tensor, layer: AttentionLayer, mask: torch.Tensor,
                       temperature: float | None = None) -> torch.Tensor:
    """The engine's attention sublayer for one mask, as used by the Hugging Face validation.

    Shapes: X [sample, token, d_model]; mask [token, token] bool -> [sample, token, d_model].
    """
    scale = layer.scaling if layer.scaling is not None else 1.0 / math.sqrt(layer.d_head)
    if temperature is not None:
        scale = 1.0 / math.sqrt(temperature)
    layer = layer.to(X.dtype, X.device)
    out = attend(X[None], layer, mask[None].to(X.device), torch.tensor([scale], dtype=torch.float64, device=X.device))
    return out[0]  # [sample, token, d_model]
