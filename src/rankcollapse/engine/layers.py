"""The engine's layers: the weights of one self-attention sublayer and their random initialisation.

:class:`AttentionLayer` holds one layer's weights (randomly initialized by :func:`random_layers`, or extracted
from a trained model by :mod:`rankcollapse.hf.extract`) and the layer's own trained norm. The configuration
a stack of layers runs under (``SANConfig``) lives with the run loop in :mod:`rankcollapse.engine.run`: it is
what one run varies, not part of a layer.

A layer's own norm (norm ``model`` of the engine, ``AttentionLayer.norm``) sits at the layer's own position:

* ``norm_position="post"`` (BERT, MiniLM, MPNet; fresh random layers): ``X' = N(Attn(X) [+ X])`` -- the
  placement of every other norm, with the trained γ, β (Dong et al.'s SAN + LN keeps exactly this, without
  the skip);
* ``norm_position="pre"`` (GPT-2, Llama/SmolLM2, Gemma-3): ``X' = O(Attn(N(X))) [+ X]``, N the norm in
  front of the attention (``input_layernorm``, ``ln_1``; the identity where the layer has none, as
  ModernBERT's first layer, whose input is already normalized) and O the norm on its output before the
  residual sum where the model has one (Gemma-2's and Gemma-3's ``post_attention_layernorm``), else the
  identity. Llama's
  ``post_attention_layernorm`` despite its name belongs to the MLP sublayer (it normalizes the residual
  stream in front of the MLP), so the SAN drops it, as it drops the MLP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rankcollapse.core.checks import check_choice
from rankcollapse.core.norms import TrainedNorm, fresh_layernorm

# how random layers are drawn: PyTorch's nn.Linear default, or Hugging Face's N(0, 0.02)
INIT_NAMES = ("torch", "hf")
NORM_POSITIONS = ("post", "pre")  # where a layer's own norm sits (module docstring)


@dataclass(frozen=True, eq=False)
class AttentionLayer:
    """Weights of one multi-head self-attention sublayer (any family; see :mod:`rankcollapse.hf.load`).

    Shapes: W_Q [head, d_model, d_head]; W_K, W_V [kv_head, d_model, d_head] (kv_head divides head:
    grouped-query attention, query head h reads kv head h // (head // kv_head)); W_O [head, d_head,
    d_model] or None (heads concatenated, needs head * d_head == d_model); b_Q [head, d_head];
    b_K, b_V [kv_head, d_head]; b_O [d_model]; q_gain, k_gain [d_head]; rope_inv_freq [d_rot // 2]
    (d_rot <= d_head features rotated); score_bias [head, token, token]; sinks [head]; norm, output_norm: see
    :class:`rankcollapse.core.norms.TrainedNorm` [d_model].

    ``softcap`` and ``sinks`` (default off) are computed with explicit logits
    (:mod:`rankcollapse.engine.attention`); with ``sinks`` the rows of A sum to less than 1, so such layers
    are never tracked exactly (:func:`rankcollapse.engine.exact.resolves_centred`).
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
    softcap: float | None = None  # logit soft-capping (Gemma-2): logits -> softcap * tanh(logits / softcap)
    # per-head sink logit (GPT-OSS), one extra softmax column dropped after it
    sinks: torch.Tensor | None = None
    # the sublayer's own norm (used by norm "model"); None = the layer has none
    # (a pre-norm layer without one feeds its attention X itself: ModernBERT's first layer)
    norm: TrainedNorm | None = None
    # "post": X' = norm(Attn(X) [+ X]); "pre": X' = output_norm(Attn(norm(X))) [+ X]
    norm_position: str = "post"
    # pre-norm only: norm of the attention output before the residual sum
    output_norm: TrainedNorm | None = None

    def __post_init__(self) -> None:
        if self.W_Q.ndim != 3 or self.W_K.shape != self.W_V.shape or self.W_K.ndim != 3:
            raise ValueError("W_Q must be [head, d_model, d_head] and W_K, W_V equal "
                             "[kv_head, d_model, d_head]")
        n_heads, d_model, d_head = self.W_Q.shape
        n_kv = self.W_K.shape[0]
        if self.W_K.shape[1:] != (d_model, d_head) or n_heads % n_kv:
            raise ValueError(f"W_K, W_V must be [kv_head, {d_model}, {d_head}] "
                             f"with kv_head dividing {n_heads}")
        if self.W_O is None and n_heads * d_head != d_model:
            raise ValueError("W_O may be None only when head * d_head == d_model")
        if self.W_O is not None and self.W_O.shape != (n_heads, d_head, d_model):
            raise ValueError(f"W_O must be [{n_heads}, {d_head}, {d_model}], got {tuple(self.W_O.shape)}")
        if self.window is not None and self.window < 0:
            raise ValueError(f"window must be None or an integer >= 0, got {self.window!r}")
        if self.softcap is not None and not self.softcap > 0:
            raise ValueError(f"softcap must be None or > 0, got {self.softcap!r}")
        if self.sinks is not None and self.sinks.shape != (n_heads,):
            raise ValueError(f"sinks must be [{n_heads}] (one logit per head), got {tuple(self.sinks.shape)}")
        if self.norm_position not in NORM_POSITIONS:
            raise ValueError(f"norm_position must be one of {', '.join(NORM_POSITIONS)}; "
                             f"got {self.norm_position!r}")
        if self.output_norm is not None and self.norm_position != "pre":
            raise ValueError("output_norm is allowed only with norm_position='pre' "
                             "(a post-norm layer has one norm)")
        for name in ("norm", "output_norm"):
            value = getattr(self, name)
            if value is not None and value.weight.shape != (d_model,):
                raise ValueError(f"{name} must act on d_model={d_model} features, "
                                 f"got weight {tuple(value.weight.shape)}")

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
        raise ValueError(f"need n_layers >= 1 and n_heads dividing d_model, "
                         f"got {n_layers=}, {d_model=}, {n_heads=}")
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
            # [head, d_head, d_model]
            W_O=wo.reshape(n_heads, d_head, d_model) if output_projection else None,
            b_O=bo if output_projection else None, norm=fresh_layernorm(d_model, dtype)))
    return layers
