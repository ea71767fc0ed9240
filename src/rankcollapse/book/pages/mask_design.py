"""The mask-design page: a zoo of attention masks at one sequence length, each with its compute cost (edges),
its graph radius, the second eigenvalue of its uniform attention, and the measured collapse rate.

Each zoo member is one sweep of :mod:`rankcollapse.experiments.config` (one mask, its window and
options), so the page reuses the engine, the shared X(0) and the results store. The rate is the per-layer
decay rate of μ/‖X‖_F, -d log(μ/‖X‖_F)/dt by least squares
(:func:`rankcollapse.core.stats.fit_decay_rate`) over the layers whose mean μ lies above 10 times the
rounding floor; exp(-rate) is the contraction per layer.

:func:`configure` turns the page's parameters into one sweep per zoo mask, :func:`design_table` reads them
into one row per mask; :func:`numbers` are the values its prose states (per weight source, with the clause on
which masks collapse). :func:`decomposition_runs` are the sweeps of
five masks that also split each layer's change of μ into the value maps' gain and attention's contraction
(:mod:`rankcollapse.book.pages._decomposition`). :func:`show` is what the page shows of both: the zoo's
numbers, table, scale note and rate-radius figure, the decomposition's numbers, claims, attention table and
figure, and the clauses of the page's finding (:func:`finding_clauses`).

Used by: book/beyond/mask_design.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_mask_design.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd
import torch

from rankcollapse.book.pages._common import THEORY_SETTING, computing, run_all, verdict_clause
from rankcollapse.book.pages._decomposition import (WEIGHTS_TITLES, attention_table, decay_driver,
                                                    decay_shares, decomposition_claims, decomposition_frame)
from rankcollapse.book.plotting.beyond import SortableTable, rate_radius_figure
from rankcollapse.book.plotting.decomposition import decomposition_figure
from rankcollapse.book.shown import (Shown, ShownFigure, combined_parameters, figure_data, largest_stored,
                                     prefixed, scale_note, scale_words)
from rankcollapse.core import masks as rc_masks
from rankcollapse.core.metrics import FLOOR_BAND, second_eigenvalue_modulus
from rankcollapse.core.stats import fit_decay_rate, rank_correlation
from rankcollapse.experiments.config import MAX_TOKENS, experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import Claim
from rankcollapse.verdicts.tables import table_verdicts
from rankcollapse.verdicts.rules import COLLAPSE_RATE


@dataclass(frozen=True)
class ZooMask:
    """One mask of the zoo: a name of rankcollapse.core.masks, its window and its extra options."""

    label: str  # words in the table and the plot
    mask: str  # rankcollapse.core.masks.MASK_NAMES
    window: int | None = None  # half-width, window size or stride (rankcollapse.core.masks.build_mask)
    options: tuple[tuple[str, object], ...] = ()  # build_mask keywords (rankcollapse.core.masks.MASK_OPTIONS)

    @property
    def part(self) -> str:
        """The result part's name: the mask and its settings, e.g. ``causal_sliding_window-w4``."""
        return "-".join([self.mask, *([f"w{self.window}"] if self.window else []),
                         *(f"{k}{v}" for k, v in self.options)])

    def build(self, n_tokens: int) -> torch.Tensor:
        """Shapes: -> [token, token] bool."""
        return rc_masks.build_mask(self.mask, n_tokens, self.window, **dict(self.options))


