"""One function per experiment page: parameters -> a tidy table of per-layer sample statistics.

Every page of the Experiments part calls exactly one function here (``fig2``, ``fig3``, ``fig4``,
``appendix_g1``; the author-response pages call :mod:`rankcollapse.experiments_response`). Each builds an
:class:`ExperimentConfig`, then loads the stored result with exactly these parameters from the results
store (:mod:`rankcollapse.results`) or computes and stores it.

Protocol (Dong et al.'s, with our [recon] choices as parameters): real Wikipedia text cut to exactly
``n_tokens`` tokens by the pretrained model's tokenizer; X(0) = that model's own embedding output
(shared by *initialized* and *pretrained* runs, so only the attention weights differ); *pretrained* =
the model's attention sublayers (its own depth, never cycled); *initialized* = fresh layers of the
same sizes, PyTorch's nn.Linear default U(-1/sqrt(d), 1/sqrt(d)) (the authors' response), seeded. The
optional *full transformer* reference is the Hugging Face forward (hooks), pretrained or freshly
initialized by Hugging Face (N(0, 0.02)).

The table is tidy: one row per weights x configuration x layer x metric, columns ``mean, std, median,
q10, q90, min, max`` over samples; the metric ``full_rank`` is 1 for a sample at full numerical rank,
so its mean is the fraction at full rank.

Used by: book/experiments/*.md, book/response/*.md, ``rankcollapse run`` (parameter checks).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import torch

from rankcollapse import data as rc_data
from rankcollapse import masks as rc_masks
from rankcollapse import metrics as rc_metrics
from rankcollapse import san
from rankcollapse.checks import check_choice, check_choices, check_int, check_temperature
from rankcollapse.norms import NORM_NAMES
from rankcollapse.results import ResultStore, StoredResult

PAPER_MASKS = ("complete", "causal", "sliding_window", "causal_sliding_window")
WINDOWED_MASKS = ("sliding_window", "causal_sliding_window", "strided", "dilated_window", "global_window")
WEIGHT_SOURCES = ("initialized", "pretrained")  # where the attention weights come from
STATISTICS = ("mean", "std", "median", "q10", "q90", "min", "max")
TABLE_METRICS = ("mu", "relative_mu", "norm", "floor", "numerical_rank", "full_rank", "sigma_min", "mean_abs_cosine")
PAPER_SCALE = {"n_samples": 3000, "n_tokens": 128}  # the authors' response: 3000 samples of 128 tokens
MAX_SAMPLES = 5000  # the packaged Wikipedia leads give a few thousand samples of 128 tokens


@dataclass(frozen=True)
class ExperimentConfig:
    """One sweep: weights x masks x temperatures x norms x skips, all on the same X(0)."""

    model: str = "pkg:minilm"  # spec of the pretrained model (rankcollapse.models); gives tokenizer, X(0), sizes
    weights: tuple[str, ...] = WEIGHT_SOURCES  # which attention weights: "initialized" and/or "pretrained"
    masks: tuple[str, ...] = PAPER_MASKS  # mask names from rankcollapse.masks.MASK_NAMES
    window: int = 4  # window of the windowed masks (half-width bi-directional, size uni-directional) [recon]
    temperatures: tuple[float | None, ...] = (None,)  # d_QK values; None = the layer's own 1/sqrt(d_head)
    norms: tuple[str, ...] = ("none",)  # names from rankcollapse.norms.NORM_NAMES
    skips: tuple[bool, ...] = (False,)  # with / without the skip connection
    n_layers: int = 12  # depth of initialized stacks; pretrained stacks use min(n_layers, model depth)
    n_samples: int = 16  # Wikipedia samples
    n_tokens: int = 32  # tokens per sample (exactly)
    seed: int = 0  # selects the samples and the initialized weights
    overlap: str = "disjoint"  # how samples are cut from the leads (rankcollapse.data.OVERLAP_NAMES)
    init: str = "torch"  # initialized weights: "torch" (U(+-1/sqrt(d)), the response) or "hf" (N(0, 0.02))
    dtype: str = "float64"  # dtype of the hidden states: "float64" or "float32"
    device: str = "cpu"  # "cpu" or "cuda"
    full_transformer: bool = False  # add the Hugging Face forward of the whole model as a reference
    geometry: bool = False  # also rank, sigma_min and mean |cos| (one SVD per layer); else mu, norm, floor only

    def __post_init__(self) -> None:
        check_choices("weights", self.weights, WEIGHT_SOURCES)
        check_choices("masks", self.masks, rc_masks.MASK_NAMES)
        check_choices("norms", self.norms, NORM_NAMES)
        check_choices("skips", self.skips, (False, True))
        if not isinstance(self.temperatures, tuple) or not self.temperatures:
            raise ValueError(f"temperatures must be a non-empty tuple of numbers > 0 or None, got {self.temperatures!r}")
        for t in self.temperatures:
            check_temperature("temperatures", t, allow_none=True)
        check_int("n_tokens", self.n_tokens, 2, 512)
        check_int("n_samples", self.n_samples, 1, MAX_SAMPLES)
        check_int("n_layers", self.n_layers, 1, 4096)
        check_int("seed", self.seed, 0, 2**31 - 1)
        if any(m in WINDOWED_MASKS for m in self.masks):
            check_int("window", self.window, 1, self.n_tokens - 1)
        check_choice("overlap", self.overlap, rc_data.OVERLAP_NAMES)
        check_choice("init", self.init, san.INIT_NAMES)
        check_choice("dtype", self.dtype, tuple(rc_metrics.DTYPES))
        if self.device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"model must be a model spec such as 'pkg:minilm', got {self.model!r}")

    def san_configs(self) -> tuple[san.SANConfig, ...]:
        """The engine's configuration axis, in the order of the table."""
        pairs = tuple((m, self.window if m in WINDOWED_MASKS else None) for m in self.masks)
        return san.config_grid(masks=pairs, temperatures=self.temperatures, norms=self.norms, skips=self.skips)


