"""Long sweeps: units of work, shared out over processes, checkpointed, with a plan and a progress bar.

An experiment (:class:`rankcollapse.experiments.config.ExperimentConfig`) is cut into *units*: one weight
source x one block of samples (``BLOCK_SAMPLES`` per device, ``$RANKCOLLAPSE_BLOCK_SAMPLES`` to change it) x
either every SAN configuration (one :func:`rankcollapse.engine.run_san` call, which shares the first layer's
projection between them and lays the weights out once) or the full-transformer reference
(:func:`rankcollapse.hf.extract.full_transformer_metrics`). A unit gives per-sample metrics
[layer + 1, config, block]; the units of a sweep, put back together along the sample axis, are the arrays
one call over all samples gives, so the summary table does not depend on how the work was shared out.

* **Processes** (``torchrun``): under ``torch.distributed`` rank r computes units r, r + K, r + 2K, ...;
  the per-sample metrics are gathered to rank 0, which summarizes and stores the one result (same key,
  same provenance, plus ``world_size``). NCCL on GPUs, gloo on CPU; each rank uses ``cuda:LOCAL_RANK``.
* **Resume**: each finished unit is checkpointed beside the store, in ``<store root>/partial/``
  (:mod:`rankcollapse.experiments.checkpoints`: where, and who may reuse it); a run killed at any point and
  started again with the same command, also in another clone that has the units committed, computes only the
  missing units, then stores the result (CSV, then the JSON that makes it visible) and deletes the folder. The
  result's ``compute_time_s`` sums its units' seconds over every process and session, ``units_resumed`` counts
  those taken from checkpoints (``units_resumed_packed`` those of them read from packed checkpoints, whose
  values are within about 1e-4 of the computed ones), and ``wall_time_s`` is the last session's.
* **Plan**: before it starts, a run prints its size, expected time and memory, and refuses with one
  ValueError when it cannot fit (:mod:`rankcollapse.experiments.plan`) or the store cannot be written
  (before the first unit).
* **Settled work**: a configuration that is not tracked exactly stops on a chunk of samples once every sample
  has sat within the floor band for ``SETTLE_LAYERS`` consecutive layers (``$RANKCOLLAPSE_SETTLE_LAYERS``; 0
  computes every layer): its later layers hold the last computed values and the table's metric ``settled``
  says so (:func:`rankcollapse.engine.run_san`'s ``settle``; recorded as ``settle_layers`` in the provenance).
* **Stale results**: a stored result is reused only while its model's files are those it recorded
  (:func:`rankcollapse.experiments.models.identity_mismatch`); else it is computed again, saying so in one
  line.
* **Progress**: a tqdm bar over blocks x configurations with an ETA, on stderr, when reporting is on
  (:mod:`rankcollapse.experiments.ranks`): asked by the command line (``rankcollapse run`` and
  ``rankcollapse compute``), or ``$RANKCOLLAPSE_PROGRESS=1``, or stderr is a terminal; never inside a
  Jupyter kernel (the book build).

``rankcollapse compute PAGE [-p NAME VALUE ...]`` stores a page's results without rendering it (in K processes
under ``torchrun --nproc-per-node K``, which ``rankcollapse run PAGE --nproc K`` launches before rendering).

Used by: :mod:`rankcollapse.book.registry` (``run_experiment``), :mod:`rankcollapse.book.cli`,
``benchmarks/bench_san.py``, tests/unit/test_sweep.py.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd
import torch

from rankcollapse.experiments.config import ExperimentConfig, stored_parameters
from rankcollapse.experiments.data import TextSamples
from rankcollapse.experiments.models import (identity_mismatch, initialized_model, loaded_model,
                                             model_identity, text_samples, weight_hash)
from rankcollapse.experiments.table import check_finite, check_table, config_labels, summarize
from rankcollapse.engine import AttentionLayer, random_layers, run_san
from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics as rc_metrics
from rankcollapse.experiments.provenance import compute_sha256, provenance_record, source_sha256
from rankcollapse.experiments.plan import env_int, make_plan, memory_budget
from rankcollapse.experiments.checkpoints import (Checkpoints, Unit, other_block, partial_folder, superseded,
                                                  warn_orphans)
from rankcollapse.experiments.sample_values import (FULL_TRANSFORMER, SampleValues, article_groups,
                                                    from_metrics)
from rankcollapse.experiments.ranks import broadcast, gather, rank_and_world, reporting
from rankcollapse.experiments.store import ResultStore, StoredResult

source_sha256(), compute_sha256()  # hash the code this process runs now, before a long run's files can change

BLOCK_SAMPLES = {"cpu": 64, "cuda": 1024}  # samples per unit of work (checkpoint granularity) per device type
BLOCK_ENV = "RANKCOLLAPSE_BLOCK_SAMPLES"
SETTLE_ENV = "RANKCOLLAPSE_SETTLE_LAYERS"
SETTLE_LAYERS = 3  # a configuration whose every sample of a chunk sat within the floor band this long stops


# ---------------------------------------------------------------- units of work


def block_samples(config: ExperimentConfig) -> int:
    """Samples per unit: ``$RANKCOLLAPSE_BLOCK_SAMPLES``, else BLOCK_SAMPLES of the device type; at most the
    sweep's samples (a larger block holds no more, and would only be planned for)."""
    asked = env_int(BLOCK_ENV, BLOCK_SAMPLES[config.device.split(":")[0]], 1, "an integer")
    return min(asked, config.n_samples)


