"""The registry of the book's pages: the one place that knows every page, its fixed choices and profiles.

Each :class:`Page` names its Jupytext source, how its parameters are checked (``configure``: the page's
parameters -> the validated configuration(s) it computes, raising one ValueError on bad input), how it is
computed (``compute``), its fixed choices (the settings a page is *about*, e.g. Fig. 3's masks) and its
profiles (``paper``: the paper's scale). The page's defaults are its ``parameters`` cell (read by
:func:`rankcollapse.book.runner.page_parameters`), so a default lives in one place; types are checked against
those defaults, ranges by the configuration dataclasses (each parameter validated once, in its config).

The CLI (``rankcollapse run``), the notebook tests, the reproduce page and ``results/run_paper_scale.sh``
read this registry. Adding a page is one entry here plus its ``.md``.

Used by: every experiment and response page (``pages.compute``), :mod:`rankcollapse.book.cli`,
:mod:`rankcollapse.book.report`, tests/unit/test_pages.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from rankcollapse.book.pages import rmsnorm_decoders as decoders
from rankcollapse.experiments import config as experiments
from rankcollapse.book.pages import mask_design
from rankcollapse.book.pages import setup as setup_pages
from rankcollapse.experiments import sweep
from rankcollapse.book.pages import theorems as theory
from rankcollapse.book.pages import layernorm as theory_layernorm
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import Run

PROFILE_NAMES = ("default", "paper")
# The authors' response: 3000 samples of 128 tokens on a BERT-base-sized model (ours: MPNet, 12 x 768).
PAPER_SCALE = {"model": "pkg:mpnet", "n_samples": 3000, "n_tokens": 128, "overlap": "sentence_starts"}
PAGE_ONLY = ("show_largest_stored",)  # parameters a page uses for display only, never for computing


@dataclass(frozen=True)
class Page:
    """One book page."""

    name: str  # CLI name, results folder and label stem (``sec-<name>``)
    source: str  # the Jupytext page, relative to the book root
    title: str  # a few words for lists (reproduce page, CLI help)
    configure: Callable[[dict], Mapping[str, object]] | None = None  # parameters -> {part: config}; ValueError on bad input
    compute: Callable[[str, Mapping[str, object]], Mapping[str, object]] | None = None  # (page, configs) -> {part: result}
    fixed: Mapping[str, object] = field(default_factory=dict)  # choices the page is about (not reader parameters)
    profiles: Mapping[str, Mapping[str, object]] = field(default_factory=dict)  # profile -> parameters over defaults

    def path(self, root: Path) -> Path:
        """The page's file under the book root."""
        return root / self.source


def _experiment(fixed: dict, **extra_fixed) -> Callable[[dict], dict[str, Run]]:
    """``configure`` of a one-sweep experiment page: the page's fixed choices, then the reader's parameters."""
    def configure(parameters: dict) -> dict[str, Run]:
        own = {k: v for k, v in parameters.items() if k not in PAGE_ONLY}
        return {"main": Run(experiments.experiment_config(own, **fixed, **extra_fixed))}
    return configure


def _own_config(config_class: type) -> Callable[[dict], dict[str, object]]:
    """``configure`` of a page that computes in its own module: its config dataclass checks every parameter."""
    def configure(parameters: dict) -> dict[str, object]:
        return {"main": config_class(**parameters)}
    return configure


def _fig2_and_fig3(stored_as_figures: bool = False, **shared) -> Callable[[dict], dict[str, Run]]:
    """``configure`` of a page showing the Fig. 2 and Fig. 3 sweeps of the same parameters (the
    ``temperatures`` parameter belongs to the Fig. 3 sweep only); ``stored_as_figures``: the very sweeps of
    the Fig. 2 and Fig. 3 pages, stored as theirs."""
    def configure(parameters: dict) -> dict[str, Run]:
        own = {k: v for k, v in parameters.items() if k not in PAGE_ONLY}
        temperatures = {"temperatures": own.pop("temperatures")} if "temperatures" in own else {}
        return {"fig2": Run(experiments.experiment_config(own, **shared, **FIG2), "fig2" if stored_as_figures else None),
                "fig3": Run(experiments.experiment_config({**own, **temperatures}, **shared, **FIG3),
                            "fig3" if stored_as_figures else None)}
    return configure


