"""The large-models page (book/beyond/large_models.md): a tiny decoder loaded with most of its layers on
disk (as a 70-billion-parameter model would be on a machine with too little memory), its hook metrics in
batches against those of an ordinary load; and the commands for the models readers use, with the memory
and time each needs on one GPU.

:func:`configure` checks the page's parameters, :func:`compute` runs the check in a temporary folder
and makes the commands table, :func:`numbers` are the values its prose states, :func:`show` what the page
shows: those numbers and the commands table. :data:`MODELS` holds the sizes of seven public models as their
hub configs give them (not read here: no network); :func:`estimate` turns one command into its memory and
its time on one GPU from the engine's measured throughput (``benchmarks/throughput.json``,
:func:`rankcollapse.engine.attention_flop`); :func:`commands_table` is the page's table of them.

Used by: book/beyond/large_models.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rankcollapse.book.shown import Shown, prefixed
from rankcollapse.core.checks import check_int
from rankcollapse.engine import attention_flop
from rankcollapse.experiments import plan
from rankcollapse.experiments.config import INITIALIZED
from rankcollapse.hf import families as hf_families
from rankcollapse.hf import testing


def configure(parameters: dict) -> dict[str, dict]:
    """The tiny check's parameters, checked: sequences and the batch size of the hook metrics."""
    check_int("n_sequences", parameters.get("n_sequences"), 1, 4096)
    check_int("batch_size", parameters.get("batch_size"), 1, parameters["n_sequences"])
    return {"main": dict(parameters)}


def compute(config: dict, sweeps: Callable[[str, dict], Mapping]) -> dict[str, object]:
    """The offload check (:func:`rankcollapse.hf.testing.offload_check`) of ``config``'s sequences and
    batch size, in a temporary folder, with the commands table under ``"commands"`` (:func:`commands_table`
    of ``sweeps``, the registry's :func:`~rankcollapse.book.registry.runs_at`, which it passes)."""
    with tempfile.TemporaryDirectory() as folder:
        check = testing.offload_check(folder, n_sequences=config["n_sequences"],
                                      batch_size=config["batch_size"])
    return {**check, "commands": commands_table(sweeps)}


def show(results: dict[str, tuple], parameters: dict) -> Shown:
    """The page's numbers (``large_models_*``: the tiny check's, :func:`numbers`, and the table's,
    :func:`table_numbers`) and its commands table (``large_models_commands``, Markdown). ``results``:
    ``{"main": Computed(config, compute's result, seconds)}``."""
    check = results["main"].result
    return Shown(values=prefixed("large_models", {**numbers(check), **table_numbers()}),
                 markdown={"large_models_commands": check["commands"]})


def numbers(check: dict[str, object]) -> dict[str, object]:
    """Where each part of the model was placed, the largest relative difference of μ against an ordinary
    load, the number of sequences, and the model families the attention extractor knows."""
    placement = ", ".join(f"{module} → {device}" for module, device in check["device_map"].items())
    difference = check["max_relative_difference"]
    agreement = ("agree exactly with those of an ordinary load" if difference == 0 else
                 f"differ from those of an ordinary load by at most {difference:.2g} (relative, in μ)")
    return {"placement": placement, "difference": difference, "agreement": agreement,
            "n_sequences": check["n_sequences"], "families": ", ".join(hf_families.FAMILIES)}


@dataclass(frozen=True)
class Architecture:
    """A public model's sizes, as its ``config.json`` and model card on the Hugging Face hub give them."""

    hub_id: str
    family: str  # config.model_type: a record of rankcollapse.hf.families
    n_params: float  # every parameter (embeddings, MLPs or experts included): the float32 load
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    windows: str  # the sliding windows its config sets, in words

    @property
    def attention_params(self) -> int:
        """Parameters of one attention sublayer's projections (Q, K, V, O; biases left out)."""
        return (2 * self.d_model * self.n_heads * self.d_head
                + 2 * self.d_model * self.n_kv_heads * self.d_head)


MODELS = (
    Architecture("mistralai/Mistral-7B-v0.1", "mistral", 7.24e9, 4096, 32, 32, 8, 128,
                 "4096 tokens, every layer"),
    Architecture("Qwen/Qwen2.5-7B", "qwen2", 7.62e9, 3584, 28, 28, 4, 128, "none (use_sliding_window false)"),
    Architecture("google/gemma-2-9b", "gemma2", 9.24e9, 3584, 42, 16, 8, 256,
                 "4096 tokens, every other layer"),
    Architecture("answerdotai/ModernBERT-large", "modernbert", 0.395e9, 1024, 28, 16, 16, 64,
                 "64 tokens each way (bidirectional), two layers in three"),
    Architecture("openai/gpt-oss-20b", "gpt_oss", 20.9e9, 2880, 24, 64, 8, 64,
                 "128 tokens, every other layer"),
    # ALiBi decoders (vocabularies 250880 and 50432; MPT's max_seq_len 2048)
    Architecture("bigscience/bloom-560m", "bloom", 0.559e9, 1024, 24, 16, 16, 64, "none (ALiBi)"),
    Architecture("mosaicml/mpt-7b", "mpt", 6.65e9, 4096, 32, 32, 32, 128, "none (ALiBi)"),
)
GPU = "NVIDIA H200"  # the GPU whose measured throughput the estimates use (benchmarks/gpu_throughput.py)
COMMANDS = (  # (model, page, parameters): a reader's runs; n_layers = the model's depth (all its layers)
    *((m, "fig2", {"n_samples": 256, "n_tokens": 128}) for m in MODELS),
    (MODELS[4], "sliding_window_model", {"n_samples": 64, "n_tokens": 256, "window": 128}),
)


