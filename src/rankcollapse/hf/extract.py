"""From a Hugging Face model to the SAN engine: attention weights, X(0), hooks on the real forward.

Families (``FAMILIES``, by ``config.model_type``): ``bert`` (MiniLM), ``mpnet`` (relative position bias,
stored as an additive logit bias), ``gpt2`` (Conv1D weights), ``llama`` (SmolLM2: grouped-query heads,
rotary embedding) and ``gemma3_text`` (Gemma-3: grouped-query heads, QK-norm with gain 1 + w, per-layer
rotary bases, its own sliding windows: HF allows keys at distance < sliding_window, stored as
``window = sliding_window - 1``). Each layer's attention sublayer is Q/K/V projection -> masked softmax
-> output projection; the HF module's own ``scaling`` is kept.

Each layer also carries the attention sublayer's own trained norm (norm ``model`` of the engine,
:class:`rankcollapse.core.norms.TrainedNorm`), read per layer with the module's own eps:

| family | norm (position) | output norm |
|---|---|---|
| ``bert`` | ``attention.output.LayerNorm`` (post: LN(dense(attn) + X)) | — |
| ``mpnet`` | ``attention.LayerNorm`` (post) | — |
| ``gpt2`` | ``ln_1`` (pre) | — |
| ``llama`` | ``input_layernorm``, RMSNorm (pre) | — (``post_attention_layernorm`` is the MLP's pre-norm) |
| ``gemma3_text`` | ``input_layernorm``, RMSNorm, gain 1 + w (pre) | ``post_attention_layernorm``, gain 1 + w |

:func:`validate_norms` checks each extracted norm on the input HF feeds that norm module;
:func:`validate_attention_block` checks the whole block (norm "model" with the skip) against HF.

Hidden states are read with hooks that are always removed, never with ``output_hidden_states`` for all
layers at once: :func:`attention_io` captures, per layer, the input the model feeds its own attention and
that attention's output (for the validation); :func:`full_transformer_metrics` computes the metrics of
every layer's output on the fly (the "full transformer" reference curve).

Used by: the pretrained experiments, ``tests/integration/test_hf_validation.py``, the benchmark.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics as rc_metrics
from rankcollapse.core.norms import TrainedNorm, apply_trained_norm
from rankcollapse.engine.san import AttentionLayer, attention_sublayer

FAMILIES = ("bert", "mpnet", "gpt2", "llama", "gemma3_text")
CAUSAL_FAMILIES = ("gpt2", "llama", "gemma3_text")


class _Stop(Exception):
    """Raised by a hook to end a forward pass early."""


def model_family(model: torch.nn.Module) -> str:
    """``config.model_type``, checked against FAMILIES."""
    family = model.config.model_type
    if family not in FAMILIES:
        raise ValueError(f"model family must be one of {', '.join(FAMILIES)}; got {family!r}")
    return family


def model_mask(model: torch.nn.Module, n_tokens: int) -> torch.Tensor:
    """The mask the model itself uses (before its own sliding windows).  Shapes: -> [token, token] bool."""
    return rc_masks.causal_mask(n_tokens) if model_family(model) in CAUSAL_FAMILIES else rc_masks.complete_mask(n_tokens)


def _base(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "base_model", model)


def _layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    base = _base(model)
    family = model_family(model)
    if family in ("bert", "mpnet"):
        return list(base.encoder.layer)
    return list(base.h if family == "gpt2" else base.layers)


def _attention_modules(model: torch.nn.Module) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
    """Per layer: (module whose input is the attention input, module whose output is the attention output)."""
    family = model_family(model)
    pairs = {"bert": lambda la: (la.attention.self, la.attention.output.dense),
             "mpnet": lambda la: (la.attention.attn, la.attention.attn.o),
             "gpt2": lambda la: (la.attn, la.attn.c_proj)}
    pick = pairs.get(family, lambda la: (la.self_attn, la.self_attn.o_proj))
    return [pick(layer) for layer in _layers(model)]


def _norm_modules(model: torch.nn.Module, index: int) -> tuple[str, torch.nn.Module, torch.nn.Module | None]:
    """The attention sublayer's own norm modules: (position, norm, output norm or None); table in the module doc."""
    family, layer = model_family(model), model_layer(model, index)
    if family == "bert":
        return "post", layer.attention.output.LayerNorm, None
    if family == "mpnet":
        return "post", layer.attention.LayerNorm, None
    if family == "gpt2":
        return "pre", layer.ln_1, None
    if family == "llama":
        return "pre", layer.input_layernorm, None
    return "pre", layer.input_layernorm, layer.post_attention_layernorm  # gemma3_text


