"""What several page modules share, and no page owns: the largest sizes a page accepts, the ``configure``
makers of experiment pages and of pages that compute in their own module, the fixed choices of the Fig. 2
and Fig. 3 sweeps (which the appendix, sample-size and pretrained-panels pages rerun or reuse), the
response's claim on the pretrained temperature panels (Fig. 3 and the pretrained panels), the rate table
of the two decoder pages, and the clauses a page's finding pastes (a claim's verdict with its number, a
tally of verdicts).

Used by: the modules of :mod:`rankcollapse.book.pages`, never by a page's ``.md`` directly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from rankcollapse.book.claims_table import reader_html
from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics
from rankcollapse.core.checks import check_choice, check_int
from rankcollapse.experiments import sweep
from rankcollapse.theory.dynamics import linear_curve
from rankcollapse.experiments.config import experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.tables import table_verdicts
from rankcollapse.experiments.sample_values import SampleValues
from rankcollapse.verdicts.claims import (HOLDS, Claim, bounded_claim, collapse_claim, effect_cell,
                                          effect_claim, mean_rate)
from rankcollapse.verdicts.effects import Side, late_factor, lowest_ratio, side
from rankcollapse.verdicts.robustness import robust

MAX_SYSTEM_TOKENS = 4096  # largest N a theory page accepts
MAX_LAYERS = 100_000  # largest depth a theory page accepts
MAX_DRAWS = 1_000_000  # largest number of random draws a page accepts
MAX_SEED = 2**63 - 1  # torch.Generator seeds
PAGE_ONLY = ("show_largest_stored",)  # parameters a page uses for display only, never for computing

# The Fig. 2 and Fig. 3 sweeps' fixed choices (our reconstructions, marked [recon] in the book, are
# parameters, not fixed here). "model": each layer's own norm — the trained γ, β of a pretrained model
# (Dong et al.'s SAN + LN), and LayerNorm without affine (γ = 1, β = 0) for freshly initialized layers, as a
# fresh model has it.
FIG2 = dict(norms=("none", "unit", "model"))
FIG3 = dict(norms=("none",))
# The initialized settings a claims row is decided in, as a reader knows them (Claim.setting)
THEORY_SETTING = "the theory's SAN: initialized, no biases"
BIASES_SETTING = "initialized with PyTorch's default biases"
FIG4 = dict(norms=("none", "unit", "model"), full_transformer=True, geometry=True)  # Fig. 4: token geometry


def times_floor(ratio: float, held: int | None = None) -> str:
    """Words for a value over its rounding floor: "1.1 times its rounding floor", or, for a value that
    underflowed to exactly 0, that it lies below the floor (never "0 times its rounding floor"). ``held``:
    the first layer the sweep did not compute (:func:`rankcollapse.experiments.config.held_from`), so the
    value is the one the curve settled at.

    >>> times_floor(1.1056), times_floor(0.0)
    ('1.1 times its rounding floor', 'exactly 0, below its rounding floor (it underflowed)')
    >>> times_floor(0.97, held=14)
    '0.97 times its rounding floor (at layer 13, where it settled on the floor; later layers not computed)'
    """
    words = ("exactly 0, below its rounding floor (it underflowed)" if ratio == 0 else
             f"{ratio:.2g} times its rounding floor")
    return words if held is None else (f"{words} (at layer {held - 1}, where it settled on the floor; "
                                       "later layers not computed)")


def check_system(config: object) -> None:
    """The fields every theory sweep shares: sizes, seed, dtype."""
    check_int("n_tokens", config.n_tokens, 2, MAX_SYSTEM_TOKENS)
    check_int("d_model", config.d_model, 1, 4096)
    check_int("n_layers", config.n_layers, 1, MAX_LAYERS)
    check_int("n_samples", config.n_samples, 1, MAX_DRAWS)
    check_int("seed", config.seed, 0, MAX_SEED)
    check_choice("dtype", config.dtype, tuple(metrics.DTYPES))


def own_config(config_class: type) -> Callable[[dict], dict[str, object]]:
    """``configure`` of a page that computes in its own module: its config dataclass checks every
    parameter."""
    def configure(parameters: dict) -> dict[str, object]:
        return {"main": config_class(**parameters)}
    return configure


def computing(parameters: Mapping[str, object], *extra: str) -> dict[str, object]:
    """The parameters that go into a page's sweeps: all but the display-only ones (PAGE_ONLY) and
    ``extra``."""
    return {k: v for k, v in parameters.items() if k not in (*PAGE_ONLY, *extra)}


def computed_by(page: str, parameters: Mapping[str, object]) -> dict[str, object]:
    """What a stored result records of the page that computed it (its ``computed_by``, from which the store
    writes the command that recomputes it): the page and its parameters, all but the display-only ones."""
    return {"page": page, "parameters": computing(parameters)}


def run_all(page: str, runs: Mapping[str, Run], parameters: Mapping[str, object]) -> dict[str, StoredResult]:
    """Every sweep of a page, stored under the page's name or the page the run names, each recording the page
    and its parameters that compute it (:func:`computed_by`): loaded when stored, else computed and stored
    (:func:`rankcollapse.experiments.sweep.run_experiment`)."""
    by = computed_by(page, parameters)
    return {part: sweep.run_experiment(run.page or page, run.config, computed_by=by)
            for part, run in runs.items()}


def experiment(fixed: dict, **extra_fixed) -> Callable[[dict], dict[str, Run]]:
    """``configure`` of a one-sweep experiment page: the page's fixed choices, then the reader's
    parameters."""
    def configure(parameters: dict) -> dict[str, Run]:
        return {"main": Run(experiment_config(computing(parameters), **fixed, **extra_fixed))}
    return configure


def fig2_and_fig3(stored_as_figures: bool = False, **shared) -> Callable[[dict], dict[str, Run]]:
    """``configure`` of a page showing the Fig. 2 and Fig. 3 sweeps of the same parameters (the
    ``temperatures`` parameter belongs to the Fig. 3 sweep only); ``stored_as_figures``: the very sweeps of
    the Fig. 2 and Fig. 3 pages, stored as theirs."""
    def configure(parameters: dict) -> dict[str, Run]:
        own = computing(parameters)
        temperatures = {"temperatures": own.pop("temperatures")} if "temperatures" in own else {}
        return {"fig2": Run(experiment_config(own, **shared, **FIG2), "fig2" if stored_as_figures else None),
                "fig3": Run(experiment_config({**own, **temperatures}, **shared, **FIG3),
                            "fig3" if stored_as_figures else None)}
    return configure


# ------------------------------------------------------- the temperature sweeps (Fig. 3, pretrained panels)


def temperature_range(table: pd.DataFrame) -> tuple[float, float]:
    """The smallest and the largest temperature of a temperature sweep (NaN: a layer's own scaling, left
    out)."""
    temperatures = sorted(table["temperature"].dropna().unique())
    return temperatures[0], temperatures[-1]


Source = pd.DataFrame | StoredResult | Sequence[StoredResult]  # a table (with its samples), or result(s)


def mask_sides(source: Source, samples: SampleValues | None, words: str, metric: str = "relative_mu",
               **labels) -> dict[str, Side]:
    """Per mask of the configurations matching ``labels`` (column=value) in ``source`` — a tidy table with its
    per-sample values, one stored result, or the results of several weight seeds
    (:func:`rankcollapse.verdicts.effects.side`) —: its curve of ``metric``, named ``"<mask>, <words>"``."""
    rows = _first_table(source)
    for column, wanted in labels.items():
        rows = rows[rows[column] == wanted]
    return {mask: side(source, samples, f"{mask}, {words}", metric, mask=mask, **labels)
            for mask in dict.fromkeys(rows["mask"])}


def _first_table(source: Source) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    return source.table if isinstance(source, StoredResult) else source[0].table


def part_sides(results: Mapping[str, StoredResult | Sequence[StoredResult]], words: str,
               metric: str = "relative_mu", **labels) -> dict[str, Side]:
    """Per part of a page whose parts each hold one mask (the decoder pages): the curve matching ``labels`` in
    that part's result (or pooled over its weight seeds' results), keyed by the part's name, named
    ``"<part>, <words>"``; parts without it are left out."""
    out = {}
    for part, result in results.items():
        rows = _first_table(result)
        for column, wanted in labels.items():
            rows = rows[rows[column] == wanted]
        if len(rows):
            out[part] = side(result, None, f"{part}, {words}", metric, **labels)
    return out


def paired_sides(source: Source, samples: SampleValues | None, config: Mapping[str, object],
                 baseline: Mapping[str, object], words: tuple[str, str],
                 metric: str = "relative_mu") -> dict[str, tuple[Side, Side]]:
    """Per mask of the configuration ``config`` (labels, column=value): (its curve of ``metric``, the curve
    of the baseline ``baseline`` under the same mask), named ``"<mask>, <words>"`` (:func:`mask_sides`)."""
    mine = mask_sides(source, samples, words[0], metric, **config)
    theirs = mask_sides(source, samples, words[1], metric, **baseline)
    return {mask: (mine[mask], theirs[mask]) for mask in mine}


def temperature_sides(source: Source, samples: SampleValues | None,
                      weights: str) -> dict[str, tuple[Side, Side]]:
    """Per mask of a temperature sweep (a table with its samples, or stored result(s)): (the smallest
    temperature's curve, the largest's, the baseline) of μ/‖X‖_F for ``weights``."""
    cold, warm = temperature_range(_first_table(source))
    return paired_sides(source, samples, dict(weights=weights, temperature=cold),
                        dict(weights=weights, temperature=warm), (f"d_QK = {cold:g}", f"d_QK = {warm:g}"))


def against(claim: str, source: str, measured: str, sides: Mapping[str, tuple[Side, Side]],
            window: tuple[int, int] | None = None, setting: str = "") -> Claim:
    """A comparative claim "the configuration decays more slowly than its baseline", per mask: the late
    per-layer factor (:func:`rankcollapse.verdicts.effects.late_factor`; over ``window``'s layers when given),
    robust or not over the grid; ``setting``: where it is decided, in a reader's words."""
    return with_setting(robust(lambda t: effect_claim(claim, source, measured,
                                                      [effect_cell(m, late_factor(*pair, t, window), +1, t)
                                                       for m, pair in sides.items()])), setting)


def verdict_words(rows: list[Claim]) -> str:
    """A page's finding in one clause: each claim's verdict in a few words, e.g. "pure attention collapses
    under every mask: holds; LayerNorm alone prevents collapse: does not hold" (the rows' claims, their
    leading dots dropped, each claim once: its first row)."""
    seen: dict[str, str] = {}
    for row in rows:
        seen.setdefault(_phrase(row), row.verdict)
    return "; ".join(f"{claim}: **{verdict}**" for claim, verdict in seen.items())


def _phrase(row: Claim) -> str:
    """A row's claim as a phrase inside a sentence: leading dots and the closing full stop dropped, the
    first letter small unless the first word is a name with capitals inside (LayerNorm, RMSNorm).

    >>> _phrase(Claim("Pure attention collapses.", "s", "m", "holds", "1")), _phrase(Claim(
    ...     "... LayerNorm slows it", "s", "m", "holds", "1"))
    ('pure attention collapses', 'LayerNorm slows it')
    """
    claim = row.claim.strip(". ").rstrip(".")
    name = any(c.isupper() for c in claim.split()[0][1:])
    return claim if name else f"{claim[0].lower()}{claim[1:]}"


def verdict_clause(row: Claim, evidence: str | None = None) -> str:
    """One claim's verdict as a page's finding pastes it (``{glue:md}``): the verdict in bold, then what
    decides it — the row's number, or ``evidence`` — its math names as a reader reads them
    (:func:`rankcollapse.book.claims_table.reader_html`).

    >>> verdict_clause(Claim("c", "s", "m", "holds partly", "52.2 %"))
    '**holds partly**, 52.2 %'
    """
    return f"**{row.verdict}**, {reader_html(row.number if evidence is None else evidence)}"


def row_of(rows: Sequence[Claim], claim: str) -> Claim:
    """The first of ``rows`` whose claim starts with ``claim`` (a page's finding names its claims by their
    first words)."""
    found = [row for row in rows if row.claim.startswith(claim)]
    if not found:
        raise ValueError(f"claim must start one of the rows' claims, got {claim!r}; the rows: "
                         f"{[row.claim for row in rows]}")
    return found[0]


def verdict_clauses(rows: Sequence[Claim], claims: Mapping[str, str]) -> dict[str, str]:
    """A page's finding as clauses by glue name: per name, the verdict and number (:func:`verdict_clause`)
    of the row whose claim starts with the words ``claims`` gives it (:func:`row_of`)."""
    return {name: verdict_clause(row_of(rows, claim)) for name, claim in claims.items()}


def tally_clause(rows: Sequence[Claim]) -> str:
    """A page's finding over many claims in one clause: how many hold, then each claim that does not (or only
    partly), with its verdict and number (:func:`verdict_clause`).

    >>> tally_clause([Claim("A holds.", "s", "m", "holds", "1"), Claim("B is so", "s", "m", "holds partly",
    ...                                                                "2")])
    '1 of 2 hold; b is so: **holds partly**, 2'
    """
    others = [row for row in rows if row.verdict != HOLDS]
    return "; ".join([f"{len(rows) - len(others)} of {len(rows)} hold",
                      *(f"{_phrase(row)}: {verdict_clause(row)}" for row in others)])


def seed_parts(results: Mapping[str, StoredResult], prefix: str) -> list[StoredResult]:
    """The results of the parts named ``<prefix>_<k>`` (a sweep's weight-seed replicates, ``seed_0``,
    ``fig2_seed_0``, ...), in the page's order of parts."""
    return [r for name, r in results.items() if name.startswith(f"{prefix}_")]


def with_setting(claim: Claim, setting: str) -> Claim:
    """The claim with its ``setting`` (where it is decided, as a reader knows it)."""
    return replace(claim, setting=setting)


@functools.lru_cache(maxsize=256)
def linear_prediction(mask: str, n_tokens: int, window: int | None, n_layers: int) -> np.ndarray:
    """The linear case's μ/‖X‖_F over ``n_layers`` layers for a mask
    (:func:`rankcollapse.theory.dynamics.linear_curve`): what the theory predicts for the bias-free
    initialized SAN, whose attention becomes uniform as X shrinks. Shapes: -> [layer + 1]."""
    return linear_curve(rc_masks.build_mask(mask, n_tokens, window), n_layers).numpy()


def curves_claim(claim: str, source: str, measured: str, sides: Mapping[str, Side],
                 predicted: Mapping[str, np.ndarray] | None = None, window: tuple[int, int] | None = None,
                 setting: str = "") -> Claim:
    """Every curve of ``sides`` collapses (:func:`rankcollapse.verdicts.claims.collapse_claim`, beside the
    theory's ``predicted`` factors where given), one cell per key, robust or not over the thresholds' grid."""
    return robust(lambda t: collapse_claim(claim, source, measured, dict(sides), t, dict(predicted or {}),
                                           window, setting))


def stops_claim(claim: str, source: str, measured: str, pairs: Mapping[str, tuple[Side, Side]],
                setting: str = "") -> Claim:
    """The configuration stops the collapse of its baseline
    (:func:`rankcollapse.verdicts.claims.bounded_claim`), one cell per key, robust or not over the thresholds'
    grid."""
    return robust(lambda t: bounded_claim(claim, source, measured, dict(pairs), t, setting))


def pretrained_layers_claim(table: pd.DataFrame, samples: SampleValues | None = None) -> Claim:
    """The response (W2): with pretrained weights a smaller temperature keeps μ/‖X‖_F higher in every
    layer and for every mask — per mask, the lowest ratio over layers >= 1 of the coldest temperature's
    median curve over the warmest's, with its interval; it holds where that interval lies above 1."""
    cold, warm = temperature_range(table)
    sides = temperature_sides(table, samples, "pretrained")
    return robust(lambda t: effect_claim(
        "In pretrained models the effect is visible in all layers and for every mask", "the response (W2)",
        f"pretrained: lowest ratio over layers of μ/‖X‖_F at d_QK = {cold:g} over d_QK = {warm:g}, "
        "per mask",
        [effect_cell(m, lowest_ratio(*pair), +1, t) for m, pair in sides.items()]))


# ------------------------------------------------------- the decoder pages (RMSNorm, sliding-window model)

CAUSAL = "causal"  # the part (and mask) of a decoder's own causal mask, run with the full transformer
RATE_COLUMNS = ("weights", "variant", "mask", "radius", "norm", "skip", "verdict", "mean rate", "late rate")


@functools.lru_cache(maxsize=64)
def mask_radius(mask: str, n_tokens: int, window: int | None) -> int:
    """The radius of a mask (by BFS: 2 s for a 640-token causal mask, so once per mask, not per
    configuration)."""
    return rc_masks.graph_radius(rc_masks.build_mask(mask, n_tokens, window))


def rate_table(results: Mapping[str, StoredResult]) -> pd.DataFrame:
    """One row per configuration of every part: its ``part`` (the key of ``results``), weights, variant,
    mask (with its window), norm, skip, the mask's radius at the run's ``n_tokens``, the curve verdict of
    μ/‖X‖_F (median over samples), its ``mean rate`` per layer
    (:func:`rankcollapse.verdicts.claims.mean_rate`), its ``late rate`` and ``words``; ``curve`` keeps the
    CurveVerdict.

    Shapes: ``results`` part -> result, as the page's ``configure`` names them.
    """
    frames = []
    for part, result in results.items():
        n_tokens = result.provenance["parameters"]["n_tokens"]
        curves = table_verdicts(result.table)
        curves.insert(0, "part", part)
        window = curves["window"].map(lambda w: None if pd.isna(w) else int(w))
        curves["radius"] = pd.array([None if m == "model" else mask_radius(m, n_tokens, w)
                                     for m, w in zip(curves["mask"], window)], dtype="Int64")
        curves["mask"] = [m if w is None else f"{m} {w}" for m, w in zip(curves["mask"], window)]
        curves["mean rate"] = curves["curve"].map(mean_rate)
        curves = curves.rename(columns={"rate": "late rate"})
        frames.append(curves)
    return pd.concat(frames, ignore_index=True)
