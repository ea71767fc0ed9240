"""The experiment sweeps: an :class:`ExperimentConfig` -> a tidy table of per-layer sample statistics.

The experiment and author-response pages reach this module through the page registry
(:mod:`rankcollapse.book.registry`, which holds each page's fixed choices); :func:`rankcollapse.experiments.sweep.run_experiment`
loads the stored result with exactly these parameters from the results store (:mod:`rankcollapse.experiments.store`)
or computes it (in units of sample blocks, resumable, over the ranks of a process group) and stores it.

Protocol (Dong et al.'s, with our [recon] choices as parameters): real Wikipedia text cut to exactly
``n_tokens`` tokens by the pretrained model's tokenizer; X(0) = that model's own embedding output
(shared by *initialized* and *pretrained* runs, so only the attention weights differ); *pretrained* =
the model's attention sublayers (its first ``min(n_layers, model depth)``, never cycled); *initialized* = fresh layers of the
same sizes, PyTorch's nn.Linear default U(-1/sqrt(d), 1/sqrt(d)) (the authors' response), seeded (``weight_seed``,
else ``seed``); *initialized_nobias* = the very same draws with every bias dropped (a control: the theory's SAN
has none). The
optional *full transformer* reference is the Hugging Face forward (hooks), pretrained or freshly
initialized by Hugging Face (N(0, 0.02)).

The table is tidy: one row per weights x configuration x layer x metric, columns ``mean, std, median,
q10, q90, min, max`` over samples; the metric ``full_rank`` is 1 for a sample at full numerical rank,
so its mean is the fraction at full rank.

Used by: :mod:`rankcollapse.book.registry`, ``benchmarks/``, tests/unit/test_experiments.py.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from rankcollapse.experiments import data as rc_data
from rankcollapse.experiments.provenance import TOKENIZER_FILES, files_sha256, folder_files
from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics as rc_metrics
from rankcollapse import engine
from rankcollapse.core.checks import check_choice, check_choices, check_int, check_temperature
from rankcollapse.hf.load import check_model_spec
from rankcollapse.core.norms import NORM_NAMES

# Where the attention weights come from. "initialized_nobias": the very weights of "initialized" (same seed,
# same draws) with every bias dropped -- the theory's SAN X' = A X W_V has none (a control, issue 21).
WEIGHT_SOURCES = ("initialized", "pretrained", "initialized_nobias")
DEFAULT_WEIGHTS = ("initialized", "pretrained")  # what a sweep runs unless told (results' keys depend on it)
INITIALIZED = ("initialized", "initialized_nobias")  # the freshly initialized weight sources
STATISTICS = ("mean", "std", "median", "q10", "q90", "min", "max")
TABLE_METRICS = ("mu", "relative_mu", "norm", "floor", "relative_floor", "exact", "numerical_rank", "full_rank",
                 "sigma_min", "sigma_min_floor", "mean_abs_cosine",  # "exact": 1 where mu is tracked below the floor
                 engine.SETTLED_METRIC,  # the share of samples not computed at a layer, settled on the floor
                 *rc_metrics.ATTENTION_METRIC_NAMES)  # only in sweeps with attention_stats
MAX_SAMPLES = 5000  # the packaged Wikipedia leads give a few thousand samples of 128 tokens
MAX_TOKENS = 8192  # longest sequence of a sweep (a model's own limit is checked by experiment_config)


@dataclass(frozen=True)
class ExperimentConfig:
    """One sweep: weights x masks x temperatures x norms x skips, all on the same X(0)."""

    model: str = "pkg:minilm"  # spec of the pretrained model (rankcollapse.hf.load); gives tokenizer, X(0), sizes
    weights: tuple[str, ...] = DEFAULT_WEIGHTS  # which attention weights, names from WEIGHT_SOURCES
    masks: tuple[str, ...] = rc_masks.PAPER_MASKS  # mask names from rankcollapse.core.masks.MASK_NAMES
    window: int = 4  # window of the windowed masks (half-width bi-directional, size uni-directional) [recon]
    temperatures: tuple[float | None, ...] = (None,)  # d_QK values; None = the layer's own 1/sqrt(d_head)
    norms: tuple[str, ...] = ("none",)  # names from rankcollapse.core.norms.NORM_NAMES
    skips: tuple[bool, ...] = (False,)  # with / without the skip connection
    n_layers: int = 12  # depth of initialized stacks; pretrained stacks use min(n_layers, model depth)
    n_samples: int = 16  # Wikipedia samples
    n_tokens: int = 32  # tokens per sample (exactly)
    seed: int = 0  # selects the samples and the initialized weights
    overlap: str = "disjoint"  # how samples are cut from the leads (rankcollapse.experiments.data.CUT_NAMES)
    init: str = "torch"  # initialized weights: "torch" (U(+-1/sqrt(d)), the response) or "hf" (N(0, 0.02))
    dtype: str = "float64"  # dtype of the hidden states: "float64" or "float32"
    device: str = "cpu"  # "cpu" or "cuda"
    full_transformer: bool = False  # add the Hugging Face forward of the whole model as a reference
    geometry: bool = False  # also rank, sigma_min and mean |cos| (one SVD per layer); else mu, norm, floor only
    mask_options: tuple[tuple[str, object], ...] = ()  # (keyword, value) pairs of MASK_OPTIONS for every mask
    model_windows: bool = True  # pretrained layers keep the model's own sliding windows (False: drop them)
    attention_stats: bool = False  # also each layer's decomposition of mu and attention statistics (engine.run_san)
    weight_seed: int | None = None  # seed of the initialized weights; None: ``seed`` (which also selects samples)

    def __post_init__(self) -> None:
        check_choices("weights", self.weights, WEIGHT_SOURCES)
        check_choices("masks", self.masks, rc_masks.MASK_NAMES)
        check_choices("norms", self.norms, NORM_NAMES)
        check_choices("skips", self.skips, (False, True))
        check_choice("model_windows", self.model_windows, (False, True))
        check_choice("attention_stats", self.attention_stats, (False, True))
        if not isinstance(self.temperatures, tuple) or not self.temperatures:
            raise ValueError(f"temperatures must be a non-empty tuple of numbers > 0 or None, got {self.temperatures!r}")
        for t in self.temperatures:
            check_temperature("temperatures", t, allow_none=True)
        check_int("n_tokens", self.n_tokens, 2, MAX_TOKENS)
        check_int("n_samples", self.n_samples, 1, MAX_SAMPLES)
        check_int("n_layers", self.n_layers, 1, 4096)
        check_int("seed", self.seed, 0, 2**31 - 1)
        if self.weight_seed is not None:
            check_int("weight_seed", self.weight_seed, 0, 2**31 - 1)
        if self.full_transformer and "initialized_nobias" in self.weights:
            raise ValueError("weights 'initialized_nobias' has no full transformer (Hugging Face's own init); "
                             "run it with full_transformer False")
        if any(m in rc_masks.WINDOWED_MASKS for m in self.masks):
            check_int("window", self.window, 1, self.n_tokens - 1)
        check_choice("overlap", self.overlap, rc_data.CUT_NAMES)
        check_choice("init", self.init, engine.INIT_NAMES)
        check_choice("dtype", self.dtype, tuple(rc_metrics.DTYPES))
        if self.device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        check_model_spec(self.model)
        self._check_mask_options()

    def _check_mask_options(self) -> None:
        """Every option is taken by every mask (the random mask needs density and seed); values checked by
        building each mask once at ``n_tokens``."""
        options = self.mask_options
        if not isinstance(options, tuple) or any(not isinstance(o, (tuple, list)) or len(o) != 2 for o in options):
            raise ValueError(f"mask_options must be a tuple of (keyword, value) pairs, got {options!r}")
        options = tuple(tuple(o) for o in options)  # pairs read back from JSON are lists
        object.__setattr__(self, "mask_options", options)
        names = tuple(name for name, _ in options)
        for mask in self.masks:
            allowed = rc_masks.MASK_OPTIONS.get(mask, ())
            if any(n not in allowed for n in names) or (mask == "random" and sorted(names) != sorted(allowed)):
                takes = "; ".join(f"{m}: {', '.join(o)}" for m, o in rc_masks.MASK_OPTIONS.items())
                raise ValueError(f"mask_options {names} do not fit mask {mask!r}; the options are ({takes}), "
                                 f"the random mask needs both of its own, other masks none")
        for c in self.san_configs():
            c.build_mask(self.n_tokens)

    @property
    def initial_seed(self) -> int:
        """The seed of the initialized weights: ``weight_seed``, else ``seed``."""
        return self.seed if self.weight_seed is None else self.weight_seed

    def san_configs(self) -> tuple[engine.SANConfig, ...]:
        """The engine's configuration axis, in the order of the table."""
        pairs = tuple((m, self.window if m in rc_masks.WINDOWED_MASKS else None) for m in self.masks)
        grid = engine.config_grid(masks=pairs, temperatures=self.temperatures, norms=self.norms, skips=self.skips)
        return tuple(replace(c, mask_options=self.mask_options) for c in grid) if self.mask_options else grid