def trained_norm(module: torch.nn.Module, family: str) -> TrainedNorm:
    """A HF norm module as a :class:`TrainedNorm` (float64 copies): nn.LayerNorm (weight, bias, eps),
    Llama's RMSNorm (weight, variance_epsilon), Gemma-3's RMSNorm (gain 1 + weight, eps)."""
    if isinstance(module, torch.nn.LayerNorm):
        bias = None if module.bias is None else module.bias.detach().double().clone()
        return TrainedNorm("layernorm", module.weight.detach().double().clone(), bias, float(module.eps))
    if family == "gemma3_text":
        return TrainedNorm("rms", 1.0 + module.weight.detach().double(), None, float(module.eps))
    if family == "llama":
        return TrainedNorm("rms", module.weight.detach().double().clone(), None, float(module.variance_epsilon))
    raise ValueError(f"norm module {type(module).__name__} of family {family!r} is not supported")


def _own_norms(model: torch.nn.Module, index: int) -> dict:
    """AttentionLayer keywords for layer ``index``'s own norm: norm, norm_position, output_norm."""
    family = model_family(model)
    position, norm, output = _norm_modules(model, index)
    return {"norm": trained_norm(norm, family), "norm_position": position,
            "output_norm": None if output is None else trained_norm(output, family)}


