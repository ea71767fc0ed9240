"""From a Hugging Face model to the SAN engine: attention weights, X(0), hooks on the real forward.

Every family is read through its record in :mod:`rankcollapse.hf.families` (``config.model_type`` ->
:class:`~rankcollapse.hf.families.Family`: where the layers, projections, norms, rotary embedding, position
bias, ALiBi, QK-norm, soft-capping, sinks and sliding window live); this module names no family, and a model
of an unknown family is refused with one ValueError (:func:`~rankcollapse.hf.families.family_of`), as is a
config that sets a field its record refuses. Each layer's attention sublayer is Q/K/V projection -> masked
softmax -> output projection; the HF module's own ``scaling`` is kept; sliding windows are stored as
``window = sliding_window - 1`` (HF allows keys at distance < sliding_window); ALiBi as the relative score
bias -m_h |i - j| with the slopes the model's own code gives (equal to HF's bias up to a constant per row
under the causal mask).

Each layer also carries the attention sublayer's own trained norm (norm ``model`` of the engine,
:class:`rankcollapse.core.norms.TrainedNorm`), read per layer with the module's own eps, at the family's
position (the table in :mod:`rankcollapse.hf.families`). :func:`validate_norms` checks each extracted norm
on the input HF feeds that norm module; :func:`validate_attention_block` checks the whole block (norm
"model" with the skip) against HF.

Hidden states are read with hooks that are always removed, never with ``output_hidden_states`` for all
layers at once: :func:`attention_io` captures, per layer, the input the model feeds its own attention and
that attention's output (for the validation); :func:`full_transformer_metrics` computes the metrics of
every layer's output on the fly (the "full transformer" reference curve).

Used by: the pretrained experiments, ``tests/integration/test_hf_validation.py``, the benchmark.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch

from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics as rc_metrics
from rankcollapse.core.norms import TrainedNorm, apply_trained_norm
from rankcollapse.engine import AttentionLayer, attention_sublayer
from rankcollapse.hf.families import Family, Norm, family_of


class _Stop(Exception):
    """Raised by a hook to end a forward pass early."""


def model_mask(model: torch.nn.Module, n_tokens: int) -> torch.Tensor:
    """The mask the model itself uses (before its own sliding windows).  Shapes: -> [token, token] bool."""
    return rc_masks.causal_mask(n_tokens) if family_of(model).causal else rc_masks.complete_mask(n_tokens)


def _base(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "base_model", model)


def _attr(obj: object, path: str):
    """``obj.a.b.c`` for ``path = "a.b.c"`` (a record's module path)."""
    return functools.reduce(getattr, path.split("."), obj)


def _attr_or_none(obj: object, path: str):
    """``obj.a.b.c``, or None where an attribute on the path is absent (a window the module does not set)."""
    return functools.reduce(lambda o, name: getattr(o, name, None), path.split("."), obj)


def _layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    return list(_attr(_base(model), family_of(model).layers))


def _attention_modules(model: torch.nn.Module) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
    """Per layer: (module whose input is the attention input, module whose output is the attention output)."""
    family = family_of(model)
    return [(_attr(layer, family.attention), _attr(layer, family.o)) for layer in _layers(model)]


def _norm_modules(model: torch.nn.Module, index: int) -> tuple[str, torch.nn.Module, torch.nn.Module | None]:
    """The attention sublayer's own norm modules: (position, norm, output norm or None)."""
    family, layer = family_of(model), model_layer(model, index)
    output = None if family.output_norm is None else _attr(layer, family.output_norm.path)
    return family.norm_position, _attr(layer, family.norm.path), output


def _gain(weight: torch.Tensor, offset: float) -> torch.Tensor:
    """A copy of the gain ``offset + weight`` (a record's ``gain_offset``: 1 when the stored weight is w for
    1 + w)."""
    return offset + weight if offset else weight.clone()


def _trained_norm(module: torch.nn.Module, spec: Norm) -> TrainedNorm | None:
    """A HF norm module as a :class:`TrainedNorm` (float64 copies): LayerNorm (weight, bias, eps) or RMSNorm
    (gain ``gain_offset + weight``), with the eps of the module attribute the record names; None for
    ``nn.Identity`` (a layer without a norm of its own)."""
    if isinstance(module, torch.nn.Identity):
        return None
    eps = float(getattr(module, spec.eps))
    if spec.kind == "layernorm":
        bias = None if module.bias is None else module.bias.detach().double().clone()
        return TrainedNorm("layernorm", module.weight.detach().double().clone(), bias, eps)
    return TrainedNorm("rms", _gain(module.weight.detach().double(), spec.gain_offset), None, eps)


def _own_norms(model: torch.nn.Module, index: int) -> dict:
    """AttentionLayer keywords for layer ``index``'s own norm: norm, norm_position, output_norm."""
    family = family_of(model)
    position, norm, output = _norm_modules(model, index)
    return {"norm": _trained_norm(norm, family.norm), "norm_position": position,
            "output_norm": None if output is None else _trained_norm(output, family.output_norm)}


def _split_heads(weight_in_out: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Shapes: [d_model, head * d_head] -> [head, d_model, d_head]."""
    d_model = weight_in_out.shape[0]
    return weight_in_out.reshape(d_model, n_heads, -1).permute(1, 0, 2)  # [head, d_model, d_head]


def _bias(bias: torch.Tensor | None, n_heads: int) -> torch.Tensor | None:
    return None if bias is None else bias.reshape(n_heads, -1)  # [head, d_head]


def _projections(layer: torch.nn.Module, family: Family, n_heads: int, n_kv: int, **extra) -> AttentionLayer:
    """The layer's Q/K/V/O projections as an AttentionLayer, from nn.Linear (weight [out, in]) or Conv1D
    (weight [in, out]) modules, Q/K/V separate or fused (in turn or per head, the record's ``fused_layout``).
    Shapes: W_O [head, d_head, d_model]."""
    def in_out(module):  # [in, out]
        return module.weight if family.weight_layout == "conv1d" else module.weight.T

    o = _attr(layer, family.o)
    if family.fused_qkv:
        fused = _attr(layer, family.q)
        w = in_out(fused)  # [d_model, (head + 2 kv_head) * d_head]
        d_head = w.shape[1] // (n_heads + 2 * n_kv)
        if family.fused_layout == "per_head":  # [..., head, 3, d_head] -> 3 x [..., head * d_head]
            split = lambda t: [part.flatten(-2)  # noqa: E731
                               for part in t.unflatten(-1, (n_heads, 3, d_head)).unbind(-2)]
        else:  # [..., (head + 2 kv_head) * d_head]: Q, K, V in turn
            split = lambda t: t.split([n_heads * d_head, n_kv * d_head, n_kv * d_head], dim=-1)  # noqa: E731
        w_q, w_k, w_v = split(w)
        b_q, b_k, b_v = (None,) * 3 if fused.bias is None else split(fused.bias)
    else:
        q, k, v = (_attr(layer, path) for path in (family.q, family.k, family.v))
        w_q, w_k, w_v, b_q, b_k, b_v = in_out(q), in_out(k), in_out(v), q.bias, k.bias, v.bias
    w_o = in_out(o)  # [head * d_head, d_model]
    return AttentionLayer(
        W_Q=_split_heads(w_q, n_heads), W_K=_split_heads(w_k, n_kv), W_V=_split_heads(w_v, n_kv),
        W_O=w_o.reshape(n_heads, -1, w_o.shape[1]),  # [head, d_head, d_model]
        b_Q=_bias(b_q, n_heads), b_K=_bias(b_k, n_kv), b_V=_bias(b_v, n_kv), b_O=o.bias, **extra)


def _attention_extras(layer: torch.nn.Module, family: Family, base: torch.nn.Module, config) -> dict:
    """AttentionLayer keywords beyond the projections: scaling, rotary, window, QK-norm, soft-capping,
    sinks."""
    attn = _attr(layer, family.attention)
    extra = {"scaling": float(getattr(attn, family.scaling, _head_dim(config) ** -0.5))}
    if family.rotary is not None:
        rope = _attr(base, family.rotary.path)
        prefix = "" if family.rotary.layer_type is None else f"{_attr(layer, family.rotary.layer_type)}_"
        extra.update(rope_inv_freq=getattr(rope, f"{prefix}inv_freq"),
                     rope_scale=float(getattr(rope, f"{prefix}attention_scaling")))
    if family.sliding_window is not None:
        extra["window"] = _window(_attr_or_none(attn, family.sliding_window))
    if family.softcap is not None and getattr(attn, family.softcap, None) is not None:
        extra["softcap"] = float(getattr(attn, family.softcap))
    if family.sinks is not None:
        extra["sinks"] = getattr(attn, family.sinks).detach()
    if family.qk_norm is not None:
        q_spec, k_spec = family.qk_norm
        q_norm, k_norm = _attr(attn, q_spec.path), _attr(attn, k_spec.path)
        extra.update(q_gain=_gain(q_norm.weight.double(), q_spec.gain_offset),
                     k_gain=_gain(k_norm.weight.double(), k_spec.gain_offset),
                     qk_norm_eps=getattr(q_norm, q_spec.eps))
    return extra


def _alibi_slopes(model: torch.nn.Module, n_heads: int) -> torch.Tensor:
    """The model's own ALiBi slopes m_h: the bias its own method (the record's ``alibi``) builds for two keys,
    at key 1 less key 0 (it is linear in the key position), in the model's arithmetic (a float64 model's in
    float64, :class:`Float64Casts`).  Shapes: -> [head]."""
    alibi = family_of(model).alibi
    build = _attr(_base(model), alibi.path)
    with _reference(model):
        bias = (build(torch.ones(1, 2, dtype=torch.long), n_heads, torch.float64) if alibi.call == "mask"
                else build(n_heads, 2))
    bias = bias.reshape(n_heads, 2).double()  # [head, key]
    return bias[:, 1] - bias[:, 0]


@torch.no_grad()
def extract_layers(model: torch.nn.Module, n_tokens: int = 512) -> list[AttentionLayer]:
    """Every layer's attention weights as float64 copies (the engine casts to its dtype).

    ``n_tokens`` bounds the token count of a relative position bias or ALiBi (families with
    ``position_bias`` or ``alibi``; the others ignore it).
    Shapes: see :class:`rankcollapse.engine.AttentionLayer`.
    """
    family, config, base = family_of(model), model.config, _base(model)
    n_heads = config.num_attention_heads
    n_kv = (getattr(config, "num_key_value_heads", None) if family.grouped_kv else None) or n_heads
    score_bias = {}
    if family.position_bias is not None:
        probe = torch.zeros(1, n_tokens, config.hidden_size)
        score_bias["score_bias"] = _attr(base, family.position_bias)(probe)[0]  # [head, token, token]
    elif family.alibi is not None:  # -m_h |i - j| [head, token, token]
        score_bias["score_bias"] = rc_masks.decay_bias(n_tokens, _alibi_slopes(model, n_heads))
    layers = []
    for i, layer_module in enumerate(_layers(model)):
        layer = _projections(layer_module, family, n_heads, n_kv,
                             **_attention_extras(layer_module, family, base, config), **score_bias)
        # a float64 model's .to() is no copy
        own = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v
               for k, v in {**layer.__dict__, **_own_norms(model, i)}.items()}
        layers.append(AttentionLayer(**own).to(torch.float64))
    return layers


def _head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def model_layer(model: torch.nn.Module, index: int) -> torch.nn.Module:
    """Layer ``index`` of the model (the family's ``layers``), e.g. to hook its input."""
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

        handles += [attn.register_forward_pre_hook(grab_in, with_kwargs=True),
                    out.register_forward_hook(grab_out)]
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


class Float64Casts(torch.overrides.TorchFunctionMode):
    """Every cast to float32 inside it becomes a cast to float64 (``.float()`` becomes ``.double()``).

    Hugging Face's modules round to float32 in places even in a float64 model: the rotary tables
    (``position_ids.float()``), the eager softmax (``dtype=torch.float32``), RMSNorm (``.to(torch.float32)``).
    The validations run a float64 model's forward inside this mode, so that its float64 reference is HF's own
    arithmetic in float64 and the float64 comparison measures the engine, not HF's float32 rounding.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        lift = lambda value: torch.float64 if value is torch.float32 else value  # noqa: E731
        func = torch.Tensor.double if func is torch.Tensor.float else func
        return func(*map(lift, args), **{k: lift(v) for k, v in (kwargs or {}).items()})


def _reference(model: torch.nn.Module) -> contextlib.AbstractContextManager:
    """The context of a validation's HF forward: :class:`Float64Casts` for a float64 model, else nothing."""
    return Float64Casts() if next(model.parameters()).dtype == torch.float64 else contextlib.nullcontext()


def validate_attention(model: torch.nn.Module, input_ids: torch.Tensor) -> list[float]:
    """Per layer, ||engine - HF||_F / ||HF||_F for the attention sublayer, in the model's own dtype.

    The engine is fed the hidden state the model feeds its own attention (captured with hooks) under the
    model's own mask; a float64 model's forward runs in float64 throughout (:class:`Float64Casts`).
    Shapes: input_ids [sample, token] -> one float per layer.
    """
    layers = extract_layers(model, n_tokens=input_ids.shape[1])
    mask = model_mask(model, input_ids.shape[1])
    errors = []
    with _reference(model):
        pairs = attention_io(model, input_ids)
    for layer, (x_in, y_hf) in zip(layers, pairs):
        y = attention_sublayer(x_in, layer, mask)
        errors.append(((y - y_hf).norm() / y_hf.norm()).item())
    return errors


@torch.no_grad()
def validate_norms(model: torch.nn.Module, input_ids: torch.Tensor) -> list[float]:
    """Per layer, the largest ||extracted norm(input) - HF norm(input)||_F / ||HF||_F over the layer's own
    norm modules, each fed what HF feeds it in the model's forward (captured with hooks), in the model's dtype
    (a float64 model's in float64 throughout, :class:`Float64Casts`).

    Shapes: input_ids [sample, token] -> one float per layer.
    """
    layers = extract_layers(model, n_tokens=input_ids.shape[1])
    captured: list[list[tuple[torch.Tensor, torch.Tensor, TrainedNorm]]] = [[] for _ in layers]
    handles = []
    for i, layer in enumerate(layers):
        _, norm, output = _norm_modules(model, i)
        for module, extracted in ((norm, layer.norm), (output, layer.output_norm)):
            if extracted is None:  # no output norm, or a layer without a norm of its own (nn.Identity)
                continue

            def grab(module, args, out, i=i, extracted=extracted):
                captured[i].append((args[0].detach().clone(), _first_tensor(out).detach().clone(), extracted))

            handles.append(module.register_forward_hook(grab))
    with _hooks(handles), _reference(model):
        model(input_ids=input_ids)
    errors = []
    for pairs in captured:
        errs = [((apply_trained_norm(x, norm.to(x.dtype, x.device)) - y).norm() / y.norm()).item()
                for x, y, norm in pairs]
        errors.append(max(errs, default=0.0))  # a layer without norms: nothing to disagree
    return errors


def _block_output(model: torch.nn.Module, index: int) -> tuple[torch.nn.Module, str]:
    """Where HF's attention block (attention, its norms and the residual sum) ends: (module, "output" of it
    or "input" to it)."""
    name, where = family_of(model).block_end
    return model_layer(model, index).get_submodule(name), where


@torch.no_grad()
def validate_attention_block(model: torch.nn.Module, input_ids: torch.Tensor) -> list[float]:
    """Per layer, ||engine - HF||_F / ||HF||_F for the whole attention block: the engine's layer with norm
    "model" and the skip (post: LN(Attn(X) + X); pre: X + O(Attn(N(X)))) fed the layer's input, under the
    model's own mask, against HF's block output, in the model's dtype (float64 throughout for a float64
    model).

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
            handles.append(end.register_forward_pre_hook(
                lambda m, args, i=i: pairs[i].__setitem__(1, args[0].clone())))
        else:
            handles.append(end.register_forward_hook(
                lambda m, args, out, i=i: pairs[i].__setitem__(1, _first_tensor(out).clone())))
    with _hooks(handles), _reference(model):
        model(input_ids=input_ids)
    mask = model_mask(model, input_ids.shape[1])
    errors = []
    for layer, (x_in, y_hf) in zip(layers, pairs):
        y = attention_sublayer(x_in, layer, mask, norm="model", skip=True)
        errors.append(((y - y_hf).norm() / y_hf.norm()).item())
    return errors
