"""What several page modules share, and no page owns: the largest sizes a page accepts, the ``configure``
makers of experiment pages and of pages that compute in their own module, the fixed choices of the Fig. 2
and Fig. 3 sweeps (which the appendix, sample-size and pretrained-panels pages rerun or reuse), the
response's claim on the pretrained temperature panels (Fig. 3 and the pretrained panels) and the rate table
of the two decoder pages.

Used by: the modules of :mod:`rankcollapse.book.pages`, never by a page's ``.md`` directly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import pandas as pd

from rankcollapse.core import masks as rc_masks
from rankcollapse.core import metrics
from rankcollapse.core.checks import check_choice, check_int
from rankcollapse.experiments import sweep
from rankcollapse.experiments.config import experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.rules import table_verdicts
from rankcollapse.experiments.sample_values import SampleValues
from rankcollapse.verdicts.claims import (Claim, curve_claim, effect_cell, effect_claim, mean_rate,
                                         rethreshold, select_curves)
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


def paired_sides(table: pd.DataFrame, samples: SampleValues | None, config: Mapping[str, object],
                 baseline: Mapping[str, object], words: tuple[str, str],
                 metric: str = "relative_mu") -> dict[str, tuple[Side, Side]]:
    """Per mask of the configuration ``config`` (labels, column=value): (its curve of ``metric``, the curve
    of the baseline ``baseline`` under the same mask), named ``"<mask>, <words>"``
    (:func:`rankcollapse.verdicts.effects.side`)."""
    rows = table
    for column, wanted in config.items():
        rows = rows[rows[column] == wanted]
    return {mask: (side(table, samples, f"{mask}, {words[0]}", metric, mask=mask, **config),
                   side(table, samples, f"{mask}, {words[1]}", metric, mask=mask, **baseline))
            for mask in dict.fromkeys(rows["mask"])}


def temperature_sides(table: pd.DataFrame, samples: SampleValues | None,
                      weights: str) -> dict[str, tuple[Side, Side]]:
    """Per mask of a temperature sweep: (the smallest temperature's curve, the largest's, the baseline) of
    μ/‖X‖_F for ``weights``."""
    cold, warm = temperature_range(table)
    return paired_sides(table, samples, dict(weights=weights, temperature=cold),
                        dict(weights=weights, temperature=warm), (f"d_QK = {cold:g}", f"d_QK = {warm:g}"))


def against(claim: str, source: str, measured: str, sides: Mapping[str, tuple[Side, Side]]) -> Claim:
    """A comparative claim "the configuration decays more slowly than its baseline", per mask: the late
    per-layer factor (:func:`rankcollapse.verdicts.effects.late_factor`), robust or not over the grid."""
    return robust(lambda t: effect_claim(claim, source, measured,
                                         [effect_cell(m, late_factor(*pair, t), +1, t)
                                          for m, pair in sides.items()]))


def rate_sides(config: pd.DataFrame, baseline: pd.DataFrame, words: tuple[str, str],
               column: str = "mask") -> dict[str, tuple[Side, Side]]:
    """Per ``column`` value (mask or part) of two sets of rate-table rows (:func:`rate_table`, one row per
    value each): (the configuration's curve, the baseline's), from their median curves (no per-sample
    values)."""
    def sides(rows: pd.DataFrame, name: str) -> dict[str, Side]:
        return {str(r[column]): Side(f"{r[column]}, {name}", r["values"], r["floor"], None)
                for _, r in rows.iterrows()}

    first, second = sides(config, words[0]), sides(baseline, words[1])
    return {key: (first[key], second[key]) for key in first if key in second}


def curves_claim(claim: str, source: str, measured: str, table: pd.DataFrame, expected: str, what: str,
                 **labels) -> Claim:
    """Every curve of ``table`` matching ``labels`` shows ``expected``, one cell per mask, robust or not."""
    return rates_claim(claim, source, measured, select_curves(table, **labels), expected, what)


def rates_claim(claim: str, source: str, measured: str, curves: pd.DataFrame, expected: str, what: str,
                column: str = "mask") -> Claim:
    """Every curve of some rate-table rows (:func:`rate_table`) shows ``expected``, one cell per ``column``,
    each decided again at every point of the thresholds' grid."""
    return robust(lambda t: curve_claim(claim, source, measured, rethreshold(curves, t), expected, what,
                                        column))


def pretrained_layers_claim(table: pd.DataFrame, samples: SampleValues | None = None) -> Claim:
    """The response (W2): with pretrained weights a smaller temperature keeps μ/‖X‖_F higher in every
    layer and for every mask — per mask, the lowest ratio over layers >= 1 of the coldest temperature's
    median curve over the warmest's, with its interval; it holds where that interval lies above 1."""
    cold, warm = temperature_range(table)
    sides = temperature_sides(table, samples, "pretrained")
    return robust(lambda t: effect_claim(
        "In pretrained models the effect is visible in all layers and for every mask", "response W2",
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
