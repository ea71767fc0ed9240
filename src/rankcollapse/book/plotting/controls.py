"""The figure of Fig. 2's controls beside the curves they control: per mask (the paper's four and no mixing),
the initialized stacks with biases (solid) and the same weights without biases (dashed), each norm in its
variant's colour (:func:`controls_figure`).

Used by: the Fig. 2 page's module (:mod:`rankcollapse.book.pages.fig2`).
"""

from __future__ import annotations

from rankcollapse.book.labels import mask_title
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette
from rankcollapse.book.shown import ShownFigure, figure_data
from rankcollapse.core.norms import NORM_LABELS
from rankcollapse.experiments.store import StoredResult


def controls_figure(result: StoredResult, metric: str, stem: str, weight_seed: int) -> ShownFigure:
    """The per-layer curves of ``metric`` of the stored ``controls`` part ``result``: one panel per mask, one
    curve per norm, with biases solid and without biases (weights ``initialized_nobias``) dashed, titled with
    the ``weight_seed`` the weights were drawn with; shown as ``stem``, its cite block naming the run's
    parameters and key, drawing ``result``."""
    p = result.provenance["parameters"]
    table = result.table.copy()
    control = table["weights"] == "initialized_nobias"
    table["label"] = table["norm"].map(NORM_LABELS) + control.map({True: palette.CONTROL_SUFFIX, False: ""})
    table["mask_title"] = table["mask"].map(lambda m: mask_title(m, p["window"]))
    table["panel"] = "initialized"
    title = f"initialized: U(±1/√d), weight seed {weight_seed}; dashed: the same weights without biases"
    fig = plotting.layer_curve_grid(table, metric, row="panel", col="mask_title", hue="label",
                                    titles={"initialized": title},
                                    dashed=tuple(table.loc[control, "label"].unique()))
    return ShownFigure(stem, fig, {**p, "result": result.provenance["key"]}, figure_data([result]))
