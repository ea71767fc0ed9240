"""The registry of the book's pages: the one place that knows every page, its module, fixed choices and
profiles.

Each :class:`Page` names its Jupytext source, its module under :mod:`rankcollapse.book.pages` (named as the
page) through that module's functions: how its parameters are checked (``configure``: the page's
parameters -> the validated configuration(s) it computes, raising one ValueError on bad input) and how it is
computed (``compute``: the experiment pages' sweeps, through the results store, or the page module's own
``compute``, timed); its fixed choices (the settings a page is *about*, e.g. Fig. 3's norms, from its
module) and its profiles (``paper``: the paper's scale). The page's defaults are its ``parameters`` cell
(read by :func:`rankcollapse.book.runner.page_parameters`), so a default lives in one place; types are
checked against those defaults, ranges by the configuration dataclasses (each parameter validated once, in
its config).

The CLI (``rankcollapse run``), every computed page (:func:`rankcollapse.book.report.present`), the
notebook tests, the reproduce page and ``results/run_paper_scale.sh`` read this registry; the verdicts page
reads every page's claims through it, without their figures (:func:`claims`, :func:`gather_claims`).
Adding a page is its ``.md``, its module ``book/pages/<page>.py``, one entry here and a line in
``_toc.yml``.

Used by: :mod:`rankcollapse.book.report`, :mod:`rankcollapse.book.cli`, book/reproduce.md,
tests/unit/test_pages.py.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

from rankcollapse.book.pages import (appendix_g1, counterexample, data, equilibria, fig2, fig3, fig4,
                                     large_models, mask_design, pretrained_panels, reviewers,
                                     rmsnorm_decoders, sample_size, setup, skip_connections,
                                     sliding_window_model, soft_locality, theorem1, theorem2, theory_san,
                                     verdicts)
from rankcollapse.book.pages._claims_records import recorded_claims
from rankcollapse.book.pages._common import run_all
from rankcollapse.book.pages.verdicts import PageClaims
from rankcollapse.book.pages._reviewers_theory import compute as compute_reviewers
from rankcollapse.book.shown import PAPER_SCALE, Shown, anchor
from rankcollapse.book.shown import largest_stored as shown_largest
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import ResultStore, StoredResult
from rankcollapse.verdicts.claims import Claim

PROFILE_NAMES = ("default", "paper")


# a page's computation: (page, configs, parameters) -> {part: result}
Compute = Callable[[str, Mapping[str, object], Mapping[str, object]], dict[str, object]]


@dataclass(frozen=True)
class Page:
    """One book page."""

    name: str  # CLI name, results folder and label stem (``sec-<name>``)
    source: str  # the Jupytext page, relative to the book root
    title: str  # a few words for lists (reproduce page, CLI help)
    # parameters -> {part: config}; ValueError on bad input
    configure: Callable[[dict], Mapping[str, object]] | None = None
    # (page, configs, parameters) -> {part: result}
    compute: Compute | None = None
    # choices the page is about (not reader parameters)
    fixed: Mapping[str, object] = field(default_factory=dict)
    # profile -> parameters over defaults
    profiles: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    # parts on their own sample count are shown at the largest one stored (report)
    grows_own_counts: bool = False
    # parameters -> {part: Run}: sweeps the page stores beside its configure parts (the page computes them)
    extra_runs: Callable[[dict], Mapping[str, object]] | None = None

    def path(self, root: Path) -> Path:
        """The page's file under the book root."""
        return root / self.source


class Computed(NamedTuple):
    """What a page that computes in its own module shows: its checked config, its result and the wall
    seconds the computation took in this build (for its re-run block)."""

    config: object
    result: object
    seconds: float


def _in_module(function: Callable[[object], object]) -> Compute:
    """``compute`` of a page that computes in its own module: ``function(config)`` per part, timed."""
    def compute(page: str, configs: Mapping[str, object],
                parameters: Mapping[str, object]) -> dict[str, Computed]:
        computed = {}
        for part, config in configs.items():
            started = time.perf_counter()
            result = function(config)
            computed[part] = Computed(config, result, time.perf_counter() - started)
        return computed
    return compute


def _in_module_and_runs(function: Callable[[object], object]) -> Compute:
    """``compute`` of a page that computes in its own module and also reads sweeps: its :class:`Run` parts
    through the store (:func:`rankcollapse.book.pages._common.run_all`), the others timed in the module
    (:func:`_in_module`)."""
    def compute(page: str, configs: Mapping[str, object],
                parameters: Mapping[str, object]) -> dict[str, object]:
        runs = {part: c for part, c in configs.items() if isinstance(c, Run)}
        own = {part: c for part, c in configs.items() if not isinstance(c, Run)}
        return {**_in_module(function)(page, own, parameters), **run_all(page, runs, parameters)}
    return compute


