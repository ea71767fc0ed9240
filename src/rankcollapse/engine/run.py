"""The run loop: configurations, one layer of one configuration, the metrics after it, the chunk sizing.

One layer, for configuration c (the attention Attn_c in :mod:`rankcollapse.engine.attention`):

    Y = Attn_c(X) + skip_c * X,     X' = Norm_c(Y),

Norms: the names of :mod:`rankcollapse.core.norms` (``none``, ``unit`` = the paper's D, ``rms``,
``layernorm`` without affine, ``model``); ``model`` is each layer's own trained norm at the layer's own
position (post- or pre-norm, :mod:`rankcollapse.engine.layers`). A configuration (:class:`SANConfig`, here
because it is what one run varies: mask x temperature x norm x skip) is one entry of the run's
configuration axis; :func:`config_grid` spans that axis.

:func:`run_san` works on chunks of samples (:func:`samples_per_chunk`), sized to a memory budget and, on
CPU, to the cache: on 2 EPYC cores, putting configurations on a batch axis too (tensors of 100 MB and
more) ran 1.5-2x slower than cache-sized chunks. Configurations run one after another on the same chunk,
and the first layer's projection, equal for all of them, is computed once. After every layer it computes
:func:`rankcollapse.core.metrics.all_metrics` (or ``norm_metrics``) and keeps only those, never the hidden
states; pure-attention configurations are tracked exactly (:mod:`rankcollapse.engine.exact`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import torch

from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics as rc_metrics
from rankcollapse.core.checks import check_temperature
from rankcollapse.core.norms import apply_norm, apply_trained_norm, check_norm
from rankcollapse.engine.attention import (joint_weights, JointWeights, logit_scale, project_qkv, attend,
                                          attend_explicit, attention_bias)
from rankcollapse.engine.exact import (EXACT_METRIC, exact_values, resolves_centred, split_state, split_step,
                                       StepParts)
from rankcollapse.engine.layers import AttentionLayer

# 1.0 at the layers a configuration was not computed on because it had settled on its rounding floor
# (run_san's ``settle``), 0.0 where it was; present only in runs with ``settle``.
SETTLED_METRIC = "settled"


@dataclass(frozen=True)
class SANConfig:
    """One configuration of the sweep; every configuration shares X(0) and the layer weights."""

    mask: str = "complete"  # a name from rankcollapse.core.masks.MASK_NAMES
    window: int | None = None  # window / stride passed to rankcollapse.core.masks.build_mask
    temperature: float | None = None  # d_QK: logits divided by sqrt(temperature); None = layer's own scaling
    # one of rankcollapse.core.norms.NORM_NAMES, after the (skip-)sum; "model": the layer's own
    norm: str = "none"
    skip: bool = False  # add the layer input back (before the norm; after it for a pre-norm layer's own norm)
    mask_options: tuple[tuple[str, object], ...] = field(default=())  # extra build_mask keywords
    # pure attention (norm none, no skip): track mu exactly below the floor (engine.exact)
    exact_mu: bool = True

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


def _check_model_norms(layers: list[AttentionLayer], norms: set[str] | tuple[str, ...]) -> None:
    """One ValueError when norm "model" is asked for and a post-norm layer carries no norm of its own (a
    pre-norm layer without one feeds its attention X itself)."""
    if "model" in norms and any(layer.norm is None and layer.norm_position == "post" for layer in layers):
        raise ValueError("norm 'model' needs layers that carry their own norm (AttentionLayer.norm): "
                         "extracted layers (rankcollapse.hf.extract) or random_layers; these have none")


def _layer_step(X: torch.Tensor, layer: AttentionLayer, norm: str, skip: bool, bias: torch.Tensor | None,
                scale: float, *, weights: JointWeights | None = None, qkv: torch.Tensor | None = None,
                explicit: bool = False) -> tuple[torch.Tensor, StepParts | None]:
    """One layer of one configuration: attention, skip, norm (placements in the module docstrings of
    :mod:`rankcollapse.engine.run` and :mod:`rankcollapse.engine.layers`); with ``explicit``, the attention
    matrices are formed and the layer's :class:`rankcollapse.engine.exact.StepParts` returned (else None).

    ``qkv`` (X's projection, when known) is not used where a pre-norm layer's own norm changes the
    attention input. Other arguments as in :func:`rankcollapse.engine.attention.attend`.
    Shapes: X [sample, token, d_model] -> (same, StepParts or None).
    """
    pre = norm == "model" and layer.norm_position == "pre"
    own = X if layer.norm is None else apply_trained_norm(X, layer.norm)  # a pre-norm layer may have none
    X_in, qkv = (own, None) if pre else (X, qkv)
    if explicit:
        attended, parts = attend_explicit(X_in, layer, bias, scale, weights=weights, qkv=qkv)
    else:
        attended, parts = attend(X_in, layer, bias, scale, weights=weights, qkv=qkv), None
    step = None if parts is None else StepParts(X_in, attended, parts)
    if pre:
        Y = attended if layer.output_norm is None else apply_trained_norm(attended, layer.output_norm)
        return (Y + X if skip else Y), step
    Y = attended + X if skip else attended
    return (apply_trained_norm(Y, layer.norm) if norm == "model" else apply_norm(Y, norm)), step


def _decomposition(step: StepParts, bias: torch.Tensor | None, token_mask: torch.Tensor | None,
                   mu_before: torch.Tensor, mu_after: torch.Tensor) -> dict[str, torch.Tensor]:
    """One layer's ATTENTION_METRIC_NAMES (:data:`rankcollapse.core.metrics.ATTENTION_METRIC_NAMES`).

    With P the centring over the valid tokens (mu's), Y = sum_h X W_V^h W_O^h the value-mapped attention
    input (the sublayer with every A_h = I) and Attn(X) = sum_h A_h Y_h: value_gain = ||P Y|| / ||P X||,
    attention_contraction = ||P Attn(X)|| / ||P Y|| (bias rows are constant and P removes them, as A1 = 1),
    norm_factor = mu(X') / (mu(X) value_gain attention_contraction): the rest of the layer (the norm, and
    the skip where there is one; 1 up to rounding for pure attention). The three multiply to mu(X') / mu(X)
    exactly. ``mu_before``, ``mu_after`` are the run's own mu (exact where tracked).
    Shapes: bias as from :func:`rankcollapse.engine.attention.attention_bias`; token_mask [sample, token];
    mu_before, mu_after [sample] -> each [sample].
    """
    into = rc_metrics.mu(step.attended_in, token_mask)  # [sample]
    mapped = rc_metrics.mu(step.parts.identity, token_mask)
    gain = rc_metrics.mu_factor(mapped, into)
    contraction = rc_metrics.mu_factor(rc_metrics.mu(step.attended_out, token_mask), mapped)
    rest = rc_metrics.mu_factor(mu_after, mu_before * gain * contraction)
    allowed = None if bias is None else torch.isfinite(bias)
    return {"value_gain": gain, "attention_contraction": contraction, "norm_factor": rest,
            **rc_metrics.attention_statistics(step.parts.weights, allowed)}


@dataclass(frozen=True, eq=False)
class SANResult:
    """Per-layer metrics of a run.  Shapes: each ``metrics[name]`` is [layer + 1, config, sample]."""

    metrics: dict[str, torch.Tensor]  # layer 0 is X(0); float64 (int64 for numerical_rank), on the CPU
    configs: tuple[SANConfig, ...]  # the configuration axis, in order
    dtype: torch.dtype  # the dtype the hidden states were computed in
    device: str  # where they were computed
    samples_per_chunk: int  # samples run together (one chunk), set by the cache target and the memory budget


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


def _layer_metrics(X: torch.Tensor, token_mask: torch.Tensor | None, dtype: torch.dtype,
                   metric_names: tuple[str, ...] | None = None) -> dict[str, torch.Tensor]:
    """The metrics of one layer's states: all of METRIC_NAMES, or only ``metric_names``.

    A subset of metrics.NORM_METRIC_NAMES skips the SVD and the pairwise cosines.
    Shapes: X [..., token, d_model] -> [...].
    """
    if metric_names is None:
        return rc_metrics.all_metrics(X, token_mask=token_mask, dtype=dtype)
    unknown = set(metric_names) - set(rc_metrics.METRIC_NAMES)
    if unknown or not metric_names:
        raise ValueError(f"metric_names must be a non-empty subset of {', '.join(rc_metrics.METRIC_NAMES)}; "
                         f"got {metric_names!r}")
    cheap = set(metric_names) <= set(rc_metrics.NORM_METRIC_NAMES)
    values = (rc_metrics.norm_metrics if cheap else rc_metrics.all_metrics)(X, token_mask=token_mask,
                                                                            dtype=dtype)
    return {k: values[k] for k in metric_names}


# On CPU the engine works on chunks of samples small enough to stay in cache: CPU_CHUNK_BYTES of states
# (their projections are 3-4x that, their float64 copy for the metrics 2x). Measured on 2 AMD EPYC cores
# (benchmarks/bench_san.py): chunks of 4-8 MiB ran 1.5-2x faster than 100 MB tensors doing the same work.
CPU_CHUNK_BYTES = 8 * 2**20


def attention_flop(d_model: int, n_tokens: int) -> float:
    """Floating-point operations (multiply-adds x 2) of one attention sublayer on one sample: the Q, K, V
    and output projections and the two [token, token] products; the engine's cost model (the benchmark's
    share of matmul, the run plan's scaling of a measured throughput to another sequence length).

    >>> attention_flop(2, 3)
    168
    """
    return 8 * n_tokens * d_model**2 + 4 * n_tokens**2 * d_model


def bytes_per_sample(n_tokens: int, layer: AttentionLayer, dtype: torch.dtype) -> int:
    """Bytes one sample needs in a chunk: the largest live tensors of one layer of one configuration."""
    item = torch.finfo(dtype).bits // 8
    width = max(layer.d_model, layer.n_heads * layer.d_head)
    return (3 * layer.n_heads * n_tokens * n_tokens * item + 12 * n_tokens * width * item
            + 6 * n_tokens * layer.d_model * 8)  # attention weights, q/k/v/out, metrics (float64)


def samples_per_chunk(n_tokens: int, layer: AttentionLayer, dtype: torch.dtype, memory_budget: int,
                      device: torch.device = torch.device("cpu")) -> int:
    """Samples per chunk: what fits the memory budget (bytes) by :func:`bytes_per_sample`, and on CPU at
    most a cache-sized chunk (CPU_CHUNK_BYTES of states)."""
    item = torch.finfo(dtype).bits // 8
    chunk = memory_budget // bytes_per_sample(n_tokens, layer, dtype)
    if device.type == "cpu":
        chunk = min(chunk, CPU_CHUNK_BYTES // (n_tokens * layer.d_model * item))
    return max(1, chunk)


@torch.no_grad()  # never differentiated: no autograd graph over samples x layers
def run_san(x0: torch.Tensor, layers: list[AttentionLayer],
            configs: tuple[SANConfig, ...] | list[SANConfig], *, token_mask: torch.Tensor | None = None,
            dtype: torch.dtype = torch.float64, device: str | torch.device = "cpu",
            memory_budget: int = 2**30, use_model_windows: bool = True,
            metric_names: tuple[str, ...] | None = None,
            attention_stats: bool = False, settle: int | None = None) -> SANResult:
    """Run every configuration on every sample through ``layers``; keep only the metrics after each layer.

    Samples go in chunks (:func:`samples_per_chunk`); each chunk runs configuration after configuration
    through every layer, so only one chunk's states of one configuration are alive at a time. The first
    layer's projection and the layer-0 metrics, equal for every configuration, are computed once per chunk.
    ``token_mask`` marks valid tokens for the metrics (padding rows are still propagated; give
    exactly-N-token samples, as :mod:`rankcollapse.experiments.data` does, to keep attention free of padding).
    ``use_model_windows=False`` drops extracted layers' own sliding windows. ``metric_names`` keeps a subset
    of METRIC_NAMES (default: all; see :func:`_layer_metrics`); the metric EXACT_METRIC is always added
    (1.0 where mu and relative_mu are tracked exactly, see :mod:`rankcollapse.engine.exact`).
    ``attention_stats`` forms every attention matrix (not fused; slower) and adds the metrics of
    :data:`rankcollapse.core.metrics.ATTENTION_METRIC_NAMES`: each layer's change of mu split into the value
    maps' gain, attention's contraction and the rest (:func:`_decomposition`; from the tracked R where mu is
    tracked exactly) and its attention statistics; layer 0 reads as the identity layer (every one 1.0).
    ``settle`` (layers; None: compute every layer): a configuration that is not tracked exactly stops on a
    chunk once mu of every sample of the chunk has been within FLOOR_BAND of its floor
    (:func:`rankcollapse.core.metrics.below_floor`) for ``settle`` consecutive layers -- past that point its
    values are rounding noise; its later layers repeat the last computed layer's metrics (so they stay within
    the band) and carry SETTLED_METRIC = 1.0 (0.0 where computed). Layers computed are bit-identical to a run
    without ``settle``. Not with ``attention_stats`` (the decomposition is per layer).
    Deterministic: no randomness.
    Shapes: x0 [sample, token, d_model]; token_mask [sample, token] -> metrics [layer + 1, config, sample].
    """
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    if x0.ndim != 3 or not layers or x0.shape[-1] != layers[0].d_model:
        raise ValueError("x0 must be [sample, token, d_model] matching the layers' d_model, with >= 1 layer")
    if not configs:
        raise ValueError("configs must hold at least one SANConfig")
    _check_settle(settle, attention_stats, metric_names)
    dev = resolve_device(device)
    configs = tuple(configs)
    _check_model_norms(layers, {c.norm for c in configs})
    # exact mu wanted at all
    tracked = metric_names is None or bool({"mu", "relative_mu"} & set(metric_names))
    n_samples, n_tokens, _ = x0.shape
    # a layer repeated in the stack is moved (and laid out) once
    moved = {id(la): (la if use_model_windows
                      else AttentionLayer(**{**la.__dict__, "window": None})).to(dtype, dev)
             for la in layers}
    layers = [moved[id(la)] for la in layers]
    weights = {id(la): joint_weights(la) for la in layers}
    biases = [[attention_bias(la, c.build_mask(n_tokens).to(dev), dtype) for la in layers] for c in configs]
    scales = [[logit_scale(la, c.temperature) for la in layers] for c in configs]
    chunk = samples_per_chunk(n_tokens, max(layers, key=lambda la: la.n_heads), dtype, memory_budget, dev)

    metrics: dict[str, torch.Tensor] = {}
    for start in range(0, n_samples, chunk):
        stop = min(start + chunk, n_samples)
        x = x0[start:stop].to(device=dev, dtype=dtype)  # [sample, token, d_model]
        tm = None if token_mask is None else token_mask[start:stop].to(dev)  # [sample, token]
        measure = lambda X: _layer_metrics(X, tm, dtype, metric_names)  # noqa: E731
        first_qkv = project_qkv(x, weights[id(layers[0])])  # every configuration's first projection
        at_zero = measure(x)
        for c, config in enumerate(configs):
            exact = tracked and config.tracks_exactly and resolves_centred(biases[c], layers)
            flag = torch.full((stop - start,), float(exact), dtype=torch.float64, device=dev)  # [sample]
            computed = {} if settle is None else {SETTLED_METRIC: torch.zeros_like(flag)}
            flagged = lambda values: {**values, EXACT_METRIC: flag, **computed}  # noqa: E731
            before = x  # the states measured last, for mu when metric_names leaves it out
            # layer 0 reads as the identity layer
            per_layer = [flagged(at_zero)
                         | ({k: torch.ones_like(flag) for k in rc_metrics.ATTENTION_METRIC_NAMES}
                            if attention_stats else {})]
            X = x
            split = split_state(x) if exact else None  # (gamma, R, log s)
            streak = 0  # consecutive layers with every sample of the chunk within the floor band
            for t, layer in enumerate(layers):
                if settle is not None and streak >= settle:  # settled: hold the last computed layer
                    per_layer.append({**per_layer[-1], SETTLED_METRIC: torch.ones_like(flag)})
                    continue
                kw = dict(weights=weights[id(layer)], qkv=first_qkv if t == 0 else None,
                          explicit=attention_stats)
                if split is not None:
                    X, split, parts = split_step(X, split, layer, biases[c][t], scales[c][t], **kw)
                    values = exact_values(measure(X), X, split[1], split[2], tm)
                else:
                    X, parts = _layer_step(X, layer, config.norm, config.skip, biases[c][t], scales[c][t],
                                           **kw)
                    values = measure(X)
                if parts is not None:
                    mu_of = lambda v, states: (  # noqa: E731
                        v["mu"] if "mu" in v else rc_metrics.mu(states, tm))
                    values |= _decomposition(parts, biases[c][t], tm, mu_of(per_layer[-1], before),
                                             mu_of(values, X))
                per_layer.append(flagged(values))
                before = X
                if settle is not None and not exact:
                    streak = (streak + 1 if bool(rc_metrics.below_floor(values["mu"], values["floor"]).all())
                              else 0)
            for k in per_layer[0]:
                if k not in metrics:
                    metrics[k] = torch.empty(len(layers) + 1, len(configs), n_samples,
                                             dtype=per_layer[0][k].dtype)
                # [layer + 1, sample]
                metrics[k][:, c, start:stop] = torch.stack([m[k] for m in per_layer]).cpu()
    return SANResult(metrics=metrics, configs=configs, dtype=dtype, device=str(dev), samples_per_chunk=chunk)


def _check_settle(settle: int | None, attention_stats: bool, metric_names: tuple[str, ...] | None) -> None:
    """One ValueError for a ``settle`` of :func:`run_san` that is not None or an integer >= 1, that comes with
    ``attention_stats``, or whose run does not measure mu and its floor."""
    if settle is None:
        return
    if isinstance(settle, bool) or not isinstance(settle, int) or settle < 1:
        raise ValueError(f"settle must be None or an integer >= 1 (consecutive layers on the floor), "
                         f"got {settle!r}")
    if attention_stats:
        raise ValueError("settle cannot be combined with attention_stats: the decomposition is per layer; "
                         "use settle=None")
    if metric_names is not None and not {"mu", "floor"} <= set(metric_names):
        raise ValueError("settle needs metric_names to include 'mu' and 'floor' "
                         "(it stops on mu's floor band)")


def attention_sublayer(X: torch.Tensor, layer: AttentionLayer, mask: torch.Tensor,
                       temperature: float | None = None, *, norm: str = "none",
                       skip: bool = False) -> torch.Tensor:
    """The engine's layer for one mask, norm and skip, as used by the Hugging Face validation (by default
    the bare attention sublayer; ``norm="model", skip=True`` is the model's own attention block).

    Shapes: X [sample, token, d_model]; mask [token, token] bool -> [sample, token, d_model].
    """
    check_norm(norm)
    _check_model_norms([layer], (norm,))
    layer = layer.to(X.dtype, X.device)
    return _layer_step(X, layer, norm, skip, attention_bias(layer, mask.to(X.device), X.dtype),
                       logit_scale(layer, temperature))[0]
