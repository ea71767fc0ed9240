"""One look for the whole book, figure export with provenance, and the pictures every page shares.

Figures are exported to ``<book root>/_build/figures/<stem>.{png,svg,pdf}`` with a ``<stem>.json``
sidecar; the provenance record (:func:`rankcollapse.provenance.provenance_record`: parameters, versions,
git commit, time, hardware) is embedded in each file's metadata, so a downloaded figure still says where
it came from. The figure stem equals the figure's label
(``fig-<page>-<what>``), so a citation, an anchor and a file name agree.

Used by: every page of the book.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from rankcollapse import __version__
from rankcollapse.masks import describe_mask
from rankcollapse.provenance import atomic_write, book_root, provenance_record

FIGURE_FORMATS = ("png", "svg", "pdf")


def set_theme() -> None:
    """The book's seaborn theme: white grid, colour-blind palette, readable at page width."""
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 200, "savefig.bbox": "tight", "svg.hashsalt": "rankcollapse"})


def figure_dir() -> Path:
    """``$RANKCOLLAPSE_FIGURE_DIR`` when set (tests, re-runs), else ``<book root>/_build/figures``."""
    override = os.environ.get("RANKCOLLAPSE_FIGURE_DIR")
    return Path(override) if override else book_root() / "_build" / "figures"


def export_figure(fig: Figure, stem: str, parameters: dict) -> dict[str, Path]:
    """Save ``fig`` as PNG, SVG and PDF plus a JSON provenance sidecar; returns the paths by format."""
    info = provenance_record(parameters)
    text = json.dumps(info, sort_keys=True, default=str)
    metadata = {
        "png": {"Title": stem, "Description": text, "Software": f"rankcollapse {__version__}"},
        "svg": {"Title": stem, "Description": text},
        "pdf": {"Title": stem, "Subject": text, "Creator": f"rankcollapse {__version__}"},
    }
    out = figure_dir()
    paths = {fmt: out / f"{stem}.{fmt}" for fmt in FIGURE_FORMATS}
    for fmt, path in paths.items():
        atomic_write(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, metadata=metadata[fmt]))
    paths["json"] = out / f"{stem}.json"
    atomic_write(paths["json"], lambda tmp: Path(tmp).write_text(text + "\n"))
    return paths


def glue_figure(key: str, fig: Figure, stem: str | None = None, parameters: dict | None = None) -> None:
    """Export (when ``stem`` is given), glue for ``{glue:figure}`` and close, so it shows once."""
    from myst_nb import glue

    if stem is not None:
        export_figure(fig, stem, parameters or {})
    glue(key, fig, display=False)
    plt.close(fig)


def draw_floor(ax: Axes, floor: float, label: str = "rounding floor") -> None:
    """Shade everything at or below the dtype floor on a log-scaled y axis (call after plotting)."""
    low, high = ax.get_ylim()
    low, high = min(low, floor / 10), max(high, floor * 10)
    ax.axhspan(low, floor, color="0.88", zorder=0, label=label)
    ax.axhline(floor, color="0.45", lw=0.8, ls="--", zorder=1)
    ax.set_ylim(low, high)


def draw_mask(ax: Axes, mask: torch.Tensor, title: str) -> None:
    """Adjacency picture of a mask: row i, column j filled when token i attends to j; center nodes
    marked in the margin and the radius in the title.

    Shapes: mask [token, token] bool.
    """
    graph = describe_mask(mask)
    colour = sns.color_palette("colorblind")[0]
    ax.imshow(mask.numpy().astype(float), cmap=ListedColormap(["white", colour]), vmin=0, vmax=1, interpolation="nearest")
    n = mask.shape[0]
    ax.set_xticks(np.arange(-0.5, n, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, n, 1), minor=True)
    ax.grid(which="minor", color="0.8", lw=0.4)
    ax.grid(which="major", visible=False)
    ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    if graph.centers:
        ax.scatter(list(graph.centers), [-1.1] * len(graph.centers), marker="v", s=28, color="C3", clip_on=False, zorder=3)
    radius = "none" if graph.radius is None else graph.radius
    ax.set_title(f"{title}\nradius r = {radius}", fontsize=10)
    ax.set_xlabel("attends to token j")
    ax.set_ylabel("token i")


