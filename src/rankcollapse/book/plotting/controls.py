"""The figure of Fig. 2's controls beside the curves they control: per mask (the paper's four and no mixing),
the initialized stacks with biases (dark grey) and the same weights without biases (light grey), each norm in
its line style (:func:`controls_figure`).

Used by: the Fig. 2 page's module (:mod:`rankcollapse.book.pages.fig2`).
"""

from __future__ import annotations

from rankcollapse.book.labels import mask_title, norm_label
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.shown import ShownFigure, figure_data
from rankcollapse.experiments.store import StoredResult

# a control's curve words: its norm's, then this
CONTROL_SUFFIX = ", no biases"


def controls_figure(result: StoredResult, metric: str, stem: str, weight_seed: int) -> ShownFigure:
    """The per-layer curves of ``metric`` of the stored ``controls`` part ``result``: one panel per mask, one
    curve per norm (its line style) and bias setting (with biases dark grey, without -- weights
    ``initialized_nobias`` -- light grey), titled with the ``weight_seed`` the weights were drawn with; shown
    as ``stem``, its cite block naming the run's parameters and key, drawing ``result``."""
    p = result.provenance["parameters"]
    table = result.table.copy()
    control = table["weights"] == "initialized_nobias"
    table["label"] = table["norm"].map(norm_label) + control.map({True: CONTROL_SUFFIX, False: ""})
    table["mask_title"] = table["mask"].map(lambda m: mask_title(m, p["window"]))
    table["panel"] = "initialized"
    title = f"initialized: U(±1/√d), weight seed {weight_seed}"
    fig = plotting.layer_curve_grid(table, metric, row="panel", col="mask_title", hue="label",
                                    titles={"initialized": title})
    return ShownFigure(stem, fig, {**p, "result": result.provenance["key"]}, figure_data([result]))