# ---------------------------------------------------------------- model and text


@functools.lru_cache(maxsize=2)
def _loaded(spec: str):
    from rankcollapse.models import load_model

    return load_model(spec)


@functools.lru_cache(maxsize=4)
def samples(spec: str, n_samples: int, n_tokens: int, seed: int, overlap: str) -> rc_data.TextSamples:
    """The Wikipedia samples of a sweep, tokenized by the model's tokenizer (cached per process).

    Shapes: ``.input_ids`` [sample, token]; the first k of a larger draw are the draw of k.
    """
    return rc_data.sample_token_ids(_loaded(spec).tokenizer, n_samples, n_tokens, seed, overlap)


def weight_hash(model: torch.nn.Module) -> str:
    """sha256 of every parameter tensor in name order (names, shapes and float32 bytes)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name}{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def _initialized_model(model: torch.nn.Module, n_layers: int, seed: int) -> torch.nn.Module:
    """A freshly initialized copy of the architecture with ``n_layers`` layers (HF's own init), from a
    forked, seeded RNG (the global RNG state is restored)."""
    from transformers import AutoModel

    config = model.config.__class__.from_dict({**model.config.to_dict(), "num_hidden_layers": n_layers})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = AutoModel.from_config(config, attn_implementation="eager")
    return fresh.eval()


# ---------------------------------------------------------------- sweep and summary


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


def _labels(configs: tuple[san.SANConfig, ...], weights: str) -> list[dict]:
    return [{"weights": weights, "variant": "SAN", "mask": c.mask, "window": c.window,
             "temperature": c.temperature, "norm": c.norm, "skip": c.skip} for c in configs]


def run_sweep(config: ExperimentConfig, subsets: tuple[int, ...] = ()) -> tuple[pd.DataFrame, dict] | None:
    """Compute the sweep: the tidy table and the provenance the store adds to it.

    ``subsets``: also summarize the first k samples for each k (column ``n_samples`` tells them apart).
    The work is cut into units of blocks x configurations (:mod:`rankcollapse.sweep`); under
    ``torch.distributed`` every rank computes its share and rank 0 gets the result (None elsewhere).
    """
    from rankcollapse import sweep

    return sweep.compute(config, subsets)


def run_experiment(page: str, config: ExperimentConfig, store: ResultStore | None = None,
                   subsets: tuple[int, ...] = ()) -> StoredResult:
    """The stored result of ``page`` for exactly ``config`` (and ``subsets``), computed and stored when
    missing: resumable from its checkpoints, shared over the ranks of a process group
    (:mod:`rankcollapse.sweep`)."""
    from rankcollapse import sweep

    store = store or ResultStore()
    parameters = {**asdict(config), **({"subsets": list(subsets)} if subsets else {})}
    return sweep.stored(page, parameters, store,
                        lambda partial: sweep.compute(config, subsets, label=page, partial=partial))


def _config(overrides: dict, **page_defaults) -> ExperimentConfig:
    """A page's configuration: its fixed choices, then the reader's parameters (lists become tuples)."""
    values = {**page_defaults, **{k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}}
    return ExperimentConfig(**values)


# ---------------------------------------------------------------- pages

FIG2 = dict(norms=("none", "unit", "layernorm"))
FIG3 = dict(temperatures=(1 / 64, 1.0, 64.0), norms=("none",))
FIG4 = dict(masks=("complete",), norms=("none", "unit", "layernorm"), full_transformer=True, geometry=True)
G1 = dict(weights=("initialized",), n_layers=128, n_samples=4)


def fig2(store: ResultStore | None = None, **parameters) -> StoredResult:
    """Fig. 2: mu per layer for the four masks x {pure attention, unit-norm LN, torch LN} x weights."""
    return run_experiment("fig2", _config(parameters, **FIG2), store)


def fig3(store: ResultStore | None = None, **parameters) -> StoredResult:
    """Fig. 3: mu per layer for the four masks x temperatures d_QK in {1/64, 1, 64}, pure attention."""
    return run_experiment("fig3", _config(parameters, **FIG3), store)


def fig4(store: ResultStore | None = None, **parameters) -> StoredResult:
    """Fig. 4: rank, sigma_min and mean |cos| per layer, full transformer and SAN variants."""
    return run_experiment("fig4", _config(parameters, **FIG4), store)


def appendix_g1(store: ResultStore | None = None, **parameters) -> dict[str, StoredResult]:
    """Appendix G.1: 128-layer initialized versions of Figs. 2 and 3 (keys ``"fig2"``, ``"fig3"``)."""
    return {"fig2": run_experiment("appendix_g1", _config(parameters, **G1, **FIG2), store),
            "fig3": run_experiment("appendix_g1", _config(parameters, **G1, **FIG3), store)}


def check_parameters(page: str, parameters: dict) -> None:
    """Raise the config's ValueError for out-of-range page parameters, without computing anything."""
    from rankcollapse import experiments_response as response

    fixed = {"fig2": FIG2, "fig3": FIG3, "fig4": FIG4, "appendix_g1": {**G1, **FIG2},
             **response.PAGE_CHOICES}
    if page not in fixed:
        return
    own = {k: v for k, v in parameters.items() if k in ExperimentConfig.__dataclass_fields__}
    response.check_extra(page, parameters)
    _config(own, **fixed[page])


def scale_note(result: StoredResult) -> str:
    """One sentence a page shows under its figure: scale, model, hardware, time, commit of the result."""
    p = result.provenance
    params = p["parameters"]
    origin = "loaded from the results store" if result.loaded else "computed by this build"
    smaller = params["n_samples"] < PAPER_SCALE["n_samples"] or params["n_tokens"] < PAPER_SCALE["n_tokens"]
    versus = (f", smaller than the paper's {PAPER_SCALE['n_samples']} samples x {PAPER_SCALE['n_tokens']} tokens "
              f"on BERT-base" if smaller else "")
    return (f"Scale of this run: {params['n_samples']} samples x {params['n_tokens']} tokens, "
            f"{params['dtype']}, pretrained model {p['model_description']} (`{params['model']}`, "
            f"depth {p['model_layers']}){versus}; computed on {p['hardware']} ({p['device']}) in {p['wall_time_s']:.0f} s "
            f"at commit {p['git_commit'][:12]}; {origin} (`{result.csv_path.parent.name}/{result.csv_path.name}`).")


def mask_title(mask: str, window: int) -> str:
    """Words for a mask in a panel title."""
    words = {"complete": "complete", "causal": "causal", "sliding_window": f"sliding window, w = {window}",
             "causal_sliding_window": f"uni-directional window, w = {window}", "model": "the model's own mask"}
    return words.get(mask, mask)


def weight_titles(provenance: dict) -> dict[str, str]:
    """Panel-title words naming the weights of each kind, so initialized and pretrained cannot be mixed up."""
    params = provenance["parameters"]
    init = "U(±1/√d)" if params["init"] == "torch" else "N(0, 0.02)"
    return {"initialized": f"initialized: {init}, seed {params['seed']}",
            "pretrained": f"pretrained: {provenance['model_description'].split(' (')[0].split('/')[-1]}"}


def final_layer(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows of ``metric`` at each configuration's last layer."""
    rows = table[table["metric"] == metric]
    last = rows.groupby(["weights", "variant"])["layer"].transform("max")
    return rows[rows["layer"] == last]


def temperature_label(temperature: float | None) -> str:
    """``d_QK = 1/64`` style words for a temperature (NaN or None = the model's own scaling)."""
    if temperature is None or temperature != temperature:
        return "own scaling"
    return f"d_QK = 1/{1 / temperature:.0f}" if temperature < 1 else f"d_QK = {temperature:g}"


SCALE_PARAMETERS = ("model", "n_samples", "n_tokens", "overlap", "device", "dtype")


def largest_stored(result: StoredResult, store: ResultStore | None = None) -> StoredResult:
    """The largest stored result (samples x tokens, then model depth) of the same page and the same
    experiment as ``result`` -- equal in every parameter but SCALE_PARAMETERS -- or ``result`` itself.

    Pages show it beside their own run, so the book displays the largest honest run available.
    """
    store = store or ResultStore()
    page, own = result.provenance["page"], result.provenance["parameters"]
    same = lambda p: {k: v for k, v in p.items() if k not in SCALE_PARAMETERS} == \
        {k: v for k, v in own.items() if k not in SCALE_PARAMETERS}
    size = lambda r: (r["parameters"]["n_samples"] * r["parameters"]["n_tokens"], r.get("model_layers", 0))
    candidates = [r for r in store.entries(page) if same(r["parameters"])]
    best = max(candidates, key=size, default=None)
    if best is None or size(best) <= size(result.provenance):
        return result
    return store.load(page, best["parameters"])
