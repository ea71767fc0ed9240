"""Device bundles: what initialized sweeps need, without the model's weights or the text, for a machine that
has PyTorch and transformers but neither the packaged model nor the corpus (a GPU node taking at most 64 MiB
of working tree per job).

An initialized sweep reads from its model only X(0) (its samples' embeddings: the input embedding rows,
positions, scaling, norm) and the model's config (the layers' shapes, the freshly initialized full
transformer). :func:`write_bundle` captures exactly that: it runs :func:`rankcollapse.hf.extract.embed` on
every sample with a hook on every module and keeps the tensors of the modules called before the first layer
(of an embedding table, only the rows looked up), with the token ids, the config and the provenance.
:func:`open_bundle` builds the model from the config alone, with the captured tensors put back, so ``embed``
gives X(0) bit for bit (tests/unit/test_bundle.py). :func:`run_bundle` computes the bundled sweeps through
:func:`rankcollapse.experiments.sweep.run_experiment` (:class:`~rankcollapse.experiments.sweep.Inputs`): the
same key and table as ``rankcollapse compute``, with the real model's weight hash and the
bundled code's commit.

Files: ``bundle.json`` (runs, config, provenance, the sample counts it holds with their text hashes) and
``tensors.zlib`` (``torch.save`` bytes, zlib'd; floating tables as byte planes, lossless, about 85 % of raw).

:func:`run_bundle` runs a bundle on the device: it probes each sweep at a small scale (which also tries the
device), takes the largest sample count whose estimated time fits the budget, and stores each result (and the
archive) as soon as it is done. Its command line, ``python -m rankcollapse.book.cli_bundle FOLDER --store DIR
...``, is :func:`rankcollapse.book.cli_bundle.device_main` (scripts/device_run.sh).

Used by: :mod:`rankcollapse.book.cli_bundle` (``rankcollapse bundle`` and the device script's command line),
tests/unit/test_bundle.py.
"""

from __future__ import annotations

import io
import json
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch

from rankcollapse.engine import resolve_device
from rankcollapse.experiments.config import ExperimentConfig
from rankcollapse.experiments import data as rc_data
from rankcollapse.experiments import sweep
from rankcollapse.experiments.models import loaded_model, model_identity, text_samples, weight_hash
from rankcollapse.experiments.provenance import atomic_write, book_root, git_commit, write_archive
from rankcollapse.experiments.store import ResultStore, canonical_parameters

RECORD_FILE, TENSORS_FILE, EXTRA_FILE = "bundle.json", "tensors.zlib", "tensors-extra.zlib"
SAFETY = 1.2  # a run is started only when its estimated time times this fits what is left of the budget


@dataclass(frozen=True)
class BundledRun:
    """One sweep of a page, its parameters as stored (``n_samples``, ``dtype``, ``device``: set when run)."""

    page: str  # the page it is stored under
    part: str  # the page's name for it ("fig2", "deep", ...)
    parameters: dict  # rankcollapse.experiments.config.stored_parameters of its config


# ---------------------------------------------------------------- writing


