"""The experiment sweeps' configuration: an :class:`ExperimentConfig`, checked once, and the parameters it is
stored under.

The experiment and author-response pages reach this module through the page registry
(:mod:`rankcollapse.book.registry`, which holds each page's fixed choices; each page's sweep is a
:class:`Run`); :func:`rankcollapse.experiments.sweep.run_experiment` loads the stored result with exactly
these parameters from the results store (:mod:`rankcollapse.experiments.store`) or computes it (in units of
sample blocks, resumable, over the ranks of a process group) and stores it as a tidy table
(:mod:`rankcollapse.experiments.table`).

Protocol (Dong et al.'s, with our [recon] choices as parameters): real Wikipedia text cut to exactly
``n_tokens`` tokens by the pretrained model's tokenizer; X(0) = that model's own embedding output (shared by
*initialized* and *pretrained* runs, so only the attention weights differ); *pretrained* = the model's
attention sublayers (its first ``min(n_layers, model depth)``, never cycled); *initialized* = fresh layers of
the same sizes, PyTorch's nn.Linear default U(-1/sqrt(d), 1/sqrt(d)) (the authors' response), seeded
(``weight_seed``, else ``seed``); *initialized_nobias* = the very same draws with every bias dropped (a
control: the theory's SAN has none). The optional *full transformer* reference is the Hugging Face forward
(hooks), pretrained or freshly initialized by Hugging Face (N(0, 0.02)).

``MAX_SAMPLES`` and ``MAX_TOKENS`` bound a sweep's text samples and their length; the theory pages' random
systems have bounds of their own, under their own names (``rankcollapse.book.pages._common``: ``MAX_DRAWS``
random draws of at most ``MAX_SYSTEM_TOKENS`` tokens), which are not text samples.

Used by: :mod:`rankcollapse.experiments.sweep`, :mod:`rankcollapse.experiments.plan`,
:mod:`rankcollapse.experiments.bundle`, the page registry and the page modules, ``book/cli_listing.py``,
``book/origins.py``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from rankcollapse.experiments import data as rc_data
from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics as rc_metrics
from rankcollapse import engine
from rankcollapse.core.checks import check_choice, check_choices, check_int, check_temperature
from rankcollapse.hf.load import check_model_spec
from rankcollapse.core.norms import NORM_NAMES

# Where the attention weights come from. "initialized_nobias": the very weights of "initialized" (same seed,
# same draws) with every bias dropped -- the theory's SAN X' = A X W_V has none (a control).
WEIGHT_SOURCES = ("initialized", "pretrained", "initialized_nobias")
DEFAULT_WEIGHTS = ("initialized", "pretrained")  # what a sweep runs unless told (results' keys depend on it)
INITIALIZED = ("initialized", "initialized_nobias")  # the freshly initialized weight sources
MAX_SAMPLES = 5000  # text samples of a sweep: the packaged Wikipedia leads give a few thousand of 128 tokens
MAX_TOKENS = 8192  # longest sequence of a sweep (a model's own limit is checked by experiment_config)


@dataclass(frozen=True)
class ExperimentConfig:
    """One sweep: weights x masks x temperatures x norms x skips, all on the same X(0)."""

    # spec of the pretrained model (rankcollapse.hf.load); gives tokenizer, X(0), sizes
    model: str = "pkg:minilm"
    weights: tuple[str, ...] = DEFAULT_WEIGHTS  # which attention weights, names from WEIGHT_SOURCES
    masks: tuple[str, ...] = rc_masks.PAPER_MASKS  # mask names from rankcollapse.core.masks.MASK_NAMES
    window: int = 4  # window of the windowed masks (half-width bi-directional, size uni-directional) [recon]
    # a window family: every windowed mask at each of these windows (``window`` unused); (): ``window`` alone
    windows: tuple[int, ...] = ()
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
    # also rank, sigma_min and mean |cos| (one SVD per layer); else mu, norm, floor only
    geometry: bool = False
    mask_options: tuple[tuple[str, object], ...] = ()  # (keyword, value) pairs of MASK_OPTIONS for every mask
    model_windows: bool = True  # pretrained layers keep the model's own sliding windows (False: drop them)
    # also each layer's decomposition of mu and attention statistics (engine.run_san)
    attention_stats: bool = False
    # seed of the initialized weights; None: ``seed`` (which also selects samples)
    weight_seed: int | None = None
    # a distance-decay bias -m |i - j| on every initialized layer's attention logits, one slope m for every
    # head (ALiBi's bias with a single slope: soft locality, rankcollapse.theory.soft_locality); None: none
    decay_slope: float | None = None

    def __post_init__(self) -> None:
        check_choices("weights", self.weights, WEIGHT_SOURCES)
        check_choices("masks", self.masks, rc_masks.MASK_NAMES)
        check_choices("norms", self.norms, NORM_NAMES)
        check_choices("skips", self.skips, (False, True))
        check_choice("model_windows", self.model_windows, (False, True))
        check_choice("attention_stats", self.attention_stats, (False, True))
        if not isinstance(self.temperatures, tuple) or not self.temperatures:
            raise ValueError(f"temperatures must be a non-empty tuple of numbers > 0 or None, "
                             f"got {self.temperatures!r}")
        for t in self.temperatures:
            check_temperature("temperatures", t, allow_none=True)
        check_int("n_tokens", self.n_tokens, 2, MAX_TOKENS)
        check_int("n_samples", self.n_samples, 1, MAX_SAMPLES)
        check_int("n_layers", self.n_layers, 1, 4096)
        check_int("seed", self.seed, 0, 2**31 - 1)
        if self.weight_seed is not None:
            check_int("weight_seed", self.weight_seed, 0, 2**31 - 1)
        if self.decay_slope is not None:
            self._check_decay()
        if self.full_transformer and "initialized_nobias" in self.weights:
            raise ValueError("weights 'initialized_nobias' has no full transformer (Hugging Face's own "
                             "init); run it with full_transformer False")
        if not isinstance(self.windows, tuple):
            raise ValueError(f"windows must be a tuple of window sizes, got {self.windows!r}")
        if any(m in rc_masks.WINDOWED_MASKS for m in self.masks):
            for window in self.windows or (self.window,):
                check_int("windows" if self.windows else "window", window, 1, self.n_tokens - 1)
            if len(set(self.windows)) != len(self.windows):
                raise ValueError(f"windows must not repeat a window, got {self.windows!r}")
        check_choice("overlap", self.overlap, rc_data.CUT_NAMES)
        check_choice("init", self.init, engine.INIT_NAMES)
        check_choice("dtype", self.dtype, tuple(rc_metrics.DTYPES))
        if self.device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        check_model_spec(self.model)
        self._check_mask_options()

    def _check_decay(self) -> None:
        """A decay slope is a finite number >= 0, on initialized layers only (a pretrained model has its own
        position bias or none)."""
        m = self.decay_slope
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m < 0:
            raise ValueError(f"decay_slope must be a finite number >= 0 or None, got {m!r}")
        if any(w not in INITIALIZED for w in self.weights) or self.full_transformer:
            raise ValueError(f"decay_slope applies to initialized layers only: weights must be among "
                             f"{', '.join(INITIALIZED)} and full_transformer False, got weights "
                             f"{self.weights!r}")

    def _check_mask_options(self) -> None:
        """Every option is taken by every mask (the random mask needs density and seed); values checked by
        building each mask once at ``n_tokens``."""
        options = self.mask_options
        if not isinstance(options, tuple) \
                or any(not isinstance(o, (tuple, list)) or len(o) != 2 for o in options):
            raise ValueError(f"mask_options must be a tuple of (keyword, value) pairs, got {options!r}")
        options = tuple(tuple(o) for o in options)  # pairs read back from JSON are lists
        object.__setattr__(self, "mask_options", options)
        names = tuple(name for name, _ in options)
        for mask in self.masks:
            allowed = rc_masks.MASK_OPTIONS.get(mask, ())
            if any(n not in allowed for n in names) \
                    or (mask == "random" and sorted(names) != sorted(allowed)):
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
        windows = self.windows or (self.window,)
        pairs = tuple((m, w) for m in self.masks
                      for w in (windows if m in rc_masks.WINDOWED_MASKS else (None,)))
        grid = engine.config_grid(masks=pairs, temperatures=self.temperatures, norms=self.norms,
                                  skips=self.skips)
        return tuple(replace(c, mask_options=self.mask_options) for c in grid) if self.mask_options else grid


@dataclass(frozen=True)
class Run:
    """One sweep a page computes, and the page it is stored under when that is another page's (a page
    showing another page's sweeps, e.g. the pretrained panels and the sample-size page show Fig. 2's)."""

    config: ExperimentConfig  # the sweep
    page: str | None = None  # stored under this page's results; None: the computing page's own


def stored_parameters(config: ExperimentConfig) -> dict:
    """The parameters a sweep is stored under: every field, ``mask_options`` and ``windows`` only when set,
    ``model_windows`` only when False, ``attention_stats`` only when True, ``weight_seed`` and
    ``decay_slope`` only when given (so results stored before those fields existed keep their keys)."""
    parameters = asdict(config)
    if not config.windows:
        del parameters["windows"]
    if not config.attention_stats:
        del parameters["attention_stats"]
    if not config.mask_options:
        del parameters["mask_options"]
    if config.model_windows:
        del parameters["model_windows"]
    if config.weight_seed is None:
        del parameters["weight_seed"]
    if config.decay_slope is None:
        del parameters["decay_slope"]
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