def _sample_size(parameters: dict) -> dict[str, Run]:
    """Fig. 2's sweep on the first ``n_samples_small`` samples and on all ``n_samples`` (the first k samples
    of a larger draw are the draw of k, so the small sample is part of the large one), stored as Fig. 2's."""
    own = {k: v for k, v in parameters.items() if k not in (*PAGE_ONLY, "n_samples_small")}
    large = experiments.experiment_config(own, **FIG2)
    small = parameters.get("n_samples_small", 32)
    check_int("n_samples_small", small, 1, large.n_samples - 1)
    return {"large": Run(large, "fig2"), "small": Run(replace(large, n_samples=small), "fig2")}


def _skip_connections(parameters: dict) -> dict[str, Run]:
    """Shallow (both weight sources, ``n_layers``) and deep (initialized only, ``n_layers_deep``) sweeps."""
    own = {k: v for k, v in parameters.items() if k not in (*PAGE_ONLY, "n_layers_deep")}
    deep = {k: v for k, v in own.items() if k not in ("n_layers", "weights")}
    n_layers_deep = parameters.get("n_layers_deep", 128)
    check_int("n_layers_deep", n_layers_deep, 1, 4096)
    return {"shallow": Run(experiments.experiment_config(own, **SKIP)),
            "deep": Run(experiments.experiment_config({**deep, "n_layers": n_layers_deep},
                                                      **SKIP, weights=("initialized",)))}


def _large_models(parameters: dict) -> dict[str, dict]:
    """The large-models page's tiny check: sequences and the batch size of the hook metrics."""
    check_int("n_sequences", parameters.get("n_sequences"), 1, 4096)
    check_int("batch_size", parameters.get("batch_size"), 1, parameters["n_sequences"])
    return {"main": dict(parameters)}


def _run_all(page: str, runs: Mapping[str, Run]) -> dict[str, experiments.StoredResult]:
    """Every sweep of a page, stored under the page's name or the page the run names."""
    return {part: sweep.run_experiment(run.page or page, run.config) for part, run in runs.items()}


# The pages' fixed choices (reconstructions named in PAPER.md §3 are parameters, not fixed here).
# "model": each layer's own norm — the trained γ, β of a pretrained model (Dong et al.'s SAN + LN), and
# LayerNorm without affine (γ = 1, β = 0) for freshly initialized layers, as a fresh model has it.
FIG2 = dict(norms=("none", "unit", "model"))
FIG3 = dict(norms=("none",))
FIG4 = dict(norms=("none", "unit", "model"), full_transformer=True, geometry=True)
SKIP = dict(norms=("none", "model"), skips=(False, True), full_transformer=True)
G1 = dict(weights=("initialized",))

