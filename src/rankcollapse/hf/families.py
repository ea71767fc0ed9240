"""One record per supported Hugging Face ``config.model_type``: the only place a family's layout is described.

:mod:`rankcollapse.hf.extract` reads every family through its :class:`Family` record and names no family
itself; :mod:`rankcollapse.hf.testing` builds each family's tiny random model from the record's
``tiny_config``. Adding a family (Mistral, Qwen2, ...) is adding one record to :data:`FAMILIES` (and
checking it with ``tests/integration/test_hf_validation.py``, which runs every record's tiny model).
Every window is read per layer from the model's own modules or config (the attributes the installed
transformers derives from ``layer_types``, ``sliding_window``, ``use_sliding_window``, ``max_window_layers``,
``global_attn_every_n_layers``, ``local_attention``), never restated here.

Fields of :class:`Family` (module paths are dotted attribute paths; "layer" is one entry of ``layers``):

* ``model_type`` - the key, ``config.model_type``; ``causal`` - the model's own mask is causal (decoders).
* ``layers`` - the list of transformer layers, from the base model (``model.base_model``).
* ``attention`` - from the layer: the attention module, fed the attention input (a hook reads it) and
  holding the logit scale, the QK-norm, the sliding window, the soft-capping and the sinks named below.
* ``q``, ``k``, ``v``, ``o`` - from the layer: the projections. ``q == k == v`` is one fused projection,
  laid out as ``fused_layout`` says: ``"in_turn"``, its outputs are Q, K, V in turn (GPT-2's ``c_attn``);
  ``"per_head"``, each head's q, k, v in turn (outputs [head, 3, d_head], BLOOM's ``query_key_value``).
  The output of ``o`` is the attention sublayer's output (a hook reads it). ``weight_layout``: ``"linear"``
  (nn.Linear, weight [out, in]) or ``"conv1d"`` (GPT-2's Conv1D, weight [in, out]).
* ``grouped_kv`` - ``config.num_key_value_heads`` (when set) gives the K/V heads (grouped-query attention).
* ``scaling`` - attribute of the attention module holding the model's own logit scale (query scaling:
  Gemma-3's comes from ``query_pre_attn_scalar``); absent on the module: 1 / sqrt(head_dim).
* ``norm_position`` - ``"post"``: LN(Attn(X) + X); ``"pre"``: X + output_norm(Attn(norm(X))).
  ``norm`` and ``output_norm`` (from the layer) are :class:`Norm` records; ``output_norm`` is the
  attention output's own norm before the residual sum (pre only), None when there is none. A layer whose
  ``norm`` module is ``nn.Identity`` has no norm of its own (ModernBERT's first layer).
* ``rotary`` - a :class:`Rotary` record (rotary embedding, its module and per-layer bases) or None.
* ``position_bias`` - from the base model: a method taking a probe [1, token, d_model] and returning an
  additive logit bias [1, head, token, token] (MPNet's relative positions), or None.
* ``alibi`` - an :class:`Alibi` record (the base model's own method building its ALiBi bias), or None. The
  engine keeps ALiBi as the relative bias -m_h |i - j| (:func:`rankcollapse.core.masks.decay_bias`) with
  the slopes m_h read off the bias that method builds; HF adds m_h times the key position (less a
  constant), which differs from -m_h (i - j) by a constant per row on the causal keys: the softmax, hence A,
  is the same.
* ``qk_norm`` - (query norm, key norm), :class:`Norm` records from the attention module, or None.
* ``softcap`` - attribute of the attention module holding attention-logit soft-capping (the engine's
  ``AttentionLayer.softcap``); None when the family has none.
* ``sinks`` - attribute of the attention module holding learned per-head attention sinks (the engine's
  ``AttentionLayer.sinks``); None when the family has none.
* ``sliding_window`` - path from the attention module to its own sliding window, per layer (HF keeps keys at
  distance < sliding_window, stored as ``window = sliding_window - 1``; absent or None: no window), or None.
  ``"sliding_window"`` where the module sets it per layer type, ``"config.sliding_window"`` where the
  model applies the config's one window to every layer (Mistral, Phi-3).
* ``refused`` - config fields (dotted paths from the config) the engine does not reproduce: a config that
  sets one (a true value) is refused with one ValueError naming it, never computed otherwise.
* ``block_end`` - (module from the layer, ``"input"`` or ``"output"``): where HF's attention block (the
  attention, its norms and the residual sum) ends, for the block validation.
* ``tiny_config`` - keyword arguments of ``AutoConfig.for_model(model_type, ...)`` for the tiny random
  model of the tests (d_model 32, 3 layers; a window of 4 tokens where the family has one, on window and
  global layers both where the family has both).

The records, in short (the attention sublayer's own norm is the ``model`` norm of the engine):

| family | norm (position) | output norm | also |
|---|---|---|---|
| ``bert`` (MiniLM) | ``attention.output.LayerNorm`` (post: LN(dense(attn) + X)) | — | |
| ``mpnet`` | ``attention.LayerNorm`` (post) | — | relative position bias |
| ``gpt2`` | ``ln_1`` (pre) | — | fused Conv1D ``c_attn`` |
| ``llama`` (SmolLM2) | ``input_layernorm``, RMSNorm (pre) | — [1] | grouped KV, rotary |
| ``gemma3_text`` | ``input_layernorm``, RMSNorm, gain 1 + w (pre) | ``post_attention_layernorm``, gain 1 + w
  | [2] |
| ``mistral`` | ``input_layernorm``, RMSNorm (pre) | — [1] | grouped KV, rotary, one causal window on every
  layer |
| ``qwen2`` | ``input_layernorm``, RMSNorm (pre) | — [1] | [3] |
| ``qwen3`` | ``input_layernorm``, RMSNorm (pre) | — [1] | [3], QK-norm (gain w) |
| ``phi3`` | ``input_layernorm``, RMSNorm (pre) | — [1] | fused ``qkv_proj``, partial rotary, [4] |
| ``gemma2`` | ``input_layernorm``, RMSNorm, gain 1 + w (pre) | ``post_attention_layernorm``, gain 1 + w
  | [5] |
| ``modernbert`` | ``attn_norm``, LayerNorm (pre; none in layer 0) | — | [6] |
| ``gpt_oss`` | ``input_layernorm``, RMSNorm (pre) | — [1] | [7] |
| ``bloom`` | ``input_layernorm``, LayerNorm (pre) | — | ALiBi, fused per-head ``query_key_value``, [8] |
| ``mpt`` | ``norm_1``, LayerNorm without bias (pre) | — | ALiBi, fused ``Wqkv``, [9] |

[1] Llama's ``post_attention_layernorm`` (and Mistral's, Qwen's, Phi-3's, GPT-OSS's) is the MLP's pre-norm,
not an output norm of the attention.
[2] Gemma-3: grouped KV, QK-norm (gain 1 + w), rotary bases per layer type, its own sliding windows; the
gains are read as 1 + w (``gain_offset``), so an extracted norm's weight is always the gain itself.
[3] Qwen2/Qwen3: grouped KV, rotary (Qwen2 with Q/K/V biases); a causal window only on the layers the config
marks (``use_sliding_window``, ``max_window_layers`` -> ``layer_types``), read from each attention module.
[4] Phi-3: the config's one window (``sliding_window``, None in most checkpoints) on every layer.
[5] Gemma-2: grouped KV, query scale from ``query_pre_attn_scalar``, attention-logit soft-capping
(``attn_logit_softcapping``), causal windows on the ``sliding_attention`` layers alternating with global ones.
[6] ModernBERT: an encoder (not causal) with a fused ``Wqkv``, *bidirectional* windows |i - j| <= w on the
``sliding_attention`` layers (``local_attention`` = 2w + 1 tokens, every ``global_attn_every_n_layers``-th
layer global) and its own rotary base for local and for global layers.
[7] GPT-OSS: grouped KV, YaRN rotary, causal windows on alternating layers, and learned per-head attention
sinks: each row of A sums to less than 1, which breaks Theorem 1's row-stochastic A (A1 = 1).
[8] BLOOM: ALiBi from ``build_alibi_tensor`` (m_h times the key position), the scale
``inv_norm_factor``; refused: ``apply_residual_connection_post_layernorm`` (the skip would add the normed
input) and ``slow_but_exact`` (with ``pretraining_tp`` > 1 HF then sums the output projection over slices
without its bias; refused whenever set).
[9] MPT: ALiBi from ``build_mpt_alibi_tensor`` (m_h (j - L + 1) for the config's ``max_seq_len`` L; HF
ignores ``attn_config.alibi`` and ``alibi_bias_max``, and so does the record), the scale ``softmax_scale``
(``attn_config.softmax_scale`` or 1 / sqrt(d_head)); refused: ``attn_config.clip_qkv`` (Q, K, V clamped).
The decoders (``gpt2``, ``llama``, ``gemma3_text``, ``mistral``, ``qwen2``, ``qwen3``, ``phi3``, ``gemma2``,
``gpt_oss``, ``bloom``, ``mpt``) are causal.

>>> family_of(type("Config", (), {"model_type": "gpt2"})()).causal
True
>>> family_of(type("Config", (), {"model_type": "t5"})())  # doctest: +ELLIPSIS
Traceback (most recent call last):
ValueError: model family must be one of bert, mpnet, gpt2, ...; got 't5'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

NORM_KINDS = ("layernorm", "rms")
FUSED_LAYOUTS = ("in_turn", "per_head")  # a fused projection's outputs: Q, K, V in turn, or per head
ALIBI_CALLS = ("mask", "length")  # how a family's ALiBi method is called (Alibi.call)


@dataclass(frozen=True)
class Norm:
    """One norm module of a family: where it is and what it computes."""

    path: str  # from the layer (``norm``, ``output_norm``) or from the attention module (``qk_norm``)
    kind: str = "layernorm"  # "layernorm" (weight, bias) or "rms" (weight only)
    eps: str = "eps"  # the module attribute holding eps (Llama's RMSNorm: "variance_epsilon")
    gain_offset: float = 0.0  # the gain is gain_offset + the stored weight (Gemma-3 stores w, gain 1 + w)

    def __post_init__(self) -> None:
        if self.kind not in NORM_KINDS:
            raise ValueError(f"kind must be one of {', '.join(NORM_KINDS)}; got {self.kind!r}")


@dataclass(frozen=True)
class Rotary:
    """A family's rotary embedding: buffers ``inv_freq`` and ``attention_scaling`` of one module."""

    path: str = "rotary_emb"  # from the base model
    layer_type: str | None = None  # path from the layer to its layer type, which prefixes the buffer names
    # (Gemma-3's and ModernBERT's per-layer bases: "sliding_attention_inv_freq", ...); None = one base for all