_PAPER = {"paper": PAPER_SCALE}
# per weight seed 16 samples (seeds, not samples, dominate the spread of a rate at initialization), on
# MiniLM's sizes (d = 384, 12 heads): 128 float64 layers of 30 configurations x 9 parts are CPU hours at
# BERT-base width, and the theory's statements do not depend on the width
THEORY_SAN_SCALE = {"n_samples": 16, "model": "pkg:minilm", "dtype": "float64"}
WINDOW_PAPER_SAMPLES = 900  # the corpus holds about 1000 concatenated runs of 1024 Gemma tokens, not 3000
_E = dict(compute=run_all)
PAGES: dict[str, Page] = {p.name: p for p in (
    Page("verdicts", "book/verdicts.md", "Verdicts: which claims hold", verdicts.configure,
         _in_module(lambda config: verdicts.compute(config, gather_claims))),  # every page's claims
    Page("setup", "book/setup.md", "Setup: masks as graphs, radius, μ", setup.configure,
         _in_module(setup.compute)),
    Page("data", "book/data.md", "The text samples", data.configure, _in_module(data.compute)),
    Page("theorem1", "book/theory/theorem1.md", "Theorem 1: pure masked attention collapses",
         theorem1.configure, _in_module(theorem1.compute)),
    Page("theorem2", "book/theory/theorem2.md", "Theorem 2: LayerNorm with orthogonal values still collapses",
         theorem2.configure, _in_module(theorem2.compute)),
    Page("counterexample", "book/theory/counterexample.md", "Fig. 1: the counterexample",
         counterexample.configure, _in_module(counterexample.compute)),
    Page("equilibria", "book/theory/equilibria.md", "Equilibria of every rank",
         equilibria.configure, _in_module(equilibria.compute)),
    Page("fig2", "book/experiments/fig2.md", "Fig. 2: masks and LayerNorm", fig2.configure, fixed=fig2.FIXED,
         profiles={"paper": {**PAPER_SCALE, "n_samples_controls": 256}}, grows_own_counts=True, **_E),
    Page("fig3", "book/experiments/fig3.md", "Fig. 3: temperature", fig3.configure, fixed=fig3.FIXED,
         profiles={"paper": {**PAPER_SCALE, "n_samples_seeds": 600}}, grows_own_counts=True, **_E),
    Page("fig4", "book/experiments/fig4.md", "Fig. 4: token geometry", fig4.configure, fixed=fig4.FIXED,
         profiles=_PAPER, **_E),
    Page("appendix_g1", "book/experiments/appendix_g1.md", "Appendix G.1: 128 layers", appendix_g1.configure,
         fixed=appendix_g1.FIXED, profiles={"paper": {**PAPER_SCALE, "n_layers": 128, "n_samples_seeds": 4}},
         grows_own_counts=True, **_E),
    Page("theory_san", "book/experiments/theory_san.md", "The theory's SAN at depth", theory_san.configure,
         fixed=theory_san.FIXED, profiles={"paper": {**PAPER_SCALE, **THEORY_SAN_SCALE}}, **_E),
    Page("sample_size", "book/response/sample_size.md", "Response: 32 vs 3000 samples", sample_size.configure,
         fixed=sample_size.FIXED, profiles={"paper": {**PAPER_SCALE, "n_samples_small": 32}}, **_E),
    Page("skip_connections", "book/response/skip_connections.md", "Response: skip connections",
         skip_connections.configure, fixed=skip_connections.FIXED,
         profiles={"paper": {**PAPER_SCALE, "n_layers_deep": 128, "n_samples_seeds": 16}},
         grows_own_counts=True, **_E),
    Page("pretrained_panels", "book/response/pretrained_panels.md", "Response: corrected pretrained panels",
         pretrained_panels.configure, fixed=pretrained_panels.FIXED, profiles=_PAPER, **_E),
    Page("reviewers", "book/response/reviewers.md", "Response: the reviewers' questions, computed",
         reviewers.configure, _in_module_and_runs(compute_reviewers)),
    Page("mask_design", "book/beyond/mask_design.md", "Beyond: mask design", mask_design.configure,
         fixed=mask_design.FIXED, profiles=_PAPER, extra_runs=mask_design.decomposition_runs, **_E),
    Page("rmsnorm_decoders", "book/beyond/rmsnorm_decoders.md", "Beyond: RMSNorm decoders (SmolLM2)",
         rmsnorm_decoders.configure, fixed=rmsnorm_decoders.FIXED,
         profiles={"paper": {**PAPER_SCALE, "model": "pkg:smollm2", "dtype": "float64",
                             "n_samples_seeds": 16}},
         grows_own_counts=True, **_E),
    Page("sliding_window_model", "book/beyond/sliding_window_model.md",
         "Beyond: a real sliding-window model (Gemma-3)", sliding_window_model.configure,
         fixed=sliding_window_model.FIXED,
         profiles={"paper": {"n_samples": WINDOW_PAPER_SAMPLES, "n_tokens": 1024}}, **_E),
    Page("soft_locality", "book/beyond/soft_locality.md", "Beyond: soft locality (decay biases)",
         soft_locality.configure, fixed=soft_locality.FIXED,
         profiles={"paper": {"n_samples": 16, "n_tokens": 128}}, **_E),  # seeds dominate a rate's spread
    Page("large_models", "book/beyond/large_models.md", "Beyond: models larger than one GPU",
         large_models.configure,
         _in_module(lambda config: large_models.compute(config, runs_at))),  # runs_at: its commands table
)}
EXPERIMENT_PAGES = tuple(name for name, page in PAGES.items() if page.compute is run_all)


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