def settle_layers(config: ExperimentConfig) -> int | None:
    """After how many consecutive layers on its rounding floor a configuration stops (``engine.run_san``'s
    ``settle``): ``$RANKCOLLAPSE_SETTLE_LAYERS``, else SETTLE_LAYERS; 0, or a sweep with ``attention_stats``
    (whose decomposition is per layer): never (None)."""
    return (None if config.attention_stats
            else env_int(SETTLE_ENV, SETTLE_LAYERS, 0, "a number of layers") or None)


def units(config: ExperimentConfig, block: int) -> list[Unit]:
    """Every unit of a sweep, block by block (so consecutive units share their samples' X(0))."""
    parts = (False, True) if config.full_transformer else (False,)
    return [Unit(kind, full, start, min(start + block, config.n_samples))
            for start in range(0, config.n_samples, block) for kind in config.weights for full in parts]


def shard(plan_units: list[Unit], rank: int, world: int) -> list[Unit]:
    """The units rank ``rank`` of ``world`` computes: the j-th unit of block b (in plan order) goes to rank
    (b + j) mod world, so the costly SAN units and the cheap full-transformer ones rotate over the ranks block
    by block. (Dealt ``plan_units[rank::world]``, a block's units — initialized SAN, initialized full,
    pretrained SAN, pretrained full — gave two ranks every SAN unit: Fig. 4 at 3000 samples on 2 ranks, one
    rank idle after half an hour, the other busy for two hours.)

    >>> plan = units(ExperimentConfig(n_samples=4, full_transformer=True), 2)
    >>> [u.name for u in shard(plan, 0, 2)]
    ['initialized-san-0-2', 'pretrained-san-0-2', 'initialized-full-2-4', 'pretrained-full-2-4']
    """
    blocks: dict[int, list[Unit]] = {}
    for unit in plan_units:
        blocks.setdefault(unit.start, []).append(unit)
    return [unit for b, block in enumerate(blocks.values()) for j, unit in enumerate(block)
            if (b + j) % world == rank]


@dataclass(frozen=True, eq=False)
class Inputs:
    """What a sweep takes instead of loading its model and drawing its text (a device bundle,
    :mod:`rankcollapse.experiments.bundle`): a model whose embeddings give X(0) and whose config shapes the
    layers, the samples, and the provenance fields that replace those read from the model."""

    loaded: object  # a rankcollapse.hf.load.LoadedModel
    drawn: TextSamples  # exactly the sweep's n_samples
    record: dict  # e.g. the real model's weight_sha256 and the commit of the bundled code