def plot_layer_curves(ax: Axes, table, metric: str = "mu", hue: str = "label", *, centre: str = "mean",
                      band: tuple[str, str] = ("q10", "q90"), log_x: bool = True, log_y: bool = True,
                      floor: bool = True, flag_factor: float = 10.0, dashed: tuple[str, ...] = ()) -> None:
    """Per-layer curves of one metric from a tidy experiments table, one line per ``hue`` value.

    The line is the ``centre`` statistic over samples, the band spans ``band`` (default the 10-90 %
    quantiles). With ``floor``, the dtype floor of the panel (largest median floor of its SAN curves) is
    shaded via :func:`draw_floor`, and layers whose centre lies within ``flag_factor`` of that curve's
    own floor (rounding noise, not an equilibrium) are marked with an ``x``. ``hue`` values in
    ``dashed`` are drawn dashed (curves that may overlap others).
    Log-log axes start at layer 1 when ``log_x`` (X(0) has no place on a log axis).
    Shapes: ``table`` has columns layer, metric, ``hue``, ``centre`` and the ``band`` columns.
    """
    rows = table[table["metric"] == metric]
    if log_x:
        rows = rows[rows["layer"] >= 1]
    floors = table[(table["metric"] == "floor") & (table["layer"] >= (1 if log_x else 0))]
    band_floors = floors[floors["variant"] == "SAN"] if "variant" in floors and (floors["variant"] == "SAN").any() else floors
    floor_value = float(band_floors["median"].max()) if floor and len(floors) else None  # SAN curves' floor
    palette = sns.color_palette("colorblind", n_colors=max(1, rows[hue].nunique()))
    for colour, (name, curve) in zip(palette, rows.groupby(hue, sort=False)):
        curve = curve.sort_values("layer")
        ax.plot(curve["layer"], curve[centre], color=colour, lw=1.6, label=name, ls="--" if name in dashed else "-")
        ax.fill_between(curve["layer"], curve[band[0]], curve[band[1]], color=colour, alpha=0.2, lw=0)
        if floor_value is not None:
            own = floors[floors[hue] == name].groupby("layer")["median"].max()  # this curve's floor per layer
            low = curve[curve[centre].to_numpy() <= flag_factor * own.reindex(curve["layer"]).to_numpy()]
            ax.scatter(low["layer"], low[centre], marker="x", color=colour, s=18, zorder=4)
    if log_x:
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("layer t")
    ax.set_ylabel(metric)
    if floor_value is not None:
        draw_floor(ax, floor_value, label="dtype floor")


def layer_curve_grid(table, metric: str = "mu", row: str = "weights", col: str = "mask", hue: str = "norm",
                     titles: dict | None = None, panel_size: tuple[float, float] = (3.2, 2.7),
                     dashed: tuple[str, ...] = ()) -> Figure:
    """A grid of :func:`plot_layer_curves` panels, ``row`` x ``col``, one legend for the ``hue`` values.

    ``titles`` maps a row or column value to the words of its panel titles (e.g. the weights' names).
    With ``row="metric"`` each row shows its own metric (the floor only on the mu rows).
    Shapes: ``table`` is a tidy experiments table.
    """
    titles = titles or {}
    row_values = [v for v in dict.fromkeys(table[row]) if row != "metric" or v != "floor"]
    col_values = list(dict.fromkeys(table[col]))
    fig, axes = plt.subplots(len(row_values), len(col_values), squeeze=False, sharex=True,
                             figsize=(panel_size[0] * len(col_values), panel_size[1] * len(row_values)))
    for i, r in enumerate(row_values):
        for j, c in enumerate(col_values):
            ax = axes[i, j]
            if row == "metric":
                panel = table[table[row].isin([r, "floor"]) & (table[col] == c)]
                plot_layer_curves(ax, panel, r, hue=hue, floor=r in ("mu", "relative_mu"))
            else:
                plot_layer_curves(ax, table[(table[row] == r) & (table[col] == c)], metric, hue=hue, dashed=dashed)
            ax.set_title(f"{titles.get(r, r)}\n{titles.get(c, c)}", fontsize=9)
            if j:
                ax.set_ylabel("")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


GEOMETRY_METRICS = {"full_rank": "fraction at full rank", "sigma_min": "smallest singular value",
                    "mean_abs_cosine": "mean pairwise |cos|"}


def geometry_grid(table, col: str = "weights", hue: str = "label", titles: dict | None = None) -> Figure:
    """Fig. 4's token geometry: rows = GEOMETRY_METRICS (sigma_min on a log axis), columns = ``col``.

    Shapes: ``table`` is a tidy experiments table.
    """
    titles = titles or {}
    col_values = list(dict.fromkeys(table[col]))
    fig, axes = plt.subplots(len(GEOMETRY_METRICS), len(col_values), squeeze=False, sharex=True,
                             figsize=(4.6 * len(col_values), 2.6 * len(GEOMETRY_METRICS)))
    for i, (metric, words) in enumerate(GEOMETRY_METRICS.items()):
        for j, c in enumerate(col_values):
            ax = axes[i, j]
            plot_layer_curves(ax, table[table[col] == c], metric, hue=hue, log_x=False,
                              log_y=metric == "sigma_min", floor=False)
            ax.set_ylabel(words if j == 0 else "")
            if metric == "sigma_min":
                ax.set_ylim(bottom=max(ax.get_ylim()[0], 1e-20))  # below this only underflow remains
            if i == 0:
                ax.set_title(titles.get(c, c), fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig
