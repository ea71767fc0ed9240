"""The plan of a sweep, printed before it starts: its size, expected time and memory; and the memory budget.

A sweep (:mod:`rankcollapse.experiments.sweep`) states its size (samples x layers x configurations), the
expected wall time from the measured throughput (``benchmarks/throughput.json``, written by
``benchmarks/bench_san.py``; else a quick timing of one small block) and the memory it needs, and refuses with
one ValueError when the memory budget (``$RANKCOLLAPSE_MEMORY_BUDGET`` bytes, default 1 GiB) cannot hold one
block or the machine cannot hold the run (estimated from the shapes, before any layer is built
or sample drawn).

Used by: :mod:`rankcollapse.experiments.sweep`, :mod:`rankcollapse.book.pages.large_models`, ``benchmarks/``
(``bench_san.py``, ``gpu_throughput.py``, ``engine_throughput.py``), tests/unit/test_sweep.py.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from rankcollapse.core import metrics as rc_metrics
from rankcollapse.engine import (AttentionLayer, attention_flop, bytes_per_sample, resolve_device, run_san,
                                 samples_per_chunk)
from rankcollapse.experiments.config import ExperimentConfig
from rankcollapse.experiments.models import layer_shapes
from rankcollapse.experiments.checkpoints import Unit
from rankcollapse.experiments.ranks import rank_and_world

BUDGET_ENV = "RANKCOLLAPSE_MEMORY_BUDGET"
DEFAULT_BUDGET = 2**30  # bytes the engine may use for one block (engine.run_san's memory_budget)
THROUGHPUT_FILE = Path(__file__).resolve().parents[3] / "benchmarks" / "throughput.json"


class Work(Protocol):
    """What a plan reads of a sweep's work (:class:`rankcollapse.experiments.sweep._Work`)."""

    config: ExperimentConfig
    configs: tuple
    names: tuple[str, ...] | None
    loaded: object
    d_model: int
    settle: int | None  # engine.run_san's settle

    def layers(self, kind: str) -> list[AttentionLayer]: ...


def env_int(name: str, default: int, minimum: int, words: str) -> int:
    """``$name`` as an integer >= ``minimum``, else ``default``; one ValueError naming the variable."""
    text = os.environ.get(name)
    if text is None:
        return default
    if not text.isdigit() or int(text) < minimum:
        raise ValueError(f"{name} must be {words} >= {minimum}, got {text!r}")
    return int(text)


def memory_budget() -> int:
    """Bytes the engine may use for one block: ``$RANKCOLLAPSE_MEMORY_BUDGET``, else DEFAULT_BUDGET."""
    return env_int(BUDGET_ENV, DEFAULT_BUDGET, 1, "a number of bytes")


def device_kind(device: torch.device) -> str:
    """What a throughput measurement is valid for: the GPU's name, else ``cpu-<cores>``."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu-{len(os.sched_getaffinity(0))}"


def available_memory(device: torch.device) -> int:
    """Free bytes: the GPU's free memory, else the host's MemAvailable."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["MemAvailable"].split()[0]) * 1024


def measured_throughput(work: Work, device: torch.device, block: int, budget: int) -> tuple[float, str]:
    """sample.layer.config per second of one process and where the number comes from: the benchmark's
    table for this device, dtype and width (the mu path), else a quick timing of one small block."""
    c = work.config
    key = f"{device_kind(device)}|{c.dtype}|{work.d_model}"
    table = json.loads(THROUGHPUT_FILE.read_text()) if THROUGHPUT_FILE.is_file() else {}
    if work.names is not None and key in table:
        row = table[key]
        # the benchmark's sequence length (128 before it was recorded)
        measured_tokens = int(row.get("n_tokens", 128))
        scale = attention_flop(work.d_model, measured_tokens) / attention_flop(work.d_model, c.n_tokens)
        return (float(row["units_per_s"]) * scale,
                f"benchmarks/throughput.json, {key} at {measured_tokens} tokens, measured "
                f"{row['measured_utc']}, scaled to {c.n_tokens} tokens by the attention's operation count")
    n, layers = min(block, 8), work.layers(c.weights[0])[:2]
    x0 = torch.randn(n, c.n_tokens, work.d_model, generator=torch.Generator().manual_seed(0),
                     dtype=torch.float64)
    start = time.perf_counter()
    run_san(x0, layers, work.configs[:1], dtype=rc_metrics.DTYPES[c.dtype], device=device,
            metric_names=work.names, memory_budget=budget)
    seconds = time.perf_counter() - start
    return n * len(layers) / seconds, f"a quick timing of {n} samples x {len(layers)} layers on this device"