def _split_heads(weight_in_out: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Shapes: [d_model, head * d_head] -> [head, d_model, d_head]."""
    d_model = weight_in_out.shape[0]
    return weight_in_out.reshape(d_model, n_heads, -1).permute(1, 0, 2)  # [head, d_model, d_head]


def _bias(bias: torch.Tensor | None, n_heads: int) -> torch.Tensor | None:
    return None if bias is None else bias.reshape(n_heads, -1)  # [head, d_head]


def _linear_layer(q, k, v, o, n_heads: int, n_kv: int, **extra) -> AttentionLayer:
    """From nn.Linear projections (weight [out, in]).  Shapes: W_O [head, d_head, d_model]."""
    return AttentionLayer(
        W_Q=_split_heads(q.weight.T, n_heads), W_K=_split_heads(k.weight.T, n_kv), W_V=_split_heads(v.weight.T, n_kv),
        W_O=o.weight.T.reshape(n_heads, -1, o.weight.shape[0]),  # [head, d_head, d_model]
        b_Q=_bias(q.bias, n_heads), b_K=_bias(k.bias, n_kv), b_V=_bias(v.bias, n_kv), b_O=o.bias, **extra)


@torch.no_grad()
def extract_layers(model: torch.nn.Module, n_tokens: int = 512) -> list[AttentionLayer]:
    """Every layer's attention weights as float64 copies (the engine casts to its dtype).

    ``n_tokens`` bounds the token count of MPNet's relative position bias (other families ignore it).
    Shapes: see :class:`rankcollapse.engine.san.AttentionLayer`.
    """
    family, config, base = model_family(model), model.config, _base(model)
    n_heads = config.num_attention_heads
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    layers = []
    if family == "mpnet":
        probe = torch.zeros(1, n_tokens, config.hidden_size)
        position_bias = base.encoder.compute_position_bias(probe)[0]  # [head, token, token]
    for i, (attn, _) in enumerate(_attention_modules(model)):
        scaling = float(getattr(attn, "scaling", attn_head_dim(config) ** -0.5))
        if family == "bert":
            layer = _linear_layer(attn.query, attn.key, attn.value, model_layer(model, i).attention.output.dense,
                                  n_heads, n_kv, scaling=scaling)
        elif family == "mpnet":
            layer = _linear_layer(attn.q, attn.k, attn.v, attn.o, n_heads, n_kv, scaling=scaling,
                                  score_bias=position_bias)
        elif family == "gpt2":
            d_model = config.hidden_size
            w_q, w_k, w_v = attn.c_attn.weight.split(d_model, dim=1)  # Conv1D weight [in, out]: each [d, d]
            b_q, b_k, b_v = attn.c_attn.bias.split(d_model)
            layer = AttentionLayer(
                W_Q=_split_heads(w_q, n_heads), W_K=_split_heads(w_k, n_heads), W_V=_split_heads(w_v, n_heads),
                W_O=attn.c_proj.weight.reshape(n_heads, -1, d_model),  # [head, d_head, d_model]
                b_Q=_bias(b_q, n_heads), b_K=_bias(b_k, n_heads), b_V=_bias(b_v, n_heads), b_O=attn.c_proj.bias,
                scaling=scaling)
        elif family == "llama":
            rope = base.rotary_emb
            layer = _linear_layer(attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, n_heads, n_kv,
                                  scaling=scaling, rope_inv_freq=rope.inv_freq, rope_scale=float(rope.attention_scaling),
                                  window=_window(getattr(attn, "sliding_window", None)))
        else:  # gemma3_text
            kind = attn.layer_type
            rope = base.rotary_emb
            layer = _linear_layer(
                attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, n_heads, n_kv, scaling=scaling,
                q_gain=1.0 + attn.q_norm.weight.float(), k_gain=1.0 + attn.k_norm.weight.float(),
                qk_norm_eps=attn.q_norm.eps, rope_inv_freq=getattr(rope, f"{kind}_inv_freq"),
                rope_scale=float(getattr(rope, f"{kind}_attention_scaling")), window=_window(attn.sliding_window))
            if getattr(attn, "attn_logit_softcapping", None) is not None:
                raise ValueError("attention logit soft-capping is not supported by the SAN engine")
        own = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v  # a float64 model's .to() is no copy
               for k, v in {**layer.__dict__, **_own_norms(model, i)}.items()}
        layers.append(AttentionLayer(**own).to(torch.float64))
    return layers


def attn_head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def model_layer(model: torch.nn.Module, index: int) -> torch.nn.Module:
    return _layers(model)[index]


def _window(sliding_window: int | None) -> int | None:
    """HF keeps keys at distance < sliding_window; the engine's window is the largest allowed distance."""
    return None if sliding_window is None else int(sliding_window) - 1


def _first_tensor(value) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else value[0]


@contextlib.contextmanager
def _hooks(handles: list) -> Iterator[None]:
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def embed(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """X(0): the hidden state the model feeds its first layer (embeddings, positions, scaling, norm).

    Shapes: input_ids [sample, token] -> [sample, token, d_model].
    """
    captured = {}

    def grab(module, args, kwargs):
        captured["x"] = (args[0] if args else kwargs["hidden_states"]).detach().clone()
        raise _Stop

    with _hooks([model_layer(model, 0).register_forward_pre_hook(grab, with_kwargs=True)]):
        with contextlib.suppress(_Stop):
            model(input_ids=input_ids)
    return captured["x"]


@torch.no_grad()
def attention_io(model: torch.nn.Module, input_ids: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, (the input the model feeds its attention, that attention sublayer's output).

    Shapes: input_ids [sample, token] -> each pair ([sample, token, d_model], [sample, token, d_model]).
    """
    pairs: list[list[torch.Tensor | None]] = [[None, None] for _ in _layers(model)]
    handles = []
    for i, (attn, out) in enumerate(_attention_modules(model)):
        def grab_in(module, args, kwargs, i=i):
            pairs[i][0] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

        def grab_out(module, args, output, i=i):
            pairs[i][1] = _first_tensor(output).detach().clone()

        handles += [attn.register_forward_pre_hook(grab_in, with_kwargs=True), out.register_forward_hook(grab_out)]
    with _hooks(handles):
        model(input_ids=input_ids)
    return [(x, y) for x, y in pairs]


@torch.no_grad()
def full_transformer_metrics(model: torch.nn.Module, input_ids: torch.Tensor, batch_size: int = 32,
                             ) -> dict[str, torch.Tensor]:
    """Metrics of X(0) and of every layer's output in the model's own full forward, computed in hooks.

    Only the metrics are kept (never all hidden states). Decoder layers output the residual stream
    before the final norm. Shapes: input_ids [sample, token] -> each metric [layer + 1, sample].
    """
    layers = _layers(model)
    collected: list[dict[str, torch.Tensor]] = []
    for start in range(0, input_ids.shape[0], batch_size):
        per_layer: list[dict[str, torch.Tensor] | None] = [None] * (len(layers) + 1)
        dtype = next(model.parameters()).dtype

        def first(module, args, kwargs):
            per_layer[0] = rc_metrics.all_metrics(args[0] if args else kwargs["hidden_states"], dtype=dtype)

        handles = [layers[0].register_forward_pre_hook(first, with_kwargs=True)]
        for i, layer in enumerate(layers):
            def after(module, args, output, i=i):
                per_layer[i + 1] = rc_metrics.all_metrics(_first_tensor(output), dtype=dtype)

            handles.append(layer.register_forward_hook(after))
        with _hooks(handles):
            model(input_ids=input_ids[start:start + batch_size])
        collected.append({k: torch.stack([m[k] for m in per_layer]) for k in per_layer[0]})
    return {k: torch.cat([c[k] for c in collected], dim=1) for k in collected[0]}  # [layer + 1, sample]


def validate_attention(model: torch.nn.Module, input_ids: torch.Tensor) -> list[float]:
    """Per layer, ||engine - HF||_F / ||HF||_F for the attention sublayer, in the model's own dtype.

    The engine is fed the hidden state the model feeds its own attention (captured with hooks) under the
    model's own mask. Shapes: input_ids [sample, token] -> one float per layer.
    """
    layers = extract_layers(model, n_tokens=input_ids.shape[1])
    mask = model_mask(model, input_ids.shape[1])
    errors = []
    for layer, (x_in, y_hf) in zip(layers, attention_io(model, input_ids)):
        y = attention_sublayer(x_in, layer, mask)
        errors.append(((y - y_hf).norm() / y_hf.norm()).item())
    return errors


@torch.no_grad()
def validate_norms(model: torch.nn.Module, input_ids: torch.Tensor) -> list[float]:
    """Per layer, the largest ||extracted norm(input) - HF norm(input)||_F / ||HF||_F over the layer's own
    norm modules, each fed what HF feeds it in the model's forward (captured with hooks), in the model's dtype.

    Shapes: input_ids [sample, token] -> one float per layer.
    """
    family, layers = model_family(model), extract_layers(model, n_tokens=input_ids.shape[1])
    captured: list[list[tuple[torch.Tensor, torch.Tensor, TrainedNorm]]] = [[] for _ in layers]
    handles = []
    for i, layer in enumerate(layers):
        _, norm, output = _norm_modules(model, i)
        for module, extracted in ((norm, layer.norm), (output, layer.output_norm)):
            if module is None:
                continue

            def grab(module, args, out, i=i, extracted=extracted):
                captured[i].append((args[0].detach().clone(), _first_tensor(out).detach().clone(), extracted))

            handles.append(module.register_forward_hook(grab))
    with _hooks(handles):
        model(input_ids=input_ids)
    errors = []
    for pairs in captured:
        errs = [((apply_trained_norm(x, norm.to(x.dtype, x.device)) - y).norm() / y.norm()).item() for x, y, norm in pairs]
        errors.append(max(errs))
    return errors


def _block_output(model: torch.nn.Module, index: int) -> tuple[torch.nn.Module, str]:
    """Where HF's attention block (attention, its norms and the residual sum) ends: (module, "output" of it
    or "input" to it)."""
    family, layer = model_family(model), model_layer(model, index)
    ends = {"bert": ("attention.output", "output"), "mpnet": ("attention", "output"), "gpt2": ("ln_2", "input"),
            "llama": ("post_attention_layernorm", "input"), "gemma3_text": ("pre_feedforward_layernorm", "input")}
    name, where = ends[family]
    return layer.get_submodule(name), where


@torch.no_grad()
def validate_attention_block(model: torch.nn.Module, input_ids: torch.Tensor) -> list[float]:
    """Per layer, ||engine - HF||_F / ||HF||_F for the whole attention block: the engine's layer with norm
    "model" and the skip (post: LN(Attn(X) + X); pre: X + O(Attn(N(X)))) fed the layer's input, under the
    model's own mask, against HF's block output, in the model's dtype.

    Shapes: input_ids [sample, token] -> one float per layer.
    """
    layers = extract_layers(model, n_tokens=input_ids.shape[1])
    pairs: list[list[torch.Tensor | None]] = [[None, None] for _ in layers]
    handles = []
    for i, module in enumerate(_layers(model)):
        def grab_in(module, args, kwargs, i=i):
            pairs[i][0] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

        handles.append(module.register_forward_pre_hook(grab_in, with_kwargs=True))
        end, where = _block_output(model, i)
        if where == "input":
            handles.append(end.register_forward_pre_hook(lambda m, args, i=i: pairs[i].__setitem__(1, args[0].clone())))
        else:
            handles.append(end.register_forward_hook(
                lambda m, args, out, i=i: pairs[i].__setitem__(1, _first_tensor(out).clone())))
    with _hooks(handles):
        model(input_ids=input_ids)
    mask = model_mask(model, input_ids.shape[1])
    errors = []
    for layer, (x_in, y_hf) in zip(layers, pairs):
        y = attention_sublayer(x_in, layer, mask, norm="model", skip=True)
        errors.append(((y - y_hf).norm() / y_hf.norm()).item())
    return errors