ZOO = (
    ZooMask("complete", "complete"),
    ZooMask("causal", "causal"),
    *(ZooMask(f"window ±{w}", "sliding_window", w) for w in (1, 2, 4, 8)),
    *(ZooMask(f"causal window {w}", "causal_sliding_window", w) for w in (1, 2, 4, 8)),
    ZooMask("dilated ±2, dilation 2", "dilated_window", 2, (("dilation", 2),)),
    ZooMask("window ±1 + 1 global", "global_window", 1, (("n_global", 1),)),
    ZooMask("strided 4 (causal)", "strided", 4, (("causal", True),)),
    ZooMask("random 15 %", "random", None, (("density", 0.15), ("seed", 0))),
)
FIXED = {"masks": tuple(z.part for z in ZOO), "norms": ("none",)}  # the zoo, pure attention
# The masks whose runs also record each layer's decomposition of mu and its attention statistics
# (ExperimentConfig.attention_stats): a separate part each, so the zoo's stored results keep their keys.
DECOMPOSED = ("complete", "causal", "window ±1", "window ±8", "causal window 4")
_KINDS = {z.label: (z.mask, z.window) for z in ZOO}  # a zoo label's mask and window: its colour and marker
DECOMPOSITION_PREFIX = "decomposition-"  # part name of a decomposed mask: the prefix and its zoo part
MIN_TOKENS = max(z.window or 1 for z in ZOO) + 1  # the widest zoo window must fit in the sequence
COLLAPSING = ("collapses", "reaches the floor")  # the curve verdicts of a collapse (verdicts.rules)
# the decomposition runs' weights: the theory's bias-free SAN first, then the same stacks with PyTorch's
# default biases and the pretrained layers (the zoo's initialized stacks keep the biases; collapse and the
# radius's order in the theory's SAN are decided on its own page, sec-theory-san)
DECOMPOSED_WEIGHTS = ("initialized_nobias", "initialized", "pretrained")
# each weight source's setting in the claims rows and the decomposition figure's panels
SETTING_WORDS = {"initialized_nobias": f"{THEORY_SETTING}; 1 weight seed",
                 "initialized": "initialized with PyTorch's default biases; 1 weight seed",
                 "pretrained": "pretrained"}
# two rates whose ratio is within 5 % of 1 are read as the same rate, neither faster nor slower
SAME_RATE = 0.05


def configure(parameters: dict) -> dict[str, Run]:
    """``configure`` of the page: one pure-attention sweep per zoo mask, the reader's parameters for all.

    A window the sequence cannot hold is rejected here, before anything runs.
    """
    own = computing(parameters)
    n_tokens = own.get("n_tokens")
    if isinstance(n_tokens, int) and not isinstance(n_tokens, bool) and n_tokens < MIN_TOKENS:
        raise ValueError(f"n_tokens must be an integer in [{MIN_TOKENS}, {MAX_TOKENS}] on this page "
                         f"(its zoo holds windows of up to {MIN_TOKENS - 1} tokens), got {n_tokens}")
    return {z.part: Run(experiment_config(own, masks=(z.mask,), window=z.window or 1,
                                                      mask_options=z.options, norms=("none",)))
            for z in ZOO}


def decomposition_runs(parameters: dict) -> dict[str, Run]:
    """The DECOMPOSED masks' sweeps that also record each layer's decomposition of mu and its attention
    statistics (``decomposition-<part>``), at the page's parameters: a group of their own, outside
    :func:`configure`, so the zoo's stored results keep their keys and the page shows the zoo at its largest
    stored scale whatever scale the slower decomposition runs are stored at (the page states both)."""
    zoo = configure(parameters)
    return {DECOMPOSITION_PREFIX + z.part: Run(replace(zoo[z.part].config, attention_stats=True,
                                                       weights=DECOMPOSED_WEIGHTS))
            for z in ZOO if z.label in DECOMPOSED}


def decomposition_results(parameters: dict) -> dict[str, StoredResult]:
    """:func:`decomposition_runs`' results, stored under this page: loaded, or computed and stored; with
    ``show_largest_stored``, at the largest scale stored for all of them (:func:`largest_stored`)."""
    results = run_all("mask_design", decomposition_runs(parameters), parameters)
    return largest_stored(results) if parameters["show_largest_stored"] else results


