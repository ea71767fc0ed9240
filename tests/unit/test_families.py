"""The family records: one per supported model_type, each with a tiny config whose model builds; an unknown
family is refused with one error; the extractor names no family (the records are the only description)."""

import ast
import inspect

import pytest
import torch

from rankcollapse.hf import extract, families, load, testing

transformers = pytest.importorskip("transformers")

SUPPORTED = ("bert", "mpnet", "gpt2", "llama", "gemma3_text")


def test_every_supported_family_has_a_record_and_the_exported_names_derive_from_them():
    assert tuple(families.FAMILIES) == SUPPORTED
    assert all(name == record.model_type for name, record in families.FAMILIES.items())
    assert tuple(n for n, r in families.FAMILIES.items() if r.causal) == ("gpt2", "llama", "gemma3_text")


@pytest.mark.parametrize("name", SUPPORTED)
def test_tiny_config_of_each_record_builds_its_model(name):
    config = testing.tiny_config(name)
    assert config.model_type == name and config.hidden_size <= 64 and 2 <= config.num_hidden_layers <= 4
    model = testing.tiny_model(name)
    assert families.family_of(model) is families.FAMILIES[name] and extract.model_family(model) == name
    layers = extract.extract_layers(model)
    assert len(layers) == config.num_hidden_layers and layers[0].d_model == config.hidden_size
    mask = extract.model_mask(model, 5)
    assert torch.equal(mask, torch.ones(5, 5, dtype=torch.bool).tril()) == families.FAMILIES[name].causal


def _message(name) -> str:
    return f"model family must be one of bert, mpnet, gpt2, llama, gemma3_text; got {name!r}"


def test_unknown_family_is_refused_with_one_error_naming_the_supported_ones():
    mistral = transformers.MistralConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=48)
    with pytest.raises(ValueError) as err:
        families.family_of(mistral)
    assert str(err.value) == _message("mistral")
    model = transformers.AutoModel.from_config(mistral).eval()
    for call in (extract.extract_layers, extract.model_family, lambda m: extract.model_mask(m, 4),
                 lambda m: extract.embed(m, torch.zeros(1, 4, dtype=torch.long))):
        with pytest.raises(ValueError) as err:  # never Gemma's (or any other family's) path
            call(model)
        assert str(err.value) == _message("mistral")
    with pytest.raises(ValueError, match=r"family 'mistral'.*bert, mpnet, gpt2, llama, gemma3_text"):
        load._check_family(mistral, "tiny-mistral")
    with pytest.raises(ValueError, match="family must be one of bert, mpnet, gpt2, llama, gemma3_text; got 'fake'"):
        testing.tiny_model("fake")
    with pytest.raises(ValueError, match="got None"):
        families.family_of(object())


def test_records_are_checked():
    record = families.FAMILIES["llama"]
    with pytest.raises(ValueError, match="fused"):
        families.Family(**{**record.__dict__, "k": record.q})
    with pytest.raises(ValueError, match="output_norm"):
        families.Family(**{**record.__dict__, "norm_position": "post", "output_norm": record.norm})
    with pytest.raises(ValueError, match="kind"):
        families.Norm("ln", kind="batchnorm")


def test_extract_names_no_family():
    """No string constant of extract.py (docstrings included) is a family name, nor an f-string piece."""
    tree = ast.parse(inspect.getsource(extract))
    constants = {node.value for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not constants & set(SUPPORTED)
    words = {w.strip("`'\"(),.:") for c in constants for w in c.split()}
    assert not words & set(SUPPORTED)