def stored_runs(name: str, parameters: Mapping[str, object]) -> dict[str, object]:
    """Every sweep a page stores at ``parameters``: its :func:`configure` parts and its ``extra_runs`` (the
    mask-design page's decomposition runs: a group outside configure, which the page computes too)."""
    runs = dict(configure(name, parameters))
    extra = page(name).extra_runs
    if extra is not None:
        runs.update(extra(dict(parameters)))
    return runs


def runs_at(name: str, parameters: Mapping[str, object]) -> Mapping[str, object]:
    """A page's sweeps (:func:`configure`) at its parameters cell's defaults updated by ``parameters``."""
    from rankcollapse.book.runner import page_parameters, repo_root

    return configure(name, {**page_parameters(page(name).path(repo_root())), **parameters})


def compute(name: str, **parameters) -> dict[str, StoredResult | Computed]:
    """What page ``name`` shows for ``parameters``, by part (``"main"`` for one sweep or config): for an
    experiment page its results, stored ones when they exist, else computed and stored
    (:func:`rankcollapse.experiments.sweep.run_experiment`); for a page that computes in its own module,
    its :class:`Computed`."""
    entry = page(name)
    if entry.compute is None:
        raise ValueError(f"page {name!r} computes nothing")
    return entry.compute(name, configure(name, parameters), parameters)



def largest_stored(results: Mapping[str, StoredResult],
                   store: ResultStore | None = None) -> dict[str, StoredResult]:
    """:func:`rankcollapse.book.shown.largest_stored` of ``results``, its parts on their own sample count
    grown where the registry entry of the page that stores them says so (``grows_own_counts``: Fig. 2)."""
    grows = page(anchor(results).provenance["page"]).grows_own_counts
    return shown_largest(results, store, grows)


def shown_results(name: str, parameters: Mapping[str, object]) -> dict[str, StoredResult | Computed]:
    """What page ``name`` shows at ``parameters`` (its parameters cell's names and values): its results
    (:func:`compute`), at the largest stored scale when its ``show_largest_stored`` is true
    (:func:`largest_stored`)."""
    results = compute(name, **parameters)
    if parameters.get("show_largest_stored", False):
        results = largest_stored(results)
    return results


def _module(name: str) -> ModuleType:
    """The module of page ``name`` (under :mod:`rankcollapse.book.pages`, named as the page)."""
    page(name)  # an unknown page: one ValueError naming the pages
    return importlib.import_module(f"rankcollapse.book.pages.{name}")


def show(name: str, results: Mapping[str, object], parameters: Mapping[str, object]) -> Shown:
    """What page ``name`` shows of ``results`` at ``parameters``: its module's ``show``."""
    return _module(name).show(results, parameters)


def states_claims(name: str) -> bool:
    """Whether page ``name`` shows claims tables (its module has ``page_claims``)."""
    return hasattr(_module(name), "page_claims")


def claims(name: str, results: Mapping[str, object],
           parameters: Mapping[str, object]) -> dict[str, list[Claim]]:
    """The claims tables page ``name`` shows of ``results`` at ``parameters``, by glue prefix, without its
    figures: its module's ``page_claims(results, parameters)`` (which its ``show`` puts in
    ``Shown.claims``); {} for a page that states no claims."""
    return _module(name).page_claims(results, parameters) if states_claims(name) else {}


def claims_at_defaults(name: str, reuse_recorded: bool = True) -> tuple[dict[str, list[Claim]], bool]:
    """Page ``name``'s claims tables at its parameters cell's defaults, as the page shows them (:func:`claims`
    of :func:`shown_results`), and whether they were read from the record the page's build left
    (:mod:`rankcollapse.book.pages._claims_records`: with ``reuse_recorded``, when a record matches its
    parameters, code and stored results)."""
    from rankcollapse.book.runner import page_parameters, repo_root

    parameters = page_parameters(page(name).path(repo_root()))
    recorded = recorded_claims(name, parameters) if reuse_recorded else None
    if recorded is not None:
        return recorded, True
    return claims(name, shown_results(name, parameters), parameters), False


def gather_claims(names: Sequence[str] | None = None, reuse_recorded: bool = True) -> list[PageClaims]:
    """The claims of pages ``names`` (default: every page, in book order, that states claims, the verdicts
    page aside) at their defaults (:func:`claims_at_defaults`), each with the seconds it took."""
    gathered = []
    for name in names or [n for n in PAGES if n != "verdicts" and states_claims(n)]:
        started = time.perf_counter()
        found, recorded = claims_at_defaults(name, reuse_recorded)
        gathered.append(PageClaims(name, page(name).source, page(name).title, found, recorded,
                                   time.perf_counter() - started))
    return gathered
