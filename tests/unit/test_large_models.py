"""Models larger than one GPU: tiny Llama-family decoders with a sliding window, saved to a folder and loaded
through ``device_map="auto"`` (accelerate) on CPU; batched hook metrics; the bad-input checks on a model."""

import pytest
import torch

from rankcollapse.experiments.config import experiment_config
from rankcollapse.hf import load as models
from rankcollapse.hf import extract
from rankcollapse.hf import testing

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")


def _save(folder, config) -> str:
    return testing.save_tiny_model(folder, config)


def _sizes(**extra) -> dict:
    return dict(vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=48, max_position_embeddings=64, sliding_window=4,
                **extra)


@pytest.mark.parametrize("device_map", ["auto", "disk"])
def test_llama_spread_by_accelerate_matches_the_plain_load(tmp_path, device_map):
    """``auto`` (all on CPU here) and a map that offloads two of three layers to disk, as for a model
    larger than the machine's memory: the hook metrics equal those of the plain load."""
    spec = _save(tmp_path / "model", transformers.LlamaConfig(**_sizes()))
    if device_map == "disk":
        device_map = {"embed_tokens": "cpu", "layers.0": "cpu", "layers.1": "disk", "layers.2": "disk",
                      "norm": "cpu", "rotary_emb": "cpu"}
    spread = models.load_model(spec, device_map=device_map, offload_folder=str(tmp_path / "offload"))
    plain = models.load_model(spec)
    if isinstance(device_map, dict):
        assert spread.model.hf_device_map == device_map  # placed by accelerate
    ids = torch.randint(0, 64, (5, 12), generator=torch.Generator().manual_seed(1))  # [sample, token]
    got = extract.full_transformer_metrics(spread.model, ids, batch_size=2)
    want = extract.full_transformer_metrics(plain.model, ids, batch_size=5)
    assert set(got) == set(want) and got["mu"].shape == (4, 5)  # [layer + 1, sample]
    for name in want:
        torch.testing.assert_close(got[name].double(), want[name].double(), rtol=1e-5, atol=1e-9)


def test_hook_metrics_run_in_batches_so_memory_is_flat_in_sequences(tmp_path):
    model = models.load_model(_save(tmp_path, transformers.LlamaConfig(**_sizes())), device_map="auto").model
    seen = []
    handle = extract.model_layer(model, 0).register_forward_pre_hook(
        lambda module, args, kwargs: seen.append((args[0] if args else kwargs["hidden_states"]).shape[0]),
        with_kwargs=True)
    try:
        extract.full_transformer_metrics(model, torch.zeros(7, 6, dtype=torch.long), batch_size=3)
    finally:
        handle.remove()
    assert seen == [3, 3, 1]  # never more than batch_size sequences in one forward


def test_offload_check_of_the_large_models_page(tmp_path):
    check = testing.offload_check(tmp_path, n_sequences=5, batch_size=2)
    assert check["device_map"]["layers.2"] == "disk" and check["max_relative_difference"] < 1e-5


def test_unsupported_family_is_refused_at_load_before_weights(tmp_path):
    sizes = {k: v for k, v in _sizes().items() if k != "sliding_window"}
    spec = _save(tmp_path, transformers.OlmoConfig(**sizes))
    with pytest.raises(ValueError, match=r"family 'olmo'.*bert, mpnet, gpt2, llama, gemma3_text, mistral"):
        models.load_model(spec, device_map="auto")


def test_sequence_beyond_the_model_maximum_is_rejected_before_running(tmp_path):
    spec = _save(tmp_path, transformers.LlamaConfig(**_sizes()))
    with pytest.raises(ValueError, match=r"n_tokens must be at most 64 .*max_position_embeddings.*got 65"):
        experiment_config({"model": spec, "n_tokens": 65, "masks": ["complete"]})
    assert experiment_config({"model": spec, "n_tokens": 64, "masks": ["complete"]}).n_tokens == 64


def test_the_commands_memory_and_time_follow_from_the_measured_throughput():
    """Mistral-7B's Fig. 2 command at the benchmark's 128 tokens: time = samples x layers x configurations x
    two weight sources / the measured throughput at width 4096 in float64 (no length scaling); CPU memory =
    the float32 model + the float64 copy of its Q, K, V, O (grouped K, V: 8 of 32 heads)."""
    import json

    from rankcollapse.book.pages import fig2, large_models
    from rankcollapse.core.masks import PAPER_MASKS
    from rankcollapse.experiments import plan

    from rankcollapse.book import registry

    mistral = large_models.MODELS[0]
    got = large_models.estimate(mistral, "fig2", {"n_samples": 256, "n_tokens": 128}, registry.runs_at)
    rate = json.loads(plan.THROUGHPUT_FILE.read_text())["NVIDIA H200|float64|4096"]["units_per_s"]
    configurations = len(PAPER_MASKS) * len(fig2.FIXED["norms"])
    # the paper's sweep: 256 samples, 32 layers, 2 weight sources
    main = 256 * 32 * configurations * 2 / rate / 60
    runs = registry.runs_at("fig2", {"n_samples": 256, "n_tokens": 128, "n_layers": 32,
                                     "model": "pkg:minilm"})
    # Fig. 2's controls, at their samples
    controls = sum(r.config.n_samples * 32 * len(r.config.san_configs()) * len(r.config.weights)
                   for part, r in runs.items() if part != "main") / rate / 60
    assert controls > 0 and got["minutes"] == pytest.approx(main + controls, rel=1e-12)
    attention = 32 * (2 * 4096 * 4096 + 2 * 4096 * 8 * 128)  # parameters of the 32 attention sublayers
    assert got["cpu_gb"] == pytest.approx((7.24e9 * 4 + attention * 8) / 1e9, rel=1e-12)
    assert got["command"].startswith("rankcollapse run fig2 -p model mistralai/Mistral-7B-v0.1 ")
    table = large_models.commands_table(registry.runs_at)
    assert all(m.hub_id in table for m in large_models.MODELS)
    # a five-column table, then the commands, one a line under their model, in a shell block
    head, _, block = table.partition("\n\n```bash\n")
    assert head.splitlines()[:2] == ["| model | windows (config) | CPU memory | GPU memory | engine time |",
                                     "|---|---|---|---|---|"]
    assert block.endswith("\n```") and f"\n{got['command']}\n" in block
    assert block.splitlines()[0] == f"# {large_models.COMMANDS[0][0].hub_id}"
    assert {m.family for m in large_models.MODELS} <= set(large_models.hf_families.FAMILIES)
