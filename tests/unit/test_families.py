"""The family records: one per supported model_type, each with a tiny config whose model builds and whose
windows bite; the window of every layer is the one Hugging Face applies; an unknown family is refused with
one error; the extractor names no family (the records are the only description); a reader's run of a page
takes a model folder of every new family."""

import ast
import functools
import inspect
import re

import pandas as pd
import pytest
import torch

from rankcollapse.hf import extract, families, load, testing

transformers = pytest.importorskip("transformers")

SUPPORTED = ("bert", "mpnet", "gpt2", "llama", "gemma3_text", "mistral", "qwen2", "qwen3", "phi3", "gemma2",
             "modernbert", "gpt_oss", "bloom", "mpt")
ENCODERS = ("bert", "mpnet", "modernbert")
N_TOKENS = 12  # the validation's sequence length: every tiny window is shorter


def test_every_supported_family_has_a_record_and_the_exported_names_derive_from_them():
    assert tuple(families.FAMILIES) == SUPPORTED
    assert all(name == record.model_type for name, record in families.FAMILIES.items())
    assert tuple(n for n, r in families.FAMILIES.items() if not r.causal) == ENCODERS


@pytest.mark.parametrize("name", SUPPORTED)
def test_tiny_config_of_each_record_builds_its_model(name):
    config = testing.tiny_config(name)
    assert config.model_type == name and config.hidden_size <= 64 and 2 <= config.num_hidden_layers <= 4
    model = testing.tiny_model(name)
    assert (families.family_of(model) is families.FAMILIES[name]
            and families.family_of(model).model_type == name)
    layers = extract.extract_layers(model)
    assert len(layers) == config.num_hidden_layers and layers[0].d_model == config.hidden_size
    mask = extract.model_mask(model, 5)
    assert torch.equal(mask, torch.ones(5, 5, dtype=torch.bool).tril()) == families.FAMILIES[name].causal


def _hf_allowed(model, input_ids) -> list[torch.Tensor]:
    """Per layer, the keys HF's own eager mask lets each query see (read from the mask HF hands each attention
    module; None there means every key).  Shapes: -> each [token, token] bool."""
    family = families.family_of(model)
    seen = []
    hooks = [extract.model_layer(model, i).get_submodule(family.attention).register_forward_pre_hook(
        lambda m, args, kwargs: seen.append(kwargs.get("attention_mask")), with_kwargs=True)
        for i in range(model.config.num_hidden_layers)]
    try:
        model(input_ids=input_ids)
    finally:
        for hook in hooks:
            hook.remove()
    n = input_ids.shape[1]
    return [torch.ones(n, n, dtype=torch.bool) if m is None else (m[0, 0] == 0) for m in seen]


# in the tiny configs
WINDOWED = ("gemma3_text", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "modernbert", "gpt_oss")
ONE_WINDOW = ("mistral", "phi3")  # the config's one window on every layer; the others window some layers only


@pytest.mark.parametrize("name", SUPPORTED)
def test_each_layer_window_is_the_one_hugging_face_applies(name):
    """The engine's mask per layer (the model's own mask and the layer's window) equals the mask HF builds
    from the config; the tiny configs have windows that bite, on window and global layers both where the
    family has both (Mistral and Phi-3 apply one window to every layer)."""
    model = testing.tiny_model(name)
    layers = extract.extract_layers(model)
    offsets = torch.arange(N_TOKENS)
    distance = (offsets[:, None] - offsets[None, :]).abs()
    own = extract.model_mask(model, N_TOKENS)
    hf = _hf_allowed(model, torch.arange(3, 3 + N_TOKENS)[None])
    for layer, allowed in zip(layers, hf):
        engine = own if layer.window is None else own & (distance <= layer.window)
        assert torch.equal(engine, allowed)
    windows = [layer.window for layer in layers]
    if name in WINDOWED:
        assert all(w is None or w + 1 < N_TOKENS for w in windows) and any(w is not None for w in windows)
        # global layers too, where the family has them
        assert (None in windows) == (name not in ONE_WINDOW), windows
    else:
        assert windows == [None] * len(layers)


def test_modernbert_windows_are_bidirectional():
    model = testing.tiny_model("modernbert")
    windows = [layer.window for layer in extract.extract_layers(model)]
    # global, local, global: every 2nd layer global
    assert windows == [None, model.config.sliding_window, None]
    allowed = _hf_allowed(model, torch.arange(3, 3 + N_TOKENS)[None])[1]
    assert torch.equal(allowed, allowed.T) and not allowed.all()  # symmetric, and the window bites


def _message(name) -> str:
    return f"model family must be one of {', '.join(SUPPORTED)}; got {name!r}"


