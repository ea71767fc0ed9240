"""The figures of stored sweeps that several pages draw: per-layer curves of a metric over the masks and
weight sources (:func:`layer_figure`) and Fig. 4's token geometry (:func:`geometry_figure`), each returned as
a :class:`~rankcollapse.book.shown.ShownFigure` with its cite block's parameters and the results it draws.

Used by: the experiment pages' modules (:mod:`rankcollapse.book.pages`).
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.book.labels import mask_title, norm_label
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting.palette import temperature_words
from rankcollapse.book.shown import ShownFigure, figure_data
from rankcollapse.core.masks import WINDOWED_MASKS
from rankcollapse.experiments.store import StoredResult


def _weight_titles(provenance: dict) -> dict[str, str]:
    """Panel-title words naming the weights of each source, so initialized and pretrained cannot be mixed
    up."""
    params = provenance["parameters"]
    init = "U(±1/√d)" if params["init"] == "torch" else "N(0, 0.02)"
    return {"initialized": f"initialized: {init}, seed {params['seed']}",
            "pretrained": f"pretrained: {provenance['model_description'].split(' (')[0].split('/')[-1]}"}


def _curve_label(row: pd.Series) -> str:
    """The words of one configuration: the full transformer, or SAN with its norm and skip."""
    if row["variant"] != "SAN":
        return row["variant"]
    words = norm_label(row["norm"])
    if row.get("skip", False):
        words = words.replace("pure attention", "attention") + " + skip"
    return words


_HUES = {"norm": _curve_label, "temperature": lambda row: temperature_words(row["temperature"]),
         "n_samples": lambda row: f"{_curve_label(row)}, {row['n_samples']} samples"}


def _labelled(result: StoredResult, hue: str, panel_titles: dict[str, str] | None = None) -> pd.DataFrame:
    """``result``'s table with each row's curve words (``label``, by ``hue``) and panel title (``mask_title``;
    ``panel_titles`` maps a mask to other words). The full transformer, run under its model's own mask, is
    drawn in every mask's panel of its weights, as the reference it is."""
    table = result.table.copy()
    window = result.provenance["parameters"].get("window")
    table["label"] = table.apply(_HUES[hue], axis=1)
    table["mask_title"] = table["mask"].map(lambda m: (panel_titles or {}).get(m, mask_title(m, window)))
    full = table["mask"] == "model"
    if full.any() and not full.all():
        titles = table.loc[~full, "mask_title"].unique()
        table = pd.concat([table[~full], *(table[full].assign(mask_title=t) for t in titles)],
                          ignore_index=True)
    return table


def _figure_parameters(result: StoredResult) -> dict:
    """What a layer figure's cite block names: the stored run's parameters (``window`` only when one of its
    masks takes it), its weights and result key."""
    parameters = dict(result.provenance["parameters"])
    if not set(parameters.get("masks", ())) & set(WINDOWED_MASKS):
        parameters.pop("window", None)
    return {**parameters, "weights": _weight_titles(result.provenance),
            "result": result.provenance["key"],
            "pretrained_weight_sha256": result.provenance["weight_sha256"]}


def layer_figure(result: StoredResult, metric: str, stem: str, *, hue: str = "norm", ratio: bool = False,
                 panel_titles: dict[str, str] | None = None) -> ShownFigure:
    """The per-layer curves of ``metric`` (rows: weight sources; columns: masks, titled by ``panel_titles``
    where given; one curve per ``hue`` value of _HUES, styled by the book's palette), shown as ``stem`` with
    its notes' computed words (curves drawn on top of each other, axes cut below the floor:
    :func:`rankcollapse.book.plotting.overlap.caption_notes`). ``ratio``: the metric is a ratio, drawn with a
    dotted line at 1, on a linear axis where all its values lie within a factor 2 of each other (log ticks
    would then show only 10^0)."""
    table = _labelled(result, hue, panel_titles)
    fig = plotting.layer_curve_grid(table, metric, col="mask_title", hue="label",
                                    titles=_weight_titles(result.provenance))
    if ratio:
        values = table.loc[(table["metric"] == metric) & (table["layer"] >= 1), plotting.centre_of(metric)]
        linear = values.max() <= 2 * values.min()
    for ax in fig.axes if ratio else ():
        ax.axhline(1.0, color="0.3", lw=1.0, ls=":", zorder=0)
        if linear:  # the grid fitted a log range; a linear axis spans the ratios themselves
            ax.set_yscale("linear")
            ax.set_autoscaley_on(True)
            ax.relim()
            ax.autoscale_view(scalex=False)
    return _shown(stem, fig, result)


def _shown(stem: str, fig: Figure, result: StoredResult) -> ShownFigure:
    """``fig`` shown as ``stem``, citing ``result``'s parameters and weights, with its caption's notes."""
    return ShownFigure(stem, fig, _figure_parameters(result), figure_data([result]), notes=True)


def geometry_figure(result: StoredResult, stem: str) -> ShownFigure:
    """Fig. 4's token geometry (rank, σ_min, mean |cos|) per weight source, one line style per mask, shown as
    ``stem`` (its caption words as in :func:`layer_figure`)."""
    fig = plotting.geometry_grid(_labelled(result, "norm"), col="weights", hue="label",
                                 titles=_weight_titles(result.provenance))
    return _shown(stem, fig, result)