@dataclass(frozen=True)
class Alibi:
    """A family's ALiBi: the base model's own method building its bias, linear in the key position."""

    path: str  # from the base model
    call: str  # "mask": path(attention_mask [1, token], n_heads, dtype) (BLOOM); "length":
    # path(n_heads, n_tokens) (MPT); either returns a bias whose last dimension is the key position

    def __post_init__(self) -> None:
        if self.call not in ALIBI_CALLS:
            raise ValueError(f"call must be one of {', '.join(ALIBI_CALLS)}; got {self.call!r}")


@dataclass(frozen=True, kw_only=True)
class Family:
    """The layout of one Hugging Face model family (fields: the module docstring)."""

    model_type: str
    causal: bool
    layers: str
    attention: str
    q: str
    k: str
    v: str
    o: str
    weight_layout: str = "linear"
    fused_layout: str = "in_turn"
    grouped_kv: bool = False
    scaling: str = "scaling"
    norm_position: str
    norm: Norm
    output_norm: Norm | None = None
    rotary: Rotary | None = None
    position_bias: str | None = None
    alibi: Alibi | None = None
    qk_norm: tuple[Norm, Norm] | None = None
    softcap: str | None = None
    sinks: str | None = None
    sliding_window: str | None = None
    refused: tuple[str, ...] = ()
    block_end: tuple[str, str]
    tiny_config: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.weight_layout not in ("linear", "conv1d"):
            raise ValueError(f"weight_layout must be 'linear' or 'conv1d'; got {self.weight_layout!r}")
        if len({self.q, self.k, self.v}) == 2:
            raise ValueError("q, k, v must be three projections or one fused projection (all three equal)")
        if self.fused_layout not in FUSED_LAYOUTS:
            raise ValueError(f"fused_layout must be one of {', '.join(FUSED_LAYOUTS)}; "
                             f"got {self.fused_layout!r}")
        if self.fused_layout == "per_head" and (not self.fused_qkv or self.grouped_kv):
            raise ValueError("fused_layout='per_head' needs one fused projection and no grouped K/V heads")
        if self.position_bias is not None and self.alibi is not None:
            raise ValueError("a family has a position_bias or an alibi, not both")
        if self.norm_position not in ("pre", "post"):
            raise ValueError(f"norm_position must be 'pre' or 'post'; got {self.norm_position!r}")
        if self.output_norm is not None and self.norm_position != "pre":
            raise ValueError("output_norm is allowed only with norm_position='pre'")
        if self.block_end[1] not in ("input", "output"):
            raise ValueError(f"block_end must be (module, 'input' or 'output'); got {self.block_end!r}")

    @property
    def fused_qkv(self) -> bool:
        """Whether Q, K and V come out of one projection (split along its outputs)."""
        return self.q == self.k == self.v