class _Work:
    """What the units of one sweep share in a process: model, samples, layers, the current block's X(0)."""

    def __init__(self, config: ExperimentConfig, inputs: Inputs | None = None) -> None:
        self.config = config
        self.loaded = loaded_model(config.model) if inputs is None else inputs.loaded
        self.record = {} if inputs is None else inputs.record
        if inputs is not None:
            self.drawn = inputs.drawn  # instead of the cached property's draw
        self.configs = config.san_configs()
        self.names = None if config.geometry else rc_metrics.NORM_METRIC_NAMES
        self.settle = settle_layers(config)
        self._layers: dict[str, list[AttentionLayer]] = {}
        self._references: dict[str, torch.nn.Module] = {}
        self._x0: tuple[tuple[int, int], torch.Tensor] | None = None

    @property
    def d_model(self) -> int:
        return int(self.loaded.model.config.hidden_size)

    @functools.cached_property
    def drawn(self) -> TextSamples:
        """The sweep's text samples, drawn on first use (after the plan's memory check)."""
        c = self.config
        return text_samples(c.model, c.n_samples, c.n_tokens, c.seed, c.overlap)

    def layers(self, kind: str) -> list[AttentionLayer]:
        """The stack of a weight source (pretrained: the model's own, at most n_layers; else seeded fresh from
        the config's ``initial_seed``, without biases for "initialized_nobias": the same draws, biases
        dropped; with the config's ``decay_slope``, its distance-decay bias on every layer's logits)."""
        from rankcollapse.hf import extract

        if kind not in self._layers:
            c, model = self.config, self.loaded.model
            if kind == "pretrained":
                self._layers[kind] = extract.extract_layers(model, n_tokens=c.n_tokens)[:c.n_layers]
            else:
                heads = model.config.num_attention_heads
                fresh = random_layers(c.n_layers, self.d_model, heads, init=c.init, seed=c.initial_seed,
                                      bias=kind != "initialized_nobias")
                if c.decay_slope:  # a slope 0 adds nothing (and keeps the complete mask direct, see exact.py)
                    # [head, token, token]
                    bias = rc_masks.decay_bias(c.n_tokens, [float(c.decay_slope)] * heads)
                    fresh = [replace(layer, score_bias=bias) for layer in fresh]
                self._layers[kind] = fresh
        return self._layers[kind]

    def reference(self, kind: str) -> torch.nn.Module:
        """The full transformer of a weight source, on the sweep's device."""
        if kind not in self._references:
            model = self.loaded.model
            if kind != "pretrained":
                model = initialized_model(model, self.config.n_layers, self.config.initial_seed)
            elif self.config.device != "cpu":
                model = copy.deepcopy(model)  # the cached CPU model still gives X(0)
            self._references[kind] = model.to(self.config.device)
        return self._references[kind]

    def x0(self, start: int, stop: int) -> torch.Tensor:
        """X(0) of samples [start, stop), float64.  Shapes: -> [sample, token, d_model]."""
        from rankcollapse.hf import extract

        if self._x0 is None or self._x0[0] != (start, stop):
            ids = self.drawn.input_ids[start:stop]  # [sample, token]
            self._x0 = ((start, stop), extract.embed(self.loaded.model, ids).to(torch.float64))
        return self._x0[1]

    def compute(self, unit: Unit, memory_budget: int) -> dict[str, torch.Tensor]:
        """One unit's per-sample metrics.  Shapes: each [layer + 1, config, stop - start], on the CPU."""
        from rankcollapse.hf import extract

        c = self.config
        if unit.full:
            ids = self.drawn.input_ids[unit.start:unit.stop].to(c.device)  # [sample, token]
            full = extract.full_transformer_metrics(self.reference(unit.weights), ids)  # [layer + 1, sample]
            metrics = {k: v[:c.n_layers + 1, None].cpu() for k, v in full.items()
                       if self.names is None or k in self.names}
            check_finite(metrics, [{"weights": unit.weights, "variant": FULL_TRANSFORMER}], c.dtype)
            return metrics
        result = run_san(self.x0(unit.start, unit.stop), self.layers(unit.weights), self.configs,
                         dtype=rc_metrics.DTYPES[c.dtype], device=c.device, metric_names=self.names,
                         memory_budget=memory_budget, use_model_windows=c.model_windows,
                         attention_stats=c.attention_stats, settle=self.settle)
        check_finite(result.metrics, config_labels(self.configs, unit.weights), c.dtype)
        return result.metrics

    def assemble(self, plan: list[Unit],
                 computed: dict[str, dict[str, torch.Tensor]]) -> tuple[pd.DataFrame, SampleValues]:
        """The tidy table and the per-sample values from every unit's metrics (keyed by unit name), exactly as
        one call would give them."""
        c, frames, curves = self.config, [], []
        blocks = sorted({(u.start, u.stop) for u in plan})
        for kind in c.weights:
            parts = [(False, config_labels(self.configs, kind))]
            if c.full_transformer:
                parts.append((True, [{"weights": kind, "variant": FULL_TRANSFORMER, "mask": "model",
                                      "window": None, "temperature": None, "norm": "model", "skip": True}]))
            for full, labels in parts:
                pieces = [computed[Unit(kind, full, *b).name] for b in blocks]
                metrics = {name: torch.cat([p[name] for p in pieces], dim=-1)  # [layer + 1, config, sample]
                           for name in pieces[0]}
                frames.append(summarize(metrics, labels, c.n_tokens, self.d_model))
                curves.append((labels, metrics))
        groups = article_groups(self.drawn.sample_ids)  # each sample's article: the bootstrap resamples them
        return pd.concat(frames, ignore_index=True), from_metrics(curves, groups)