def test_unknown_family_is_refused_with_one_error_naming_the_supported_ones():
    olmo = transformers.OlmoConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=48)
    with pytest.raises(ValueError) as err:
        families.family_of(olmo)
    assert str(err.value) == _message("olmo")
    model = transformers.AutoModel.from_config(olmo).eval()
    for call in (extract.extract_layers, families.family_of, lambda m: extract.model_mask(m, 4),
                 lambda m: extract.embed(m, torch.zeros(1, 4, dtype=torch.long))):
        with pytest.raises(ValueError) as err:  # never Llama's (or any other family's) path
            call(model)
        assert str(err.value) == _message("olmo")
    with pytest.raises(ValueError, match=r"family 'olmo'.*" + ", ".join(SUPPORTED)):
        load._check_family(olmo, "tiny-olmo")
    with pytest.raises(ValueError, match=f"family must be one of {', '.join(SUPPORTED)}; got 'fake'"):
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
    with pytest.raises(ValueError, match="fused_layout"):
        families.Family(**{**record.__dict__, "fused_layout": "per_head"})  # Llama: three projections
    with pytest.raises(ValueError, match="fused_layout"):
        families.Family(**{**families.FAMILIES["bloom"].__dict__, "fused_layout": "by_row"})
    with pytest.raises(ValueError, match="not both"):
        families.Family(**{**families.FAMILIES["mpnet"].__dict__, "alibi": families.FAMILIES["mpt"].alibi})
    with pytest.raises(ValueError, match="call"):
        families.Alibi("build_alibi_tensor", "positions")


@pytest.mark.parametrize("name, field, value", [("bloom", "apply_residual_connection_post_layernorm", True),
                                                ("bloom", "slow_but_exact", True),
                                                ("mpt", "attn_config.clip_qkv", 6.0)])
def test_a_config_setting_a_field_the_engine_does_not_reproduce_is_refused(name, field, value):
    """BLOOM's skip around the normed input, its sliced output projection without bias, MPT's clamped Q, K,
    V: one ValueError naming the config field, never another computation."""
    model = testing.tiny_model(name)
    assert len(extract.extract_layers(model)) == 3  # the tiny config sets none of them
    *owner, attribute = field.split(".")
    setattr(functools.reduce(getattr, owner, model.config), attribute, value)
    for call in (extract.extract_layers, families.family_of):
        with pytest.raises(ValueError, match=re.escape(f"config.{field} = {value!r} is not reproduced")):
            call(model)


def test_extract_names_no_family():
    """No string constant of extract.py (docstrings included) is a family name, nor an f-string piece."""
    tree = ast.parse(inspect.getsource(extract))
    constants = {node.value for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not constants & set(SUPPORTED)
    words = {w.strip("`'\"(),.:") for c in constants for w in c.split()}
    assert not words & set(SUPPORTED)


def _readers_run(tmp_path, monkeypatch, capsys, page: str, name: str, n_layers: int) -> list:
    """``rankcollapse compute <page> -p model <folder>`` on a tiny model of family ``name`` saved with its
    tokenizer (the reader's own model, offline), 2 samples of 12 tokens, window 2; the stored tables."""
    from rankcollapse.book import cli

    folder = testing.save_tiny_model(tmp_path / name, testing.tiny_config(name))
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("RANKCOLLAPSE_PROGRESS", "0")
    argv = ["compute", page, "-p", "model", folder, "-p", "n_samples", "2", "-p", "n_layers", str(n_layers),
            "-p", "n_tokens", "12", "-p", "window", "2"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    return [pd.read_csv(path) for path in sorted((tmp_path / "results" / page).glob("*.csv.gz"))]


@pytest.mark.slow
# soft-capping, the encoder, sinks (~30 s each)
@pytest.mark.parametrize("name", ["gemma2", "modernbert", "gpt_oss"])
def test_a_readers_run_of_fig2_takes_a_model_folder(tmp_path, monkeypatch, capsys, name):
    """Fig. 2 stores a result whose pretrained curves come from the reader's model (its 2 of 3 layers)."""
    tables = _readers_run(tmp_path, monkeypatch, capsys, "fig2", name, n_layers=2)
    main = lambda t: ("pretrained" in set(t["weights"])  # noqa: E731
                      and {"complete", "unit"} <= {*t["mask"], *t["norm"]})
    (table,) = [t for t in tables if main(t)]  # the main sweep
    # and Fig. 2's controls (with/without biases), pretrained no-mixing, 4 more weight seeds, the HF init, the
    # pretrained components and the decomposition
    assert len(tables) == 10
    mu = table[(table["weights"] == "pretrained") & (table["metric"] == "mu")]
    assert set(mu["layer"]) == {0, 1, 2} and mu["median"].notna().all() and (mu["n_samples"] == 2).all()


@pytest.mark.slow
def test_a_readers_run_of_the_sliding_window_page_takes_a_windowed_model_folder(tmp_path, monkeypatch,
                                                                                capsys):
    """The sliding-window page on a tiny Qwen2 whose config marks its last two layers as windowed: its three
    runs (as trained, all global, all local) are stored."""
    tables = _readers_run(tmp_path, monkeypatch, capsys, "sliding_window_model", "qwen2", n_layers=3)
    assert len(tables) == 3 and all(set(t["layer"]) == {0, 1, 2, 3} for t in tables)


@pytest.mark.parametrize("name", ["qwen2", "gemma2", "modernbert", "gpt_oss"])
def test_an_initialized_copy_of_fewer_layers_keeps_the_first_layer_types(name):
    """The full transformer of initialized weights at n_layers below the model's depth (the RMSNorm-decoder
    page's reference): the config's per-layer layer_types are cut to those layers (transformers refuses a
    config whose layer_types outnumber its layers)."""
    from rankcollapse.experiments.models import initialized_model

    model = testing.tiny_model(name)
    fresh = initialized_model(model, 2, seed=0)
    assert fresh.config.num_hidden_layers == 2 and fresh.config.layer_types == model.config.layer_types[:2]