def page_claims(results: Mapping[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``mask_design_decomp``, on the decomposition runs), as :func:`show` shows it
    (no figures drawn, the zoo not read)."""
    return {"mask_design_decomp": decomposition_claims(decomposition(decomposition_results(parameters)),
                                                       SETTING_WORDS)}


def show(results: Mapping[str, StoredResult], parameters: dict) -> Shown:
    """What the page shows. The zoo (``results``, part -> result as :func:`configure` names them): its scale
    and :func:`numbers` (``mask_design_*``, pretrained ``mask_design_pre_*``; ``collapse_words`` the clause on
    which masks collapse), the sortable design table (``mask_design_table``: one row per mask,
    :func:`design_table`), the scale note and the rate-radius figure. The decomposition
    (:func:`decomposition_results` at ``parameters``): its scale and numbers (``mask_design_decomp_*``), its
    claims, the sortable attention table (``mask_design_decomp_table``: one row per mask x weights,
    :func:`attention_table`) and its figure."""
    table = design_table(results)
    found, found_pre = numbers(table), numbers(table, "pretrained")
    decomposed = decomposition_results(parameters)
    frame = decomposition(decomposed)
    decomp = {"scale": scale_words(next(iter(decomposed.values()))),
              **decomposition_numbers(decay_shares(frame))}
    tables = page_claims(results, parameters)
    finding = finding_clauses(found, found_pre, tables["mask_design_decomp"])
    return Shown(
        values={**prefixed("mask_design", {"scale": scale_words(results["complete"]), **found, **finding}),
                **prefixed("mask_design_pre", found_pre), **prefixed("mask_design_decomp", decomp)},
        markdown={"mask_design_scale_note": scale_note(results["complete"])},
        claims=tables,
        tables={"mask_design_table": SortableTable(table),
                "mask_design_decomp_table": SortableTable(attention_table(frame))},
        figures=[ShownFigure("fig-mask-design-rates", rate_radius_figure(table, _KINDS),
                             combined_parameters(results.values()), figure_data(results.values())),
                 ShownFigure("fig-mask-design-decomposition",
                             decomposition_figure(frame, titles=WEIGHTS_TITLES, kinds=_KINDS),
                             combined_parameters(decomposed.values()), figure_data(decomposed.values()))])


def finding_clauses(found: dict, found_pre: dict, rows: list[Claim]) -> dict[str, str]:
    """The page's finding as the clauses its first paragraph pastes: how the radius orders the rates of the
    masks that have one, by the sign of the rank correlation with initialized and pretrained weights
    (``finding_radius``; :func:`numbers`), and what drives μ's decay per weight source, each row's verdict and
    count of masks (``finding_decomp``)."""
    def order(correlation: float) -> str:
        return ("the larger the radius, the slower the collapse" if correlation < 0 else
                "the larger the radius, the faster the collapse" if correlation > 0 else
                "the radius does not order the rates")

    init, pre = found["by_radius"], found_pre["by_radius"]
    radius = (f"{order(init)} (rank correlation of radius and rate {init:.2f} with initialized weights, "
              f"{pre:.2f} with pretrained ones)" if order(init) == order(pre) else
              f"with initialized weights {order(init)} (rank correlation {init:.2f}), with pretrained ones "
              f"{order(pre)} ({pre:.2f})")
    return {"finding_radius": radius,
            "finding_decomp": "; ".join(f"{row.setting}: {verdict_clause(row, row.number.split(' (')[0])}"
                                        for row in rows)}


def uniform_second_eigenvalue(mask: torch.Tensor) -> float:
    """|λ₂| of uniform attention on ``mask`` (each row averages the tokens it may attend to): the
    asymptotic contraction per layer of that attention, 1 when the mask leaves tokens that never mix.

    Shapes: mask [token, token] bool -> float.

    >>> round(uniform_second_eigenvalue(rc_masks.causal_sliding_window_mask(8, 3)), 6)
    0.5
    """
    a = mask.to(torch.float64)
    second = float(second_eigenvalue_modulus(a / a.sum(-1, keepdim=True)))  # rows of A sum to 1
    return 0.0 if second < 1e-12 else second  # rounding residue of a rank-one matrix is 0


def decay_rate(table: pd.DataFrame, weights: str) -> float:
    """The fitted rate of μ/‖X‖_F for one weight source of a one-mask sweep; NaN with fewer than two
    layers above FLOOR_BAND x the floor (:data:`rankcollapse.core.metrics.FLOOR_BAND`) (collapsed to
    rounding within a layer).

    Shapes: ``table`` is a tidy experiments table (:func:`rankcollapse.experiments.config.summarize`).
    """
    rows = table[(table["weights"] == weights) & (table["variant"] == "SAN")]
    by_metric = {m: rows[rows["metric"] == m].sort_values("layer")["mean"].to_numpy()
                 for m in ("relative_mu", "mu", "floor")}
    valid = torch.tensor(by_metric["mu"] > FLOOR_BAND * by_metric["floor"])  # [layer + 1]
    if int(valid.sum()) < 2:
        return math.nan
    return fit_decay_rate(torch.log(torch.tensor(by_metric["relative_mu"])), valid)


def _curve_verdict(table: pd.DataFrame, weights: str) -> str:
    """The book's curve verdict (:func:`rankcollapse.verdicts.rules.curve_verdict`: "collapses",
    "stable", ...) of the median μ/‖X‖_F of one weight source of a one-mask sweep, the verdict every
    claims table uses.

    Shapes: ``table`` is a tidy experiments table (:func:`rankcollapse.experiments.config.summarize`).
    """
    rows = table[(table["weights"] == weights) & (table["variant"] == "SAN")]
    return str(table_verdicts(rows)["verdict"].iloc[0])


def design_table(results: Mapping[str, StoredResult]) -> pd.DataFrame:
    """One row per zoo mask: edges, radius (None: not quasi-strongly connected), uniform |λ₂|, rates and
    curve verdicts (``rate, <weights>``, ``verdict, <weights>``).

    Shapes: ``results`` part -> result, as :func:`configure` names them.
    """
    rows = []
    for z in ZOO:
        result = results[z.part]
        n_tokens = result.provenance["parameters"]["n_tokens"]
        mask = z.build(n_tokens)
        graph = rc_masks.describe_mask(mask)
        rows.append({"mask": z.label, "edges": graph.n_edges, "edge share": graph.n_edges / n_tokens ** 2,
                     "radius": graph.radius, "uniform |λ₂|": uniform_second_eigenvalue(mask),
                     **{f"rate, {w}": decay_rate(result.table, w)
                        for w in result.provenance["parameters"]["weights"]},
                     **{f"verdict, {w}": _curve_verdict(result.table, w)
                        for w in result.provenance["parameters"]["weights"]}})
    return pd.DataFrame(rows)


def numbers(table: pd.DataFrame, weights: str = "initialized") -> dict[str, float | int | str]:
    """How well radius and uniform |λ₂| order the measured rates, the causal windows' spread, uni- against
    bidirectional windows of equal radius, the masks without a radius, the fastest sparse mask, and which
    masks collapse at all (curve verdict "collapses"; the others' rates are not read as rates of collapse).

    Shapes: ``table`` one row per zoo mask (:func:`design_table`).
    """
    rate = table[f"rate, {weights}"]
    collapses = table[f"verdict, {weights}"].isin(COLLAPSING)
    connected = table["radius"].notna()
    causal = table["mask"].str.startswith("causal window")
    complete_rate = float(rate[table["mask"] == "complete"].iloc[0])
    sparse = table["mask"] != "complete"
    fastest = rate[sparse].idxmax()
    bidirectional = table["mask"].str.startswith("window ±") & ~table["mask"].str.contains("+", regex=False)
    pairs = (table[causal].assign(rate=rate[causal], collapses=collapses[causal])
             .merge(table[bidirectional].assign(rate=rate[bidirectional], collapses=collapses[bidirectional]),
                    on="radius", suffixes=("_uni", "_bi")))
    both = pairs[pairs["collapses_uni"] & pairs["collapses_bi"]]
    ratios = both["rate_uni"] / both["rate_bi"]
    by_radius = rank_correlation(table.loc[connected, "radius"].astype(float), rate[connected])
    causal_by_radius = rank_correlation(table.loc[causal, "radius"].astype(float), rate[causal])
    sparse_min, sparse_max = float(rate[sparse].min()), float(rate[fastest])
    return {
        "n_masks": len(table), "n_connected": int(connected.sum()),
        "n_collapsing": int(collapses.sum()),
        "collapse_words": _collapse_words(table["mask"], collapses),
        "by_radius": by_radius,
        "by_lambda": rank_correlation(table.loc[connected, "uniform |λ₂|"], rate[connected]),
        "causal_min": float(rate[causal].min()), "causal_max": float(rate[causal].max()),
        "causal_radius_min": int(table.loc[causal, "radius"].min()),
        "causal_radius_max": int(table.loc[causal, "radius"].max()),
        "causal_by_radius": causal_by_radius,
        "causal_order": ("none of them collapses" if not collapses[causal].any() else
                         "the radius orders them" if causal_by_radius < -1 + 1e-9 else
                         "the radius orders them only roughly" if causal_by_radius <= -0.5 else
                         "the radius does not order them"),
        "global_rate": float(rate[table["mask"] == "window ±1 + 1 global"].iloc[0]),
        "window1_rate": float(rate[table["mask"] == "window ±1"].iloc[0]),
        "n_pairs": len(pairs),
        "uni_vs_bi": _uni_vs_bi(ratios, len(pairs), pairs[["rate_uni", "rate_bi"]].to_numpy()),
        "unconnected": ", ".join(table.loc[~connected, "mask"]) or "none",
        "unconnected_verdicts": ", ".join(f"{m}: “{v}”" for m, v in
                                          zip(table.loc[~connected, "mask"],
                                              table.loc[~connected, f"verdict, {weights}"])) or "none",
        "unconnected_rate_max": float(rate[~connected].max()) if (~connected).any() else float("nan"),
        "complete_rate": complete_rate,
        "sparse_min": sparse_min, "sparse_max": sparse_max,
        "sparse_spread": ("the slowest of them does not collapse" if not collapses[sparse].all() else
                          "the choice among sparse masks barely changes the rate"
                          if sparse_max < 1.5 * sparse_min else
                          f"a factor {sparse_max / sparse_min:.2g} between the slowest and the fastest"),
        "fastest": str(table.loc[fastest, "mask"]),
        "fastest_share": 100 * float(table.loc[fastest, "edge share"]),
        "fastest_over_complete": float(rate[fastest]) / complete_rate,
    }


def _collapse_words(names: pd.Series, collapses: pd.Series) -> str:
    """Which masks collapse (curve verdict), in words; with the reason Theorem 1 allows the others.

    Shapes: ``names``, ``collapses`` one entry per zoo mask.
    """
    if collapses.all():
        return "every mask collapses"
    return (f"only {int(collapses.sum())} of the {len(names)} masks collapse "
            f"({', '.join(names[collapses]) or 'none'}); for the other {int((~collapses).sum())} "
            f"({', '.join(names[~collapses])}) no collapse of μ/‖X‖_F is resolved in these layers: it "
            f"neither reaches the rounding floor nor decays by a factor below "
            f"{math.exp(-COLLAPSE_RATE):.3g} per layer in the later layers (read on the median curve "
            "over samples, without an interval). Theorem 1 allows this: its bound contracts more slowly the "
            "larger the radius r and the smaller the least attention weight ε, so over a few layers it "
            "promises almost nothing when r is large or trained attention is sharp")


def _uni_vs_bi(ratios: pd.Series, n_pairs: int, rates) -> str:
    """Words for uni- against bidirectional windows of equal radius, compared only where both collapse.

    Shapes: ``ratios`` one rate ratio (uni over bi) per pair where both collapse; ``rates`` [pair, 2].
    """
    if n_pairs == 0:
        return "has no bidirectional window of the same radius at this sequence length"
    if ratios.empty:
        return (f"does not collapse, and neither does the bidirectional one (rates {rates.min():.2g} to "
                f"{rates.max():.2g} per layer), so there is nothing to compare")
    order = ("at the same rate as" if ((ratios - 1).abs() <= SAME_RATE).all() else
             "more slowly than" if (ratios < 1).all() else "faster than" if (ratios > 1).all()
             else "sometimes faster, sometimes more slowly than")
    where = "" if len(ratios) == n_pairs else f" in the {len(ratios)} pairs where both collapse"
    same = f", within {SAME_RATE:.0%}" if order.startswith("at the same") else ""
    return (f"collapses {order} the bidirectional one{same} (rate ratio {ratios.min():.2f} to "
            f"{ratios.max():.2f}{where})")



# ------------------------------------------------------- what drives the decay: value maps or attention

def decomposition(results: Mapping[str, StoredResult]) -> pd.DataFrame:
    """:func:`rankcollapse.book.pages._decomposition.decomposition_frame` of every decomposed zoo mask, named
    by its zoo label.

    Shapes: ``results`` part -> result, as :func:`decomposition_runs` names them -> columns ``mask, weights,
    metric, layer, median, q10, q90, read``.
    """
    return pd.concat([decomposition_frame(results[DECOMPOSITION_PREFIX + z.part].table, z.label)
                      for z in ZOO if z.label in DECOMPOSED], ignore_index=True)


def decomposition_numbers(shares: pd.DataFrame) -> dict[str, float | str]:
    """The prose's numbers: :func:`decay_driver` for the theory's bias-free SAN (``nobias_``), initialized
    weights with biases (``init_``) and pretrained (``pre_``) weights, over the local masks and (``_wide``)
    over the complete and the causal mask, flat for glueing.

    Shapes: ``shares`` as from :func:`decay_shares`.
    """
    found = {}
    for prefix, weights in (("nobias", "initialized_nobias"), ("init", "initialized"), ("pre", "pretrained")):
        for suffix, local in (("", True), ("_wide", False)):
            found |= {f"{prefix}{suffix}_{k}": v for k, v in decay_driver(shares, weights, local).items()}
    return found