@dataclass(frozen=True)
class Plan:
    """What a sweep will do and need, printed before it starts."""

    label: str  # the page
    n_samples: int
    depths: dict[str, int]  # layers per weight source
    n_configs: int  # configurations per weight source (the full transformer counts as one)
    n_units: int  # blocks x weight sources (x 2 with the full transformer)
    block: int  # samples per unit
    world: int  # processes
    throughput: float  # sample.layer.config per second of one process
    throughput_source: str
    need_bytes: int  # memory of one process at its peak (rank 0, holding every sample's metrics)
    engine_bytes: int  # of which the engine's block
    available_bytes: int
    # curves stop after this many layers on their floor (the time is then an upper bound)
    settle: int | None = None

    @property
    def size(self) -> int:
        """sample.layer.config of the whole sweep."""
        return self.n_samples * self.n_configs * sum(self.depths.values())

    def text(self) -> str:
        depth = " + ".join(f"{d} {k}" for k, d in self.depths.items())
        seconds = self.size / self.throughput / self.world
        gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
        return (f"{self.label}: {self.n_samples} samples x ({depth}) layers x {self.n_configs} "
                f"configurations = {self.size:,} sample.layer.configs, in {self.n_units} units of "
                f"<= {self.block} samples over {self.world} process{'es' if self.world > 1 else ''}\n"
                f"{self.label}: expected time of the layers {_duration(seconds)}"
                f"{' or less' if self.settle and seconds >= 1 else ''}"
                f" (loading the model, drawing the samples and any full-transformer reference come on top) "
                f"at {self.throughput:,.0f} sample.layer.configs/s per process ({self.throughput_source}"
                f"{'; every layer counted, curves settled on their floor stop sooner' if self.settle else ''}"
                f")\n"
                f"{self.label}: memory {gib(self.need_bytes)} per process "
                f"(engine block {gib(self.engine_bytes)}), {gib(self.available_bytes)} available")


def _duration(seconds: float) -> str:
    """Seconds in words: ``under 1 s`` (never ``0 s``), seconds below two minutes, minutes below two
    hours, else hours.

    >>> _duration(0.2), _duration(42.4), _duration(600), _duration(9000)
    ('under 1 s', '42 s', '10 min', '2.5 h')
    """
    return ("under 1 s" if seconds < 1 else f"{seconds:.0f} s" if seconds < 120 else
            f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h")


def make_plan(work: Work, label: str, plan_units: list[Unit], block: int, budget: int,
              timed: bool = True) -> Plan:
    """The plan of a sweep; one ValueError when the budget cannot hold one block or the machine the run,
    estimated from the shapes (:func:`rankcollapse.experiments.models.layer_shapes`) before any layer is
    built or sample drawn. ``timed=False`` skips the throughput (NaN) when nobody will read
    the expected time."""
    c, (_, world) = work.config, rank_and_world()
    device = resolve_device(c.device)
    dtype = rc_metrics.DTYPES[c.dtype]
    shapes = layer_shapes(c, work.loaded.model.config)
    depths = {kind: depth for kind, (depth, _) in shapes.items()}
    widest = max((shape for _, shape in shapes.values()),
                 key=lambda s: bytes_per_sample(c.n_tokens, s, dtype))
    per_sample = bytes_per_sample(c.n_tokens, widest, dtype)
    if budget < per_sample:
        raise ValueError(f"the memory budget ({budget:,} bytes, ${BUDGET_ENV}) cannot hold one block: "
                         f"one sample of {c.n_tokens} tokens at width {work.d_model} in {c.dtype} needs "
                         f"{per_sample:,} bytes; raise {BUDGET_ENV} or lower n_tokens")
    engine = per_sample * min(block, samples_per_chunk(c.n_tokens, widest, dtype, budget, device))
    n_configs = len(work.configs) + int(c.full_transformer)
    model = (sum(p.numel() * p.element_size() for p in work.loaded.model.parameters())
             * (1 + int(c.full_transformer)))
    layers = sum(depths.values()) * 4 * work.d_model**2 * (8 + dtype.itemsize)  # float64 source + cast copy
    kept = (2 * 8 * len(rc_metrics.METRIC_NAMES) * c.n_samples * n_configs
            * sum(d + 1 for d in depths.values()))
    need = engine + model + layers + kept + block * c.n_tokens * work.d_model * 8
    available = available_memory(device)
    if need > available:
        raise ValueError(f"{label} needs about {need / 2**30:.2f} GiB per process but "
                         f"{available / 2**30:.2f} GiB are available on {device}; use fewer samples or "
                         f"layers, or a larger machine")
    depths = {kind: len(work.layers(kind)) for kind in c.weights}  # built only now that they fit
    throughput, source = (measured_throughput(work, device, block, budget) if timed
                          else (math.nan, "not timed"))
    return Plan(label, c.n_samples, depths, n_configs, len(plan_units), block, world, throughput, source,
                need, engine, available, work.settle)