def _planes(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor's bytes as byte planes (all first bytes, then all second bytes ...), which compress far
    better than interleaved floats.  Shapes: [...] -> [itemsize, numel] uint8."""
    flat = tensor.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).reshape(flat.numel(), flat.element_size()).T.contiguous()


def _unplanes(planes: torch.Tensor, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    """The inverse of :func:`_planes`.  Shapes: [itemsize, numel] uint8 -> shape."""
    return planes.T.contiguous().view(dtype).reshape(shape)


@torch.no_grad()
def captured_tensors(model: torch.nn.Module, input_ids: torch.Tensor, batch: int = 256) -> dict[str, dict]:
    """Every parameter and buffer of the modules :func:`rankcollapse.hf.extract.embed` calls before the first
    layer on these samples, by dotted name: ``{"values": tensor, "rows": None}``, or for an embedding table
    only the rows looked up (``values`` [row, dim], ``rows`` their indices).
    Shapes: input_ids [sample, token]."""
    from rankcollapse.hf import extract

    inside = {id(m) for m in extract.model_layer(model, 0).modules()}
    called: dict[str, torch.nn.Module] = {}
    looked_up: dict[str, list[torch.Tensor]] = {}

    def hook(name: str):
        def grab(module, args, kwargs):
            if id(module) not in inside:
                called[name] = module
                if isinstance(module, torch.nn.Embedding):
                    looked_up.setdefault(name, []).append(
                        (args[0] if args else kwargs["input"]).reshape(-1).unique())
        return grab

    handles = [m.register_forward_pre_hook(hook(n), with_kwargs=True) for n, m in model.named_modules()]
    try:
        for start in range(0, len(input_ids), batch):
            extract.embed(model, input_ids[start:start + batch])
    finally:
        for handle in handles:
            handle.remove()
    tensors = {}
    for name, module in called.items():
        for attr, tensor in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]:
            full = f"{name}.{attr}" if name else attr
            rows = torch.cat(looked_up[name]).unique() if name in looked_up and attr == "weight" else None
            tensors[full] = {"values": (tensor if rows is None else tensor[rows]).detach().clone(),
                             "rows": rows}
    return tensors


def _encode(tensors: dict[str, dict], input_ids: torch.Tensor) -> bytes:
    """The tensors file's bytes: torch.save of every tensor as byte planes (with dtype and shape), zlib'd."""
    def packed(t: torch.Tensor) -> dict:
        return {"planes": _planes(t), "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}

    payload = {"input_ids": packed(input_ids),
               "tensors": {n: {"values": packed(e["values"]),
                               "rows": None if e["rows"] is None else packed(e["rows"])}
                           for n, e in tensors.items()}}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return zlib.compress(buffer.getvalue(), 9)


def _decode(data: bytes) -> tuple[dict[str, dict], torch.Tensor]:
    """The inverse of :func:`_encode`: (tensors, input_ids)."""
    payload = torch.load(io.BytesIO(zlib.decompress(data)), weights_only=True)

    def unpacked(p: dict | None) -> torch.Tensor | None:
        return None if p is None else _unplanes(p["planes"], getattr(torch, p["dtype"]), p["shape"])

    tensors = {n: {"values": unpacked(e["values"]), "rows": unpacked(e["rows"])}
               for n, e in payload["tensors"].items()}
    return tensors, unpacked(payload["input_ids"])


def _beyond(full: dict, held: dict) -> dict:
    """The rows of an embedding table's entry ``full`` that ``held`` lacks (the extra file's part of it)."""
    new = ~torch.isin(full["rows"], held["rows"])
    return {"values": full["values"][new], "rows": full["rows"][new]}


def write_bundle(folder: Path, runs: list[BundledRun], sample_counts: tuple[int, ...], *,
                 split: int | None = None, extra: Path | None = None) -> dict[str, int]:
    """Write the bundle of ``runs`` (initialized weights only, sharing model, tokens, seed and overlap) for
    each of ``sample_counts`` samples into ``folder``; returns the bytes of each file written. With ``split``
    and ``extra``, ``folder`` holds what the first ``split`` samples need and ``extra`` the token ids and
    table rows the others add (EXTRA_FILE), to travel separately.

    One ValueError for a run with pretrained weights, runs with different samples, or no sample count.
    """
    if (split is None) != (extra is None):
        raise ValueError("split and extra go together: the samples the bundle holds and the folder of "
                         "the others")
    if not runs or not sample_counts or min(sample_counts) < 1:
        raise ValueError(f"a bundle needs runs and sample counts >= 1, got {len(runs)} runs, {sample_counts}")
    for run in runs:
        if list(run.parameters["weights"]) != ["initialized"]:
            raise ValueError(f"{run.page} {run.part} uses weights {run.parameters['weights']}; a bundle "
                             f"holds only initialized sweeps (pretrained layers are the model's weights, "
                             f"which do not travel)")
    shared = {(r.parameters["model"], r.parameters["n_tokens"], r.parameters["seed"], r.parameters["overlap"])
              for r in runs}
    if len(shared) != 1:
        raise ValueError(f"the runs of a bundle must share model, n_tokens, seed and overlap; "
                         f"got {sorted(shared)}")
    (spec, n_tokens, seed, overlap), = shared
    loaded = loaded_model(spec)
    drawn = text_samples(spec, max(sample_counts), n_tokens, seed, overlap)
    held = drawn.input_ids if split is None else drawn.input_ids[:split]  # [sample, token]
    tensors = captured_tensors(loaded.model, held)
    record = {"split": None if split is None else int(split),
        "runs": [canonical_parameters({"page": r.page, "part": r.part, "parameters": r.parameters})
                 for r in runs],
        "config": loaded.model.config.to_dict(), "description": loaded.source.description, "overlap": overlap,
        "samples_available": drawn.n_available,
        "texts_sha256": {str(k): rc_data.texts_sha256(drawn.texts[:k]) for k in sorted(set(sample_counts))},
        "provenance": {"model_spec": spec, "model_description": loaded.source.description,
                       "model_quantized": loaded.source.quantized,
                       "weight_sha256": weight_hash(loaded.model),
                       **model_identity(spec, loaded.source.location),
                       "git_commit": git_commit(book_root()),
                       "computed_from": "device bundle (X(0) ingredients)"}}
    files = {folder / TENSORS_FILE: _encode(tensors, held),
             folder / RECORD_FILE: (json.dumps(record, indent=1, sort_keys=True, default=str)
                                    + "\n").encode()}
    if split is not None:
        full = captured_tensors(loaded.model, drawn.input_ids)
        files[extra / EXTRA_FILE] = _encode({n: _beyond(e, tensors[n]) for n, e in full.items()
                                             if e["rows"] is not None},
                                            drawn.input_ids[split:])
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp, data=data: Path(tmp).write_bytes(data))
    return {str(path): len(data) for path, data in files.items()}


# ---------------------------------------------------------------- reading and running


@dataclass(frozen=True, eq=False)
class Bundle:
    """An opened bundle: its record, runs, token ids and the model rebuilt from its config."""

    record: dict  # bundle.json
    runs: list[BundledRun]
    input_ids: torch.Tensor  # [sample, token] int64, the largest sample count
    loaded: object  # a rankcollapse.hf.load.LoadedModel: the captured tensors in a freshly built model

    @property
    def sample_counts(self) -> tuple[int, ...]:
        """The sample counts it can run (those whose text hash it records and whose token ids
        it holds), ascending."""
        return tuple(sorted(k for k in map(int, self.record["texts_sha256"]) if k <= len(self.input_ids)))

    def inputs(self, n_samples: int, probe: bool = False) -> sweep.Inputs:
        """A sweep's inputs for the first ``n_samples`` samples (the first k of a draw are the draw of k): one
        of its sample counts, or with ``probe`` any count up to the largest (a timing, never stored;
        no text hash)."""
        if not (probe and 1 <= n_samples <= len(self.input_ids)) and n_samples not in self.sample_counts:
            raise ValueError(f"n_samples must be one of the bundle's sample counts "
                             f"{', '.join(map(str, self.sample_counts))}; got {n_samples}")
        drawn = rc_data.TextSamples(input_ids=self.input_ids[:n_samples], sample_ids=(), texts=(),
                                    texts_hash=self.record["texts_sha256"].get(str(n_samples), "probe"),
                                    n_available=self.record["samples_available"],
                                    overlap=self.record["overlap"])
        return sweep.Inputs(self.loaded, drawn, self.record["provenance"])


def open_bundle(folder: Path, extra: Path | None = None, stand_in: bool = False) -> Bundle:
    """Read a bundle (and its extra rows and token ids from the folder ``extra``, when that holds EXTRA_FILE)
    and rebuild its model: the config's architecture (eager attention, eval mode), with every captured tensor
    put back (tables: the rows looked up; the others are zero). ``stand_in``: without its tensors, random
    token ids and the model as initialized (to try a device before the tensors travel; never to store)."""
    from transformers import AutoConfig, AutoModel

    from rankcollapse.hf.load import LoadedModel, ModelSource

    record = json.loads((folder / RECORD_FILE).read_text())
    if stand_in:
        counts, tokens = max(map(int, record["texts_sha256"])), record["runs"][0]["parameters"]["n_tokens"]
        tensors, input_ids = {}, torch.randint(int(record["config"]["vocab_size"]), (counts, tokens),
                                               generator=torch.Generator().manual_seed(0))
    else:
        tensors, input_ids = _decode((folder / TENSORS_FILE).read_bytes())
    if extra is not None and (extra / EXTRA_FILE).is_file() and not stand_in:
        more, more_ids = _decode((extra / EXTRA_FILE).read_bytes())
        input_ids = torch.cat([input_ids, more_ids])  # [sample, token]
        for name, entry in more.items():
            tensors[name] = {k: torch.cat([tensors[name][k], entry[k]]) for k in ("values", "rows")}
    settings = dict(record["config"])
    config = AutoConfig.for_model(settings.pop("model_type"), **settings)
    model = AutoModel.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, entry in tensors.items():
            owner, _, attr = name.rpartition(".")
            target = getattr(model.get_submodule(owner), attr)
            if entry["rows"] is None:
                target.copy_(entry["values"])
            else:
                target.zero_()
                target[entry["rows"]] = entry["values"]
    source = ModelSource(record["provenance"]["model_spec"], str(folder), record["description"])
    runs = [BundledRun(r["page"], r["part"], r["parameters"]) for r in record["runs"]]
    return Bundle(record, runs, input_ids, LoadedModel(model=model, tokenizer=None, source=source))


def run_config(run: BundledRun, n_samples: int, dtype: str, device: str, **scale) -> ExperimentConfig:
    """The config of a bundled run at ``n_samples``, ``dtype`` and ``device`` (``scale``: e.g. fewer layers
    for a probe)."""
    values = {**run.parameters, "n_samples": n_samples, "dtype": dtype, "device": device, **scale}
    return ExperimentConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def _probe(bundle: Bundle, run: BundledRun, n: int, depth: int, dtype: str, device: str,
           scratch: Path) -> float:
    """Estimated seconds per sample of a bundled run: timed at ``n`` samples x ``depth`` and x ``2 depth``
    layers, the difference is the cost of a sample.layer; the shallow run's whole time per sample is added
    (its fixed costs counted once per ``n`` samples, more than a full run pays)."""
    seconds = []
    for layers in (depth, 2 * depth):
        config = run_config(run, n, dtype, device, n_layers=layers)
        t0 = time.perf_counter()
        sweep.run_experiment(run.page, config, ResultStore(scratch / str(layers)),
                             bundle.inputs(n, probe=True))
        seconds.append(time.perf_counter() - t0)
    # per sample.layer; a floor for noise
    per_layer = max(seconds[1] - seconds[0], seconds[1] / 10) / (n * depth)
    return seconds[0] / n + per_layer * max(run.parameters["n_layers"] - depth, 0)


def _archive(store: ResultStore, keys: list[tuple[str, str]], path: Path) -> None:
    """A .tar.gz of the stored results ``(page, key)``, each as ``results/<page>/<key>.csv.gz``, ``.json``
    and, where kept, ``.samples.npz`` (in parts when large:
    :func:`rankcollapse.experiments.provenance.write_archive`)."""
    files = {f"results/{page}/{p.name}": p for page, key in keys
             for p in sorted((store.root / page).glob(f"{key}.*"))}
    write_archive(files, path)


def run_bundle(bundle: Bundle, store: ResultStore, *, samples: tuple[int, ...],
               dtypes: tuple[str, ...] = ("float32",), device: str = "cpu", budget_s: float = float("inf"),
               probe: tuple[int, int] = (64, 4), archive: Path | None = None, log=print) -> dict:
    """Compute the bundled runs for each dtype in turn, page by page (a page's parts at one sample count, so
    it shows them together), each page at the largest of ``samples`` whose time, estimated from a probe of
    each run (:func:`_probe` at ``probe`` samples x layers, which also tries the device), fits what is left of
    ``budget_s``; a page none fits is skipped. Each result is stored at once (and the archive rewritten).
    Returns a report: each run's estimate and wall time (the engine's own throughput is
    ``benchmarks/engine_throughput.py``'s, which the device script runs beside). One ValueError for a sample
    count the bundle does not hold."""
    unknown = sorted(set(samples) - set(bundle.sample_counts))
    if not samples or unknown:
        raise ValueError(f"samples must be sample counts the bundle holds "
                         f"({', '.join(map(str, bundle.sample_counts))}); got {list(samples)}")
    started, report = time.perf_counter(), {"device": device, "runs": [], "skipped": []}
    if resolve_device(device).type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(resolve_device(device))
    report["torch"], stored = torch.__version__, []
    for dtype in dtypes:
        with tempfile.TemporaryDirectory() as scratch:
            per_sample = [_probe(bundle, run, min(probe[0], max(samples)), probe[1], dtype, device,
                                 Path(scratch))
                          for run in bundle.runs]  # estimated seconds per sample of each run
        log(f"{dtype}: probe seconds per sample of each run {[round(v, 4) for v in per_sample]}")
        for page in dict.fromkeys(run.page for run in bundle.runs):
            mine = [(run, e) for run, e in zip(bundle.runs, per_sample) if run.page == page]
            left = budget_s - (time.perf_counter() - started)
            fits = [k for k in sorted(samples, reverse=True) if k * sum(e for _, e in mine) * SAFETY <= left]
            log(f"{dtype} {page}: {left:.0f} s left; sample counts that fit: {fits}")
            if not fits:
                report["skipped"].append({"dtype": dtype, "page": page, "left_s": left,
                                          "per_sample_s": sum(e for _, e in mine)})
            else:
                stored += _run_page(bundle, store, mine, fits[0], dtype, device, report, archive, stored, log)
    report["total_s"] = round(time.perf_counter() - started, 2)
    return report


def _run_page(bundle: Bundle, store: ResultStore, runs: list[tuple[BundledRun, float]], n_samples: int,
              dtype: str, device: str, report: dict, archive: Path | None, stored: list[tuple[str, str]],
              log) -> list:
    """Compute and store one page's bundled runs (each with its estimated seconds per sample) at
    ``n_samples``; adds each to ``report`` and rewrites the archive of ``stored`` and these. Returns these
    (page, key) pairs."""
    new = []
    for run, estimate in runs:
        config = run_config(run, n_samples, dtype, device)
        t0 = time.perf_counter()
        result = sweep.run_experiment(run.page, config, store, bundle.inputs(n_samples))
        seconds = time.perf_counter() - t0
        new.append((run.page, result.key))
        work = config.n_samples * config.n_layers * len(config.san_configs())
        report["runs"].append({"page": run.page, "part": run.part, "key": result.key, "dtype": dtype,
                               "n_samples": n_samples, "n_layers": config.n_layers,
                               "wall_s": round(seconds, 2), "estimate_s": round(estimate * n_samples, 2),
                               "san_sample_layer_configs": work,
                               "compute_time_s": result.provenance["compute_time_s"]})
        log(f"stored {run.page}/{result.key} ({run.part}, {dtype}, {n_samples} samples) in {seconds:.1f} s "
            f"(estimated {estimate * n_samples:.1f} s)")
        if archive is not None:
            _archive(store, stored + new, archive)
    return new