_PAPER = {"paper": PAPER_SCALE}
WINDOW_PAPER_SAMPLES = 900  # the corpus holds about 1000 concatenated runs of 1024 Gemma tokens, not 3000
_E = dict(compute=_run_all)
PAGES: dict[str, Page] = {p.name: p for p in (
    Page("setup", "book/setup.md", "Setup: masks as graphs, radius, μ", _own_config(setup_pages.SetupConfig)),
    Page("data", "book/data.md", "The text samples", _own_config(setup_pages.DataConfig)),
    Page("theorem1", "book/theory/theorem1.md", "Theorem 1: pure masked attention collapses",
         _own_config(theory.Theorem1Config)),
    Page("theorem2", "book/theory/theorem2.md", "Theorem 2: LayerNorm with orthogonal values still collapses",
         _own_config(theory.Theorem2Config)),
    Page("counterexample", "book/theory/counterexample.md", "Fig. 1: the counterexample",
         _own_config(theory_layernorm.CounterexampleConfig)),
    Page("equilibria", "book/theory/equilibria.md", "Equilibria of every rank",
         _own_config(theory_layernorm.EquilibriaConfig)),
    Page("fig2", "book/experiments/fig2.md", "Fig. 2: masks and LayerNorm", _experiment(FIG2), fixed=FIG2,
         profiles=_PAPER, **_E),
    Page("fig3", "book/experiments/fig3.md", "Fig. 3: temperature", _experiment(FIG3), fixed=FIG3,
         profiles=_PAPER, **_E),
    Page("fig4", "book/experiments/fig4.md", "Fig. 4: token geometry", _experiment(FIG4), fixed=FIG4,
         profiles=_PAPER, **_E),
    Page("appendix_g1", "book/experiments/appendix_g1.md", "Appendix G.1: 128 layers",
         _fig2_and_fig3(**G1), fixed={**G1, "fig2": FIG2, "fig3": FIG3},
         profiles={"paper": {**PAPER_SCALE, "n_layers": 128}}, **_E),
    Page("sample_size", "book/response/sample_size.md", "Response: 32 vs 3000 samples", _sample_size,
         fixed=FIG2, profiles={"paper": {**PAPER_SCALE, "n_samples_small": 32}}, **_E),
    Page("skip_connections", "book/response/skip_connections.md", "Response: skip connections",
         _skip_connections, fixed=SKIP, profiles={"paper": {**PAPER_SCALE, "n_layers_deep": 128}}, **_E),
    Page("pretrained_panels", "book/response/pretrained_panels.md", "Response: corrected pretrained panels",
         _fig2_and_fig3(stored_as_figures=True), fixed={"fig2": FIG2, "fig3": FIG3}, profiles=_PAPER, **_E),
    Page("mask_design", "book/beyond/mask_design.md", "Beyond: mask design", mask_design.configure,
         fixed={"masks": tuple(z.part for z in mask_design.ZOO), "norms": ("none",)}, profiles=_PAPER, **_E),
    Page("rmsnorm_decoders", "book/beyond/rmsnorm_decoders.md", "Beyond: RMSNorm decoders (SmolLM2)",
         decoders.configure, fixed={"masks": ("causal", "causal_sliding_window"), **decoders.FIXED},
         profiles={"paper": {**PAPER_SCALE, "model": "pkg:smollm2"}}, **_E),
    Page("sliding_window_model", "book/beyond/sliding_window_model.md", "Beyond: a real sliding-window model (Gemma-3)",
         decoders.window_configure, fixed={"parts": decoders.WINDOW_PARTS, **decoders.WINDOW_FIXED},
         profiles={"paper": {"n_samples": WINDOW_PAPER_SAMPLES, "n_tokens": 1024}}, **_E),
    Page("large_models", "book/beyond/large_models.md", "Beyond: models larger than one GPU", _large_models),
)}
EXPERIMENT_PAGES = tuple(name for name, page in PAGES.items() if page.compute is _run_all)


def page(name: str) -> Page:
    """The registry entry of ``name``; one ValueError listing the pages otherwise."""
    if name not in PAGES:
        raise ValueError(f"unknown page {name!r}; pages are: {', '.join(PAGES)}")
    return PAGES[name]


def profile_parameters(name: str, profile: str) -> dict[str, object]:
    """The parameters ``profile`` sets on page ``name`` (over the page's defaults)."""
    if profile not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {profile!r}; profiles are: {', '.join(PROFILE_NAMES)}")
    return dict(page(name).profiles.get(profile, {}))


def pages_with_profile(profile: str) -> tuple[str, ...]:
    """The pages that ``profile`` changes (for ``paper``: the experiment pages, in book order)."""
    if profile not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {profile!r}; profiles are: {', '.join(PROFILE_NAMES)}")
    return tuple(name for name, entry in PAGES.items() if profile in entry.profiles)


def registry_table() -> list[dict[str, str]]:
    """One row per page, for the reproduce page: name, title and the scale its paper profile sets."""
    def scale(profile: Mapping[str, object]) -> str:
        if not profile:
            return "—"
        words = f"{profile['n_samples']} × {profile['n_tokens']}"
        return words + (f", {profile['n_layers']} layers" if "n_layers" in profile else "")

    return [{"page": e.name, "title": e.title, "paper profile": scale(e.profiles.get("paper", {}))}
            for e in PAGES.values()]


def configure(name: str, parameters: Mapping[str, object]) -> Mapping[str, object]:
    """Validate a page's full parameter set (defaults included) without computing: {part: config}."""
    entry = page(name)
    return entry.configure(dict(parameters)) if entry.configure is not None else {}


def compute(name: str, **parameters) -> dict[str, experiments.StoredResult]:
    """The results page ``name`` shows for ``parameters``: stored ones when they exist, else computed
    and stored (:func:`rankcollapse.experiments.sweep.run_experiment`), by part (``"main"`` for one sweep)."""
    entry = page(name)
    if entry.compute is None:
        raise ValueError(f"page {name!r} computes in its own module, not through the registry")
    return entry.compute(name, configure(name, parameters))