# ---------------------------------------------------------------- computing and storing


def compute(config: ExperimentConfig, *, label: str = "sweep", partial: Path | None = None,
            inputs: Inputs | None = None, run: dict | None = None) -> tuple[pd.DataFrame, dict] | None:
    """The sweep's tidy table and the provenance the store adds to it, its per-sample values under
    ``"samples"`` (stored beside the table): this rank's units, resumed from ``partial``, gathered to rank 0
    (None on the others). ``run``: what the run record in ``partial`` names (page, commit, start), written
    with the first unit."""
    from tqdm import tqdm

    rank, world = rank_and_world()
    work, block, budget = _Work(config, inputs), block_samples(config), memory_budget()
    plan_units = units(config, block)
    show = reporting() and rank == 0
    plan = make_plan(work, label, plan_units, block, budget, timed=show)
    if show:
        print(plan.text(), file=sys.stderr, flush=True)
    parameters = {k: v for k, v in asdict(config).items()  # units checkpointed before these fields resume
                  if (k not in ("attention_stats", "windows") or v) and (k != "weight_seed" or v is not None)}
    checkpoints = Checkpoints(partial, {"parameters": parameters, "torch": torch.__version__, "block": block,
                                         "settle": work.settle,
                                         "folder": None if partial is None else partial.name,
                                         "model": model_identity(config.model)},
                              run and {**run, "parameters": parameters, "units": len(plan_units)})
    mine = shard(plan_units, rank, world)
    resumed = {u.name: found for u in mine if (found := checkpoints.load(u)) is not None}
    computed = {name: metrics for name, (metrics, _) in resumed.items()}
    seconds = {name: s for name, (_, s) in resumed.items()}  # unit -> compute seconds, across sessions
    stray = other_block(partial, plan_units, block) if rank == 0 else None
    if stray:
        print(f"{label}: {stray}", file=sys.stderr, flush=True)
    if show and computed:
        print(f"{label}: resuming, {len(computed)} of {len(mine)} units of this process from {partial}",
              file=sys.stderr, flush=True)
    width = lambda unit: 1 if unit.full else len(work.configs)  # noqa: E731  configurations in a unit
    with tqdm(total=sum(map(width, mine)), desc=label, unit="block.config", disable=not show, file=sys.stderr,
              mininterval=1.0, initial=sum(width(u) for u in mine if u.name in computed)) as bar:
        for unit in (u for u in mine if u.name not in computed):
            start = time.perf_counter()
            computed[unit.name] = work.compute(unit, budget)
            seconds[unit.name] = time.perf_counter() - start
            checkpoints.save(unit, computed[unit.name], seconds[unit.name])
            bar.update(width(unit))
    gathered = gather((computed, seconds, len(resumed), len(checkpoints.packed)))
    if rank != 0:
        return None
    table, per_sample = work.assemble(plan_units, {k: v for part, *_ in gathered for k, v in part.items()})
    ids, model = work.drawn.input_ids, work.loaded.model
    extra = {"model_spec": config.model, "model_description": work.loaded.source.description,
             "model_quantized": work.loaded.source.quantized, "weight_sha256": weight_hash(model),
             **model_identity(config.model, work.loaded.source.location),
             "sample_ids_sha256": hashlib.sha256(ids.numpy().tobytes()).hexdigest(),
             "sample_texts_sha256": work.drawn.texts_hash, "samples_available": work.drawn.n_available,
             "dtype": config.dtype, "device": config.device,
             "depth": {kind: len(work.layers(kind)) for kind in config.weights},
             "model_layers": int(model.config.num_hidden_layers), "world_size": world, "block_samples": block,
             "settle_layers": work.settle,
             # the units' compute time summed over processes and resumed sessions (wall_time_s: this session)
             "compute_time_s": round(sum(s for _, part, *_ in gathered for s in part.values()), 3),
             "units_resumed": sum(n for _, _, n, _ in gathered), "samples": per_sample, **work.record}
    packed = sum(n for *_, n in gathered)
    return table, extra | ({"units_resumed_packed": packed} if packed else {})  # values within 1e-4