_TINY = {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
         "intermediate_size": 48, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
         "max_position_embeddings": 64}  # d_model 32, 3 layers, 4 heads: the tiny models of the tests

# Llama-style decoders' norm in front of the attention
_RMS_INPUT = Norm("input_layernorm", "rms", "variance_epsilon")
_QWEN_WINDOWS = {"num_key_value_heads": 2, "use_sliding_window": True, "sliding_window": 4,
                 "max_window_layers": 1}  # the config marks layers >= max_window_layers as windowed

_RECORDS = (
    Family(model_type="bert", causal=False, layers="encoder.layer", attention="attention.self",
           q="attention.self.query", k="attention.self.key", v="attention.self.value",
           o="attention.output.dense", norm_position="post", norm=Norm("attention.output.LayerNorm"),
           block_end=("attention.output", "output"), tiny_config=dict(_TINY)),
    Family(model_type="mpnet", causal=False, layers="encoder.layer", attention="attention.attn",
           q="attention.attn.q", k="attention.attn.k", v="attention.attn.v", o="attention.attn.o",
           norm_position="post", norm=Norm("attention.LayerNorm"),
           position_bias="encoder.compute_position_bias", block_end=("attention", "output"),
           tiny_config=dict(_TINY)),
    Family(model_type="gpt2", causal=True, layers="h", attention="attn", q="attn.c_attn", k="attn.c_attn",
           v="attn.c_attn", o="attn.c_proj", weight_layout="conv1d", norm_position="pre", norm=Norm("ln_1"),
           block_end=("ln_2", "input"),
           tiny_config={"vocab_size": 100, "n_embd": 32, "n_layer": 3, "n_head": 4, "n_positions": 64,
                        "bos_token_id": 1, "eos_token_id": 2}),
    Family(model_type="llama", causal=True, layers="layers", attention="self_attn", q="self_attn.q_proj",
           k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj", grouped_kv=True,
           norm_position="pre", norm=_RMS_INPUT, rotary=Rotary(), sliding_window="sliding_window",
           block_end=("post_attention_layernorm", "input"),
           tiny_config={**_TINY, "num_key_value_heads": 2}),
    Family(model_type="gemma3_text", causal=True, layers="layers", attention="self_attn",
           q="self_attn.q_proj", k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj",
           grouped_kv=True, norm_position="pre", norm=Norm("input_layernorm", "rms", gain_offset=1.0),
           output_norm=Norm("post_attention_layernorm", "rms", gain_offset=1.0),
           rotary=Rotary(layer_type="self_attn.layer_type"),
           qk_norm=(Norm("q_norm", "rms", gain_offset=1.0), Norm("k_norm", "rms", gain_offset=1.0)),
           softcap="attn_logit_softcapping", sliding_window="sliding_window",
           block_end=("pre_feedforward_layernorm", "input"),
           tiny_config={**_TINY, "num_key_value_heads": 1, "head_dim": 16, "sliding_window": 4,
                        "query_pre_attn_scalar": 16,
                        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}),
    Family(model_type="mistral", causal=True, layers="layers", attention="self_attn", q="self_attn.q_proj",
           k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj", grouped_kv=True,
           norm_position="pre", norm=_RMS_INPUT, rotary=Rotary(), sliding_window="config.sliding_window",
           block_end=("post_attention_layernorm", "input"),
           tiny_config={**_TINY, "num_key_value_heads": 2, "sliding_window": 4}),
    Family(model_type="qwen2", causal=True, layers="layers", attention="self_attn", q="self_attn.q_proj",
           k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj", grouped_kv=True,
           norm_position="pre", norm=_RMS_INPUT, rotary=Rotary(), sliding_window="sliding_window",
           block_end=("post_attention_layernorm", "input"), tiny_config={**_TINY, **_QWEN_WINDOWS}),
    Family(model_type="qwen3", causal=True, layers="layers", attention="self_attn", q="self_attn.q_proj",
           k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj", grouped_kv=True,
           norm_position="pre", norm=_RMS_INPUT, rotary=Rotary(),
           qk_norm=(Norm("q_norm", "rms", "variance_epsilon"), Norm("k_norm", "rms", "variance_epsilon")),
           sliding_window="sliding_window", block_end=("post_attention_layernorm", "input"),
           tiny_config={**_TINY, **_QWEN_WINDOWS, "head_dim": 8, "attention_bias": True}),
    Family(model_type="phi3", causal=True, layers="layers", attention="self_attn", q="self_attn.qkv_proj",
           k="self_attn.qkv_proj", v="self_attn.qkv_proj", o="self_attn.o_proj", grouped_kv=True,
           norm_position="pre", norm=_RMS_INPUT, rotary=Rotary(), sliding_window="config.sliding_window",
           block_end=("post_attention_layernorm", "input"),
           tiny_config={**_TINY, "num_key_value_heads": 2, "sliding_window": 4,
                        "partial_rotary_factor": 0.5}),
    Family(model_type="gemma2", causal=True, layers="layers", attention="self_attn", q="self_attn.q_proj",
           k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj", grouped_kv=True,
           norm_position="pre", norm=Norm("input_layernorm", "rms", gain_offset=1.0),
           output_norm=Norm("post_attention_layernorm", "rms", gain_offset=1.0), rotary=Rotary(),
           softcap="attn_logit_softcapping", sliding_window="sliding_window",
           block_end=("pre_feedforward_layernorm", "input"),
           tiny_config={**_TINY, "num_key_value_heads": 2, "head_dim": 16, "query_pre_attn_scalar": 16,
                        "sliding_window": 4, "attn_logit_softcapping": 2.0}),
    Family(model_type="modernbert", causal=False, layers="layers", attention="attn", q="attn.Wqkv",
           k="attn.Wqkv", v="attn.Wqkv", o="attn.Wo", norm_position="pre", norm=Norm("attn_norm"),
           rotary=Rotary(layer_type="attention_type"), sliding_window="sliding_window",
           block_end=("mlp_norm", "input"),
           # a local base far from the global one, so that it matters at 12 tokens
           tiny_config={**_TINY, "cls_token_id": 1, "sep_token_id": 2, "local_attention": 4,
                        "global_attn_every_n_layers": 2, "local_rope_theta": 100.0, "attention_bias": True,
                        "norm_bias": True}),
    Family(model_type="gpt_oss", causal=True, layers="layers", attention="self_attn", q="self_attn.q_proj",
           k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj", grouped_kv=True,
           norm_position="pre", norm=_RMS_INPUT, rotary=Rotary(), sinks="sinks",
           sliding_window="sliding_window", block_end=("post_attention_layernorm", "input"),
           tiny_config={**_TINY, "num_key_value_heads": 2, "head_dim": 8, "sliding_window": 4,
                        "num_local_experts": 2, "num_experts_per_tok": 1,
                        # YaRN, 64 / 32 positions
                        "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 2.0,
                                            "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                                            "original_max_position_embeddings": 32}}),
    Family(model_type="bloom", causal=True, layers="h", attention="self_attention",
           q="self_attention.query_key_value", k="self_attention.query_key_value",
           v="self_attention.query_key_value", o="self_attention.dense", fused_layout="per_head",
           scaling="inv_norm_factor", norm_position="pre", norm=Norm("input_layernorm"),
           alibi=Alibi("build_alibi_tensor", "mask"),
           refused=("apply_residual_connection_post_layernorm", "slow_but_exact"),
           block_end=("post_attention_layernorm", "input"), tiny_config=dict(_TINY)),
    Family(model_type="mpt", causal=True, layers="blocks", attention="attn", q="attn.Wqkv", k="attn.Wqkv",
           v="attn.Wqkv", o="attn.out_proj", scaling="softmax_scale", norm_position="pre",
           norm=Norm("norm_1"), alibi=Alibi("build_mpt_alibi_tensor", "length"),
           refused=("attn_config.clip_qkv",), block_end=("norm_2", "input"),
           # its own logit scale, not 1 / sqrt(d_head) = 0.35
           tiny_config={**_TINY, "max_seq_len": 64, "attn_config": {"softmax_scale": 0.25}}),
)

FAMILIES: dict[str, Family] = {record.model_type: record for record in _RECORDS}


def family_of(config_or_model: object) -> Family:
    """The record of a model's (``.config``) or a config's ``model_type``; one ValueError naming it and the
    supported families when there is none (an unknown family never takes another family's path), or naming
    the config field when the config sets one the record refuses (``refused``)."""
    config = getattr(config_or_model, "config", config_or_model)
    model_type = getattr(config, "model_type", None)
    record = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if record is None:
        raise ValueError(f"model family must be one of {', '.join(FAMILIES)}; got {model_type!r}")
    for path in record.refused:
        value = functools.reduce(lambda obj, name: getattr(obj, name, None), path.split("."), config)
        if value:
            raise ValueError(f"config.{path} = {value!r} is not reproduced by the engine; {model_type} "
                             f"models are supported only without it")
    return record