# ---------------------------------------------------------------- model and text


def _folder_stamp(spec: str, names: tuple[str, ...] | None = None) -> tuple | None:
    """(name, inode, size, mtime) of a local folder's files (only ``names`` when given): what the caches below
    are also keyed by, so a folder whose files change is loaded again; None for a packaged model or a hub id."""
    folder = Path(spec).expanduser()
    if spec.startswith("pkg:") or not folder.is_dir():
        return None
    stamps = []
    for path in folder.iterdir():
        if path.is_file() and (names is None or path.name in names):
            stat = path.stat()
            stamps.append((path.name, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(stamps))


def loaded_model(spec: str):
    """The model and tokenizer of a spec (:func:`rankcollapse.hf.load.load_model`), cached per process."""
    return _loaded_model(spec, _folder_stamp(spec))


@functools.lru_cache(maxsize=2)
def _loaded_model(spec: str, stamp: tuple | None):
    from rankcollapse.hf.load import load_model

    return load_model(spec)


def samples(spec: str, n_samples: int, n_tokens: int, seed: int, overlap: str) -> rc_data.TextSamples:
    """The Wikipedia samples of a sweep, tokenized by the model's tokenizer (cached per process).

    Shapes: ``.input_ids`` [sample, token]; the first k of a larger draw are the draw of k.
    """
    return _samples(spec, n_samples, n_tokens, seed, overlap, _folder_stamp(spec, TOKENIZER_FILES))


@functools.lru_cache(maxsize=4)
def _samples(spec: str, n_samples: int, n_tokens: int, seed: int, overlap: str, stamp: tuple | None):
    return rc_data.sample_token_ids(loaded_model(spec).tokenizer, n_samples, n_tokens, seed, overlap)


def model_identity(spec: str, location: str | None = None) -> dict[str, str | None]:
    """What a result records about its model's files and compares before it is reused, without loading
    weights: a packaged model's installed package (``model_package``); a folder's SHA-256 of its config and
    weight files (``model_files_sha256``) and of its tokenizer files (``tokenizer_sha256``); a hub id's
    cached commit (``model_revision``) and tokenizer files. ``location``: the folder the model was loaded
    from, to hash a packaged model's tokenizer files too (when recording)."""
    from rankcollapse.hf.load import hub_snapshot, packaged_version

    local = Path(spec).expanduser()
    if spec.startswith("pkg:"):
        identity, folder = {"model_package": packaged_version(spec)}, Path(location) if location else None
    elif local.is_dir():
        identity, folder = {"model_files_sha256": files_sha256(folder_files(local)[0])}, local
    else:
        folder = hub_snapshot(spec)
        identity = {"model_revision": None if folder is None else folder.name}
    tokenizer = folder_files(folder)[1] if folder is not None and folder.is_dir() else None
    return {**identity, "tokenizer_sha256": None if tokenizer is None else files_sha256(tokenizer)}


def identity_mismatch(spec: str, provenance: dict) -> str | None:
    """Why a stored result of ``spec`` no longer fits its model's files (:func:`model_identity` against what
    the result recorded), in a few words; None when it fits. A folder's result must have recorded its
    hashes; a packaged model's or hub id's is compared where it recorded the version (results stored before
    these were recorded keep loading), and only while the package is installed or the hub id cached."""
    local = not spec.startswith("pkg:") and Path(spec).expanduser().is_dir()
    for name, now in model_identity(spec).items():
        if now is None or (name not in provenance and not local):
            continue
        if name not in provenance:
            return f"it records no {name} of the folder {spec} (stored before the folder's files were hashed)"
        if provenance[name] != now:
            what = {"model_package": "the installed model package", "model_revision": "the cached hub revision",
                    "model_files_sha256": "the folder's config or weight files",
                    "tokenizer_sha256": "the tokenizer files"}[name]
            short = (lambda v: f"{str(v)[:16]}...") if name.endswith("sha256") else str
            return f"{what} changed since it was computed ({name} {short(provenance[name])} -> {short(now)})"
    return None


def weight_hash(model: torch.nn.Module) -> str:
    """sha256 of every parameter tensor in name order (names, shapes and float32 bytes)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name}{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def layer_shapes(config: ExperimentConfig, model_config) -> dict[str, tuple[int, SimpleNamespace]]:
    """Each weight source's depth and layer shape (``d_model``, ``n_heads``, ``d_head``), from the model's
    Hugging Face config alone: what a sweep's memory check needs before any layer is built."""
    d, heads = int(model_config.hidden_size), int(model_config.num_attention_heads)
    own = int(getattr(model_config, "head_dim", None) or d // heads)
    shapes = {}
    for kind in config.weights:
        pretrained = kind == "pretrained"
        depth = min(config.n_layers, int(model_config.num_hidden_layers)) if pretrained else config.n_layers
        shapes[kind] = (depth, SimpleNamespace(d_model=d, n_heads=heads, d_head=own if pretrained else d // heads))
    return shapes


def initialized_model(model: torch.nn.Module, n_layers: int, seed: int) -> torch.nn.Module:
    """A freshly initialized copy of the architecture with ``n_layers`` layers (HF's own init; a config's
    per-layer ``layer_types`` cut to those layers), from a forked, seeded RNG (the global RNG state is restored)."""
    from transformers import AutoModel

    own = model.config.to_dict()
    per_layer = {"layer_types": own["layer_types"][:n_layers]} if own.get("layer_types") else {}
    config = model.config.__class__.from_dict({**own, "num_hidden_layers": n_layers, **per_layer})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = AutoModel.from_config(config, attn_implementation="eager")
    return fresh.eval()


# ---------------------------------------------------------------- sweep and summary


def check_finite(metrics: dict[str, torch.Tensor], labels: list[dict], dtype: str) -> None:
    """One ValueError when a unit's metrics hold inf or NaN: its hidden states overflowed (e.g. pretrained
    SmolLM2 without any norm grows about 15x a layer and leaves float32's range after 17 layers). The
    message names the first such configuration and layer and, for float32, the dtype that holds them.

    Shapes: metrics each [layer + 1, config, sample]; labels one dict per config.
    """
    for name, values in metrics.items():
        bad = ~torch.isfinite(values)
        if bad.any():
            layer, config, _ = (int(i) for i in bad.nonzero()[0])
            what = ", ".join(f"{k} {v}" for k, v in labels[config].items() if v is not None)
            advice = "; run it with -p dtype float64" if dtype == "float32" else ""
            raise ValueError(f"{what}: {name} is not finite from layer {layer} on (the hidden states overflowed "
                             f"in {dtype}){advice}")


def summarize(metrics: dict[str, torch.Tensor], labels: list[dict], n_tokens: int, d_model: int) -> pd.DataFrame:
    """Sample statistics of every metric, tidy.

    Shapes: each metrics[name] [layer + 1, config, sample]; labels has one dict per config.
    """
    values = {k: metrics[k] for k in TABLE_METRICS if k in metrics}
    if "numerical_rank" in metrics:
        values["full_rank"] = (metrics["numerical_rank"] == min(n_tokens, d_model)).to(torch.float64)
    n_layers1, n_configs, n_samples = metrics["mu"].shape  # [layer + 1, config, sample]
    frames = []
    for name in (k for k in TABLE_METRICS if k in values):
        x = values[name].to(torch.float64).numpy()  # [layer + 1, config, sample]
        q10, median, q90 = np.quantile(x, [0.1, 0.5, 0.9], axis=-1)  # each [layer + 1, config]
        stats = {"mean": x.mean(-1), "std": x.std(-1), "median": median, "q10": q10, "q90": q90,
                 "min": x.min(-1), "max": x.max(-1)}  # each [layer + 1, config]
        layer, config = np.meshgrid(np.arange(n_layers1), np.arange(n_configs), indexing="ij")
        frame = pd.DataFrame({"layer": layer.ravel(), "config": config.ravel(), "metric": name,
                              **{k: v.ravel() for k, v in stats.items()}})
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    label_frame = pd.DataFrame(labels).reset_index(names="config")
    table = label_frame.merge(table, on="config").drop(columns="config")
    table["n_samples"] = n_samples
    return table


def config_labels(configs: tuple[engine.SANConfig, ...], weights: str) -> list[dict]:
    return [{"weights": weights, "variant": "SAN", "mask": c.mask, "window": c.window,
             "temperature": c.temperature, "norm": c.norm, "skip": c.skip} for c in configs]


def value(table: pd.DataFrame, metric: str, *, layer: int | str = "last", stat: str = "mean", **labels) -> float:
    """One number of a tidy table: ``stat`` of ``metric`` at ``layer`` (an integer or ``"last"``, the
    configuration's deepest layer) for the one configuration matching ``labels`` (column=value).

    Shapes: ``table`` is a tidy experiments table (:func:`rankcollapse.experiments.config.summarize`).
    """
    rows = _rows(table, metric, labels)
    rows = rows[rows["layer"] == (rows["layer"].max() if layer == "last" else layer)]
    if len(rows) != 1:
        raise ValueError(f"{len(rows)} rows of {metric!r} at layer {layer} match {labels}; name one configuration")
    return float(rows[stat].iloc[0])


def held_from(table: pd.DataFrame, **labels) -> int | None:
    """The first layer a sweep did not compute for the configurations matching ``labels`` because they had
    settled on their rounding floor (metric ``engine.SETTLED_METRIC`` above 0: some samples held, their last
    computed values repeated); None where every layer was computed (or the sweep never stops).

    Shapes: ``table`` is a tidy experiments table.
    """
    rows = _rows(table, engine.SETTLED_METRIC, labels)
    held = rows.loc[rows["mean"] > 0, "layer"]
    return int(held.min()) if len(held) else None


def _rows(table: pd.DataFrame, metric: str, labels: dict) -> pd.DataFrame:
    """The rows of ``metric`` whose columns equal ``labels`` (column=value)."""
    rows = table[table["metric"] == metric]
    for column, wanted in labels.items():
        rows = rows[rows[column] == wanted]
    return rows


TABLE_COLUMNS = ("weights", "variant", "mask", "window", "temperature", "norm", "skip", "layer", "metric",
                 *STATISTICS, "n_samples")


def check_table(table: pd.DataFrame, parameters: dict) -> None:
    """Raise ValueError unless a stored table has the tidy columns and exactly the configurations
    (weights, variant, mask, temperature, norm, skip) and sample counts its stored ``parameters`` ask for.

    Shapes: ``table`` is a tidy experiments table; ``parameters`` the stored (canonical) parameters.
    """
    if tuple(table.columns) != TABLE_COLUMNS:
        raise ValueError(f"its columns are {', '.join(map(str, table.columns))}; expected {', '.join(TABLE_COLUMNS)}")
    p = parameters
    expected = {(w, "SAN", m, t, n, s) for w in p["weights"] for m in p["masks"] for t in p["temperatures"]
                for n in p["norms"] for s in p["skips"]}
    if p["full_transformer"]:
        expected |= {(w, "full transformer", "model", None, "model", True) for w in p["weights"]}
    present = {(w, v, m, None if pd.isna(t) else float(t), n, str(s) == "True")
               for w, v, m, t, n, s in table[["weights", "variant", "mask", "temperature", "norm", "skip"]].itertuples(index=False)}
    if present != expected:
        missing, extra = sorted(map(str, expected - present)), sorted(map(str, present - expected))
        raise ValueError(f"{len(missing)} configurations missing{(' (first: ' + missing[0] + ')') if missing else ''}, "
                         f"{len(extra)} not asked for{(' (first: ' + extra[0] + ')') if extra else ''}")
    if set(table["n_samples"]) != {p["n_samples"]}:
        raise ValueError(f"sample counts {sorted(set(table['n_samples']))}, expected {p['n_samples']}")


@dataclass(frozen=True)
class Run:
    """One sweep a page computes, and the page it is stored under when that is another page's (a page
    showing another page's sweeps, e.g. the pretrained panels and the sample-size page show Fig. 2's)."""

    config: ExperimentConfig  # the sweep
    page: str | None = None  # stored under this page's results; None: the computing page's own


def stored_parameters(config: ExperimentConfig) -> dict:
    """The parameters a sweep is stored under: every field, ``mask_options`` only when set, ``model_windows``
    only when False, ``attention_stats`` only when True and ``weight_seed`` only when given (so results stored
    before those fields existed keep their keys)."""
    parameters = asdict(config)
    if not config.attention_stats:
        del parameters["attention_stats"]
    if not config.mask_options:
        del parameters["mask_options"]
    if config.model_windows:
        del parameters["model_windows"]
    if config.weight_seed is None:
        del parameters["weight_seed"]
    return parameters


def experiment_config(parameters: dict, **fixed) -> ExperimentConfig:
    """A page's sweep: its fixed choices, then the reader's parameters (lists become tuples).

    One ValueError for a parameter that is not a field of :class:`ExperimentConfig`, out of range, or
    ``n_tokens`` beyond the model's maximum sequence length.
    """
    unknown = sorted(set(parameters) - set(ExperimentConfig.__dataclass_fields__))
    if unknown:
        raise ValueError(f"unknown experiment parameter(s) {', '.join(unknown)}; "
                         f"allowed: {', '.join(ExperimentConfig.__dataclass_fields__)}")
    values = {**fixed, **{k: tuple(v) if isinstance(v, list) else v for k, v in parameters.items()}}
    config = ExperimentConfig(**values)
    from rankcollapse.hf.load import check_n_tokens

    check_n_tokens(config.model, config.n_tokens)  # reads the model's config only, before anything runs
    return config