def run_experiment(page: str, config: ExperimentConfig, store: ResultStore | None = None,
                   inputs: Inputs | None = None, computed_by: dict | None = None) -> StoredResult:
    """The stored result of ``page`` for exactly ``config``, verified
    (:func:`rankcollapse.experiments.table.check_table`); else computed (:func:`compute`: resumable from its
    checkpoints, shared over the ranks of a process group, from ``inputs`` when given) and stored by rank 0
    with its provenance, and ``computed_by`` (``{"page": ..., "parameters": {...}}``: the page and its
    parameters that compute it, from which :func:`rankcollapse.experiments.store.recompute_command` writes the
    command of a damaged result). Every rank returns rank 0's result."""
    store = store or ResultStore()
    parameters = stored_parameters(config)
    rank, _ = rank_and_world()
    found = store.load(page, parameters, check_table) if rank == 0 else None
    stale = found and identity_mismatch(config.model, found.provenance)
    if stale:  # e.g. a local folder's weights rewritten since: never answer from the old numbers
        print(f"{page}: not using the stored result {found.table_path}: {stale}; computing it again",
              file=sys.stderr)
    found = broadcast(None if stale else found)
    if found is not None:
        return found
    # the commit that starts the run, not a later one
    start, origin = time.perf_counter(), provenance_record(None)
    partial = partial_folder(store, page, parameters)
    store.check_writable(page, partial)  # before the first unit, not after the last
    if rank == 0:
        warn_orphans(partial, page)
    out = compute(config, label=page, partial=partial, inputs=inputs,
                  run={"page": page, "git_commit": origin["git_commit"],
                       "started_utc": origin["created_utc"]})
    result = None
    if rank == 0:
        table, extra = out
        provenance = {**origin, **extra, "source_sha256": source_sha256(),
                      "wall_time_s": round(time.perf_counter() - start, 3),
                      **({"computed_by": computed_by} if computed_by is not None else {})}
        provenance.pop("parameters")
        result = store.save(page, parameters, table, provenance, samples=provenance.pop("samples"))
        superseded(partial)  # and the same result's folders of other source: nothing can resume them now
    return broadcast(result)