def estimate(model: Architecture, page: str, parameters: dict, sweeps: Callable[[str, dict], Mapping],
             gpu: str = GPU) -> dict[str, object]:
    """Memory and engine time of ``rankcollapse run <page> -p model <hub id>`` with ``parameters`` (and every
    layer of the model) on one ``gpu``.

    The page's sweeps come from ``sweeps(page, parameters)`` (the registry's
    :func:`~rankcollapse.book.registry.runs_at`: the page's defaults, then ``parameters``); the work is
    samples x layers x configurations per weight source, timed by the engine's measured throughput at the
    model's width and dtype on ``gpu`` (``benchmarks/throughput.json``), scaled from the benchmark's sequence
    length by :func:`rankcollapse.engine.attention_flop`. CPU memory: the float32 model and the float64 copy
    of its attention layers; GPU memory: the larger stack (pretrained, or initialized with square projections)
    in the run's dtype and the engine's block budget. Not included: the download, the load, and the full
    transformer's own forward (a reference some runs add).
    """
    given = {**parameters, "n_layers": model.n_layers, "device": "cuda"}
    runs = sweeps(page, {**given, "model": "pkg:minilm"})  # the counts need no download
    table = json.loads(plan.THROUGHPUT_FILE.read_text())
    seconds, gpu_bytes = 0.0, 0
    for run in runs.values():
        c = run.config
        row = table[f"{gpu}|{c.dtype}|{model.d_model}"]
        rate = (row["units_per_s"] * attention_flop(model.d_model, row["n_tokens"])
                / attention_flop(model.d_model, c.n_tokens))
        seconds += c.n_samples * c.n_layers * len(c.san_configs()) * len(c.weights) / rate
        stacks = {"pretrained": model.attention_params}  # one at a time; initialized: square projections
        stacks.update({w: 4 * model.d_model ** 2 for w in INITIALIZED})
        item = 8 if c.dtype == "float64" else 4
        gpu_bytes = max([gpu_bytes,
                         *(c.n_layers * stacks[w] * item + plan.DEFAULT_BUDGET for w in c.weights)])
    command = " ".join(["rankcollapse run", page, "-p model", model.hub_id,
                        *(f"-p {k} {v}" for k, v in given.items() if k != "device"), "--device cuda"])
    return {"model": model.hub_id, "page": page, "command": command,
            "cpu_gb": (model.n_params * 4 + model.n_layers * model.attention_params * 8) / 1e9,
            "gpu_gb": gpu_bytes / 1e9, "minutes": seconds / 60}


def commands_table(sweeps: Callable[[str, dict], Mapping], gpu: str = GPU) -> str:
    """The commands of :data:`COMMANDS` in Markdown: a table of model, its windows, memory and time, then the
    commands in one shell block, each under its model's name (a command in a table cell broke over six lines
    of a narrow column). ``sweeps`` as in :func:`estimate`."""
    rows = ["| model | windows (config) | CPU memory | GPU memory | engine time |", "|---|---|---|---|---|"]
    commands = ["```bash"]
    for model, page, parameters in COMMANDS:
        e = estimate(model, page, parameters, sweeps, gpu)
        # a hub id breaks only after its owner's "/", never at a "-": the column stays narrow enough
        owner, _, name = model.hub_id.rpartition("/")
        hub_id = ((f'<span class="nw">{owner}/</span><wbr>' if owner else "")
                  + f'<span class="nw">{name}</span>')
        rows.append(f"| {hub_id} | {model.windows} | {e['cpu_gb']:.0f} GB | {e['gpu_gb']:.0f} GB | "
                    f"{e['minutes']:.2g} min |")
        commands += [f"# {model.hub_id}", e["command"]]
    return "\n".join([*rows, "", *commands, "```"])


def wide_attention() -> str:
    """The models of :data:`MODELS` whose attention (heads x head width) is wider than the model, in words."""
    return ", ".join(f"{m.hub_id} ({m.n_heads} × {m.d_head} = {m.n_heads * m.d_head} against {m.d_model})"
                     for m in MODELS if m.n_heads * m.d_head != m.d_model)


def table_numbers() -> dict[str, object]:
    """The words and numbers the prose around :func:`commands_table` states: the GPU, the engine's block
    budget (GiB) and the models whose attention is wider than the model."""
    return {"gpu": GPU, "budget_gib": plan.DEFAULT_BUDGET // 2**30, "wide": wide_attention()}
