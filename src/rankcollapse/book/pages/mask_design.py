"""The mask-design page: a zoo of attention masks at one sequence length, each with its compute cost (edges),
its graph radius, the second eigenvalue of its uniform attention, and the measured collapse rate.

Each zoo member is one sweep of :mod:`rankcollapse.experiments.config` (one mask, its window and options), so the
page reuses the engine, the shared X(0) and the results store. The rate is the per-layer decay rate of
μ/‖X‖_F, -d log(μ/‖X‖_F)/dt by least squares (:func:`rankcollapse.theory.dynamics.fit_decay_rate`) over the
layers whose mean μ lies above 10 times the rounding floor; exp(-rate) is the contraction per layer.

Used by: book/beyond/mask_design.md (through the page registry), tests/unit/test_mask_design.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd
import torch

from rankcollapse.theory import dynamics
from rankcollapse.experiments import config as experiments
from rankcollapse.verdicts import rules as verdicts
from rankcollapse.core import masks as rc_masks
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult

FLOOR_FACTOR = 10.0  # layers count for the rate while mean μ > FLOOR_FACTOR x the rounding floor


@dataclass(frozen=True)
class ZooMask:
    """One mask of the zoo: a name of rankcollapse.core.masks, its window and its extra options."""

    label: str  # words in the table and the plot
    mask: str  # rankcollapse.core.masks.MASK_NAMES
    window: int | None = None  # half-width, window size or stride (rankcollapse.core.masks.build_mask)
    options: tuple[tuple[str, object], ...] = ()  # build_mask keywords (experiments.MASK_OPTIONS)

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


def configure(parameters: dict) -> dict[str, Run]:
    """``configure`` of the page: one pure-attention sweep per zoo mask, the reader's parameters for all.

    A window the sequence cannot hold is rejected here, before anything runs.
    """
    own = {k: v for k, v in parameters.items() if k != "show_largest_stored"}
    return {z.part: Run(experiments.experiment_config(own, masks=(z.mask,), window=z.window or 1,
                                                      mask_options=z.options, norms=("none",)))
            for z in ZOO}


def uniform_second_eigenvalue(mask: torch.Tensor) -> float:
    """|λ₂| of uniform attention on ``mask`` (each row averages the tokens it may attend to): the asymptotic
    contraction per layer of that attention, 1 when the mask leaves tokens that never mix.

    Shapes: mask [token, token] bool -> float.

    >>> round(uniform_second_eigenvalue(rc_masks.causal_sliding_window_mask(8, 3)), 6)
    0.5
    """
    a = mask.to(torch.float64)
    a = a / a.sum(-1, keepdim=True)  # [token, token], rows sum to 1
    moduli = torch.linalg.eigvals(a).abs().sort(descending=True).values  # [token]
    return 0.0 if moduli[1] < 1e-12 else float(moduli[1])  # rounding residue of a rank-one matrix is 0


def decay_rate(table: pd.DataFrame, weights: str) -> float:
    """The fitted rate of μ/‖X‖_F for one weight source of a one-mask sweep; NaN with fewer than two layers
    above FLOOR_FACTOR x the floor (collapsed to rounding within a layer).

    Shapes: ``table`` is a tidy experiments table (:func:`rankcollapse.experiments.config.summarize`).
    """
    rows = table[(table["weights"] == weights) & (table["variant"] == "SAN")]
    by_metric = {m: rows[rows["metric"] == m].sort_values("layer")["mean"].to_numpy() for m in ("relative_mu", "mu", "floor")}
    valid = torch.tensor(by_metric["mu"] > FLOOR_FACTOR * by_metric["floor"])  # [layer + 1]
    if int(valid.sum()) < 2:
        return math.nan
    return dynamics.fit_decay_rate(torch.log(torch.tensor(by_metric["relative_mu"])), valid)


def curve_verdict(table: pd.DataFrame, weights: str) -> str:
    """The book's curve verdict (:func:`rankcollapse.verdicts.rules.curve_verdict`: "collapses", "stable", ...) of the
    median μ/‖X‖_F of one weight source of a one-mask sweep, the verdict every claims table uses.

    Shapes: ``table`` is a tidy experiments table (:func:`rankcollapse.experiments.config.summarize`).
    """
    rows = table[(table["weights"] == weights) & (table["variant"] == "SAN")]
    return str(verdicts.table_verdicts(rows)["verdict"].iloc[0])


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
                     **{f"rate, {w}": decay_rate(result.table, w) for w in result.provenance["parameters"]["weights"]},
                     **{f"verdict, {w}": curve_verdict(result.table, w) for w in result.provenance["parameters"]["weights"]}})
    return pd.DataFrame(rows)
