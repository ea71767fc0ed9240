"""One look for the whole book, figure export with provenance, and the pictures every page shares.

Figures are exported to ``<book root>/_build/figures/<stem>.{png,svg,pdf}`` with a ``<stem>.json`` sidecar;
the provenance record (:func:`rankcollapse.experiments.provenance.provenance_record`: parameters, versions,
git commit, time, hardware) is embedded in each file's metadata, so a downloaded figure still says where it
came from. The figure stem equals the figure's label (``fig-<page>-<what>``), so a citation, an anchor and a
file name agree.

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
from matplotlib.collections import PathCollection
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from matplotlib.text import Text

from rankcollapse import __version__
from rankcollapse.core.masks import describe_mask
from rankcollapse.core.metrics import FLOOR_OF
from rankcollapse.book.labels import mask_label
from rankcollapse.book.plotting import drawn, logaxis, overlap, palette, settled
from rankcollapse.experiments.provenance import atomic_write, book_root, provenance_record

# the metrics the engine tracks exactly below the floor (metric "exact")
_EXACT_METRICS = ("mu", "relative_mu")
_FIGURE_FORMATS = ("png", "svg", "pdf")


# The page a figure is read on: sphinx-book-theme's text column is 672 px wide at a 1280 px viewport, and
# myst-nb draws a glued figure as a PNG at ``figure.dpi`` (bbox tight), scaled down to fit the column.
COLUMN_PX = 672
SCREEN_DPI = 110
COLUMN_WIDTH_IN = COLUMN_PX / SCREEN_DPI  # a figure this wide is shown at its natural size
MIN_TEXT_PX = 9.0  # the smallest on-screen font size (px) a figure may use at the page's width


def set_theme() -> None:
    """The book's seaborn theme: white grid, colour-blind palette, fonts >= 11 pt; SVG text stays text; PDF
    and PS figures embed TrueType fonts (Type 42), never Type 3, which conference checks reject."""
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({"figure.dpi": SCREEN_DPI, "savefig.dpi": 200, "savefig.bbox": "tight",
                         "svg.hashsalt": "rankcollapse", "svg.fonttype": "none",
                         "pdf.fonttype": 42, "ps.fonttype": 42})


def figure_dir() -> Path:
    """``$RANKCOLLAPSE_FIGURE_DIR`` when set (tests, re-runs), else ``<book root>/_build/figures``."""
    override = os.environ.get("RANKCOLLAPSE_FIGURE_DIR")
    return Path(override) if override else book_root() / "_build" / "figures"


def export_figure(fig: Figure, stem: str, parameters: dict,
                  data: list[dict] | None = None) -> dict[str, Path]:
    """Save ``fig`` as PNG, SVG, PDF, its drawn points as CSV (:func:`drawn.drawn_table`) and a JSON
    provenance sidecar (``git_commit``: the rendering commit; ``data``: the stored results drawn, each with
    its commit)."""
    info = {**provenance_record(parameters), "data": data or [], "legibility": legibility(fig)}
    text = json.dumps(info, sort_keys=True, default=str)
    metadata = {
        "png": {"Title": stem, "Description": text, "Software": f"rankcollapse {__version__}"},
        "svg": {"Title": stem, "Description": text},
        "pdf": {"Title": stem, "Subject": text, "Creator": f"rankcollapse {__version__}"},
    }
    out = figure_dir()
    paths = {fmt: out / f"{stem}.{fmt}" for fmt in _FIGURE_FORMATS}
    for fmt, path in paths.items():
        atomic_write(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, metadata=metadata[fmt]))
    paths["json"] = out / f"{stem}.json"
    atomic_write(paths["json"], lambda tmp: Path(tmp).write_text(text + "\n"))
    paths["csv"] = out / f"{stem}.csv"  # the points it draws (plotting.drawn), a download beside the images
    atomic_write(paths["csv"], lambda tmp: drawn.drawn_table(fig).to_csv(tmp, index=False))
    return paths


def legibility(fig: Figure) -> dict:
    """What a reader's screen needs to know about ``fig``'s text: its smallest font size (pt) over all
    visible, non-empty texts, the dpi it is drawn at inline (``fig.dpi``; the exported PNG uses
    ``savefig.dpi``) and its width (inches).

    Shown ``shown_px`` wide from a PNG ``natural_px`` wide, the smallest text is
    ``min_font_pt * inline_dpi / 72 * shown_px / natural_px`` pixels high (what the notebook and site tests
    measure, ``tests/legibility.py``).
    """
    sizes = [text.get_fontsize() for text in fig.findobj(Text)
             if text.get_visible() and text.get_text().strip()]
    if not sizes:
        raise ValueError("fig has no visible text: a figure needs at least axis labels or a title")
    png_dpi = plt.rcParams["savefig.dpi"]
    return {"min_font_pt": float(min(sizes)), "inline_dpi": float(fig.dpi),
            "png_dpi": float(fig.dpi if png_dpi == "figure" else png_dpi),
            "width_in": float(fig.get_figwidth())}


_AXIS_LABELS = {
    "mu": r"$\mu(X)$",
    "relative_mu": r"$\mu(X)\,/\,\|X\|_F$",
    "norm": r"$\|X\|_F$",
    "floor": r"floor $\varepsilon\,\|X\|_F$",
    "numerical_rank": "numerical rank",
    "full_rank": "fraction at full rank",
    "sigma_min": r"$\sigma_{\min}(X)$",
    "mean_abs_cosine": r"mean $|\cos(x_i, x_j)|$",
    "mean_ratio": r"$\bar\mu_{\mathrm{first}}\,/\,\bar\mu_{\mathrm{all}}$",
}


def axis_label(metric: str) -> str:
    """The axis label of a metric, in math symbols (``mu`` -> $\\mu(X)$)."""
    if metric not in _AXIS_LABELS:
        raise ValueError(f"metric must be one of {sorted(_AXIS_LABELS)}, got {metric!r}")
    return _AXIS_LABELS[metric]


def panel_grid(n_panels: int, max_cols: int = 2, panel_height: float = 2.3,
               parent: Figure | SubFigure | None = None,
               **subplots_kw) -> tuple[Figure | SubFigure, np.ndarray]:
    """``n_panels`` axes wrapped into rows of at most ``max_cols``, on a figure one text column wide.

    Use it instead of ``plt.subplots(1, n)`` so that a figure's text stays legible at the page's width
    (a column-wide figure is shown at its natural size). Unused cells of the last row are removed.
    ``parent`` draws into an existing (sub)figure instead of a new one; ``subplots_kw`` go to
    ``subplots`` (``sharex``, ``sharey``, ...). Returns the (sub)figure and the axes in reading order.
    Shapes: axes [n_panels].
    """
    if n_panels < 1 or max_cols < 1:
        raise ValueError(f"n_panels and max_cols must be >= 1, got {n_panels} and {max_cols}")
    n_cols = min(max_cols, n_panels)
    n_rows = -(-n_panels // n_cols)
    if parent is None:
        parent = plt.figure(figsize=(COLUMN_WIDTH_IN, panel_height * n_rows + 0.6), layout="constrained")
    axes = parent.subplots(n_rows, n_cols, squeeze=False, **subplots_kw).ravel()
    for ax in axes[n_panels:]:
        ax.remove()
    return parent, axes[:n_panels]


def label_outer(axes, n_cols: int) -> None:
    """Tick and axis labels on the left column and under the lowest panel of each column only (also when
    the last row of a :func:`panel_grid` is short).  Shapes: axes [panel], in reading order."""
    for i, ax in enumerate(axes):
        lowest, left = i + n_cols >= len(axes), i % n_cols == 0
        ax.tick_params(labelbottom=lowest, labelleft=left)
        ax.xaxis.label.set_visible(lowest)
        ax.yaxis.label.set_visible(left)


def draw_floor(ax: Axes, floor: float, label: str = "rounding floor") -> None:
    """Shade everything at or below the dtype floor on a log-scaled y axis (call after plotting)."""
    low, high = ax.get_ylim()
    low, high = min(low, floor / 10), max(high, floor * 10)
    ax.axhspan(low, floor, color="0.85", zorder=0, label=label)
    ax.axhline(floor, color="0.45", lw=0.8, zorder=1)  # solid: a dashed line is a norm's style
    ax.set_ylim(low, high)


def draw_mask(ax: Axes, mask: torch.Tensor, title: str, colour: str = palette.NEUTRAL) -> None:
    """Adjacency picture of a mask, in ``colour`` (its palette colour): row i, column j filled when token i
    attends to j; center nodes marked in the margin and the radius in the title.

    Shapes: mask [token, token] bool.
    """
    graph = describe_mask(mask)
    ax.imshow(mask.numpy().astype(float), cmap=ListedColormap(["white", colour]), vmin=0, vmax=1,
              interpolation="nearest")
    n = mask.shape[0]
    ax.set_xticks(np.arange(-0.5, n, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, n, 1), minor=True)
    ax.grid(which="minor", color="0.8", lw=0.4)
    ax.grid(which="major", visible=False)
    ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    if graph.centers:
        centers = ax.scatter(list(graph.centers), [-1.1] * len(graph.centers), marker="v", s=28,
                             color="black", clip_on=False, zorder=3)
        palette.describe(centers, series="center nodes", colour_encodes="guide")
    radius = "none" if graph.radius is None else graph.radius
    ax.set_title(f"{title}\nradius r = {radius}")
    ax.set_xlabel("attends to token j")
    ax.set_ylabel("token i")


_LEGEND_COLUMN_CHARS = 30  # longer legend labels go one per row, or the legend would outgrow the column
_FLOOR_CROSS = {"marker": "x", "s": 34, "linewidths": 1.6, "zorder": 4}
FLOOR_CROSS_LABEL = f"within {10:g}x of its floor"
_MARK_EVERY = (0.02, 0.16)  # a curve's mask markers: every this fraction of the panel's diagonal


# The statistic over samples a figure draws, the one the verdicts use: the median with its 10-90 % band,
# except for a share of samples (an indicator's mean is the share; its quantiles are 0 or 1, no band is
# drawn).
_SHARE_METRICS = ("full_rank",)


def centre_of(metric: str) -> str:
    """The column a figure draws for ``metric``: ``median``, or ``mean`` for a share of samples."""
    return "mean" if metric in _SHARE_METRICS else "median"


def plot_layer_curves(ax: Axes, table, metric: str = "mu", hue: str = "label", *, centre: str | None = None,
                      band: tuple[str, str] = ("q10", "q90"), log_x: bool = True, log_y: bool = True,
                      floor: bool = True, flag_factor: float = 10.0, styles: dict | None = None) -> None:
    """Per-layer curves of one metric from a tidy experiments table, one line per ``hue`` value.

    The line is the ``centre`` statistic over samples (default :func:`centre_of`: the median, which the
    verdicts use), the band spans ``band`` (default the 10-90 % quantiles; none for a share of samples). With
    ``floor``, the metric's own rounding floor (``metrics.FLOOR_OF``: eps·‖X‖_F for μ, eps for
    μ/‖X‖_F, rtol·σ_max for σ_min; the largest median floor of the panel's SAN curves) is shaded via
    :func:`draw_floor`, and layers whose centre lies within ``flag_factor`` of that curve's own floor
    (rounding noise, not an equilibrium) are marked with an ``x`` -- except where the engine tracked μ
    exactly (metric ``exact`` = 1), whose values below the floor are measured, not noise. Layers not computed
    because the curve had settled on its floor are drawn dotted (:mod:`rankcollapse.book.plotting.settled`).
    ``styles`` maps ``hue`` values to their :class:`~rankcollapse.book.plotting.palette.CurveStyle` (default
    :func:`rankcollapse.book.plotting.palette.curve_styles`: a mask's colour and marker, a norm's line style);
    everything drawn is described for the figure's data (:func:`palette.describe`); log-log from layer 1.
    Shapes: ``table`` has columns layer, metric, ``hue``, ``centre`` and the ``band`` columns.
    """
    rows = table[table["metric"] == metric]
    if log_x:
        rows = rows[rows["layer"] >= 1]
    floor_metric = FLOOR_OF.get(metric)
    floors = table[(table["metric"] == floor_metric) & (table["layer"] >= (1 if log_x else 0))]
    band_floors = (floors[floors["variant"] == "SAN"]
                   if "variant" in floors and (floors["variant"] == "SAN").any() else floors)
    floor_value = float(band_floors.groupby(hue)["median"].max().min()) if floor and len(floors) else None
    exact = (table[(table["metric"] == "exact") & (table["median"] == 1)] if metric in _EXACT_METRICS
             else table[:0])
    styles = styles or palette.curve_styles(rows, hue)
    centre = centre or centre_of(metric)
    for name, curve in rows.groupby(hue, sort=False):
        style = styles[name]
        dims = {**style.dims, "series": str(name)}
        curve, held = settled.split(curve.sort_values("layer"), table[table[hue] == name])
        line, = ax.plot(curve["layer"], curve[centre], color=style.colour, lw=1.8, label=name,
                        ls=style.linestyle, marker=style.marker, markevery=_MARK_EVERY, ms=4.5)
        palette.describe(line, **dims)
        if metric not in _SHARE_METRICS:
            band_of = ax.fill_between(curve["layer"], curve[band[0]], curve[band[1]], color=style.colour,
                                      alpha=0.18, lw=0, gid=logaxis.BAND)
            palette.describe(band_of, **dims)
        if floor_value is not None:
            own = floors[floors[hue] == name].groupby("layer")["median"].max()  # this curve's floor per layer
            tracked = set(exact.loc[exact[hue] == name, "layer"])  # layers measured exactly below the floor
            low = curve[(curve[centre].to_numpy() <= flag_factor * own.reindex(curve["layer"]).to_numpy())
                        & ~curve["layer"].isin(tracked).to_numpy()]
            crosses = ax.scatter(low["layer"], low[centre], color=style.colour, **_FLOOR_CROSS)
            palette.describe(crosses, **dims, kind="markers")
        settled.draw(ax, held, centre, style.colour, dims)
    if log_x:
        ax.set_xscale("log")
        logaxis.layer_ticks(ax)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("layer $t$")
    ax.set_ylabel(axis_label(metric))
    if floor_value is not None:
        draw_floor(ax, floor_value, label="dtype floor")


def figure_legend(fig: Figure, axes, floor_cross: bool = False, n_cols: int | None = None,
                  entries: dict[str, object] | None = None, cell: Axes | None = None) -> None:
    """One legend for the whole figure, below the panels (or in the empty grid ``cell``): ``entries`` (label
    -> handle; default the union of the panels' entries), then the guides -- the shaded floor, an entry for
    the floor crosses when ``floor_cross``, the settled layers' line -- after every series; ``n_cols``
    columns, by default two when the labels are short enough to keep the legend inside the text column."""
    found: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    guides = {label: found.pop(label) for label in [k for k in found if k in logaxis.FLOOR_LABELS]}
    if floor_cross:
        guides[FLOOR_CROSS_LABEL] = Line2D([], [], color="0.2", marker="x", ls="", markersize=7, mew=1.6)
    entries = (found if entries is None else entries) | guides | settled.legend_entries(axes)
    if cell is not None:
        cell.axis("off")
        cell.legend(list(entries.values()), list(entries), loc="center", frameon=False)
    else:
        _place_legend(fig, entries, n_cols)


def _place_legend(fig: Figure, entries: dict[str, object], n_cols: int | None = None) -> None:
    """The legend of ``entries`` (label -> handle) below the panels, in ``n_cols`` columns (default two
    when the labels are short enough to keep it inside the text column)."""
    n_cols = n_cols or (2 if max(map(len, entries)) <= _LEGEND_COLUMN_CHARS else 1)
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=n_cols, frameon=False)


def empty_cell(parent: Figure | SubFigure, axes, n_cols: int) -> Axes | None:
    """The cells a :func:`panel_grid` of ``axes`` leaves empty in its last row, as one axes (for a legend), or
    None when the grid is full."""
    if len(axes) % n_cols == 0:
        return None
    grid = axes[-1].get_subplotspec().get_gridspec()
    row, col = divmod(len(axes), n_cols)
    return parent.add_subplot(grid[row, col:])


def _panel_dims(rows) -> dict:
    """The dimensions one panel's rows share (its weights, its mask, ...), the full transformer's aside."""
    san = rows[rows["mask"] != "model"] if "mask" in rows else rows
    return next(iter(palette.curve_dims(san.assign(_panel=0), "_panel").values()), {})


def layer_curve_grid(table, metric: str = "mu", row: str = "weights", col: str = "mask", hue: str = "norm",
                     titles: dict | None = None, max_cols: int = 2, panel_height: float = 2.1) -> Figure:
    """Panels of :func:`plot_layer_curves`, one block per ``row`` value (titled, shared axes) with the
    ``col`` values wrapped into rows of ``max_cols``; one text column wide, one legend below with one entry
    per meaning (:func:`palette.style_entries`: masks, non-mask values, norms), not per curve.

    ``titles`` maps a row or column value to the words of its titles (e.g. the weights' names).
    With ``row="metric"`` each block shows its own metric (the floor only on the mu blocks).
    Shapes: ``table`` is a tidy experiments table.
    """
    titles = titles or {}
    helpers = {*FLOOR_OF.values(), "exact", settled.SETTLED_METRIC}  # qualify other metrics; never a row
    row_values = [v for v in dict.fromkeys(table[row]) if row != "metric" or v not in helpers]
    col_values = list(dict.fromkeys(table[col]))
    block_rows = -(-len(col_values) // min(max_cols, len(col_values)))
    panel_height = max(panel_height, 3.0) if len(col_values) == 1 else panel_height  # a lone panel: less flat
    fig = plt.figure(figsize=(COLUMN_WIDTH_IN, len(row_values) * (panel_height * block_rows + 0.45) + 0.7),
                     layout="constrained")
    drawn_rows = table[~table["metric"].isin(helpers)]
    all_axes, styles = [], palette.curve_styles(drawn_rows, [row, col, hue])  # by panel and curve
    for block, r in zip(fig.subfigures(len(row_values), 1, squeeze=False).ravel(), row_values):
        block.suptitle(titles.get(r, axis_label(r) if row == "metric" else r), fontweight="bold")
        _, axes = panel_grid(len(col_values), max_cols, parent=block, sharex=True, sharey=True)
        for ax, c in zip(axes, col_values):
            own = {key[-1]: style for key, style in styles.items() if key[:2] == (r, c)}
            if row == "metric":
                rows = table[table[col] == c]
                plot_layer_curves(ax, rows, r, hue=hue, floor=r in FLOOR_OF, styles=own)
            else:
                rows = table[(table[row] == r) & (table[col] == c)]
                plot_layer_curves(ax, rows, metric, hue=hue, styles=own)
            palette.describe(ax, **_panel_dims(rows))
            ax.set_title(titles.get(c, c))
        label_outer(axes, min(max_cols, len(col_values)))
        if all(ax.get_yscale() == "log" for ax in axes):  # one range for the block, cut below its floor
            logaxis.fit_log_axes(axes, logaxis.shaded_floor(axes))
            logaxis.min_log_ticks(axes[0])
        # each panel's limits were its own: span them all
        for ax in axes if axes[0].get_yscale() != "log" else ():
            ax.set_autoscaley_on(True)
            ax.autoscale_view(scalex=False)
        all_axes.extend(axes)
    # every panel one mask: its title names it
    named = all("mask" in palette.description(ax) for ax in all_axes)
    entries = palette.style_entries(styles, masks_named=named)
    crosses = any(isinstance(c, PathCollection) and len(c.get_offsets())
                  for ax in all_axes for c in ax.collections)
    overlap.restyle_coinciding(fig)
    cell = empty_cell(block, axes, min(max_cols, len(col_values)))  # the last block's spare cell, if any
    figure_legend(fig, all_axes, floor_cross=crosses, entries=entries, cell=cell)
    return fig


# rows, words
_GEOMETRY_METRICS = {"full_rank": "rank share", "sigma_min": "σ_min", "mean_abs_cosine": "mean |cos|"}


def geometry_grid(table, col: str = "weights", hue: str = "label", titles: dict | None = None) -> Figure:
    """Fig. 4's token geometry: rows = _GEOMETRY_METRICS (sigma_min on a log axis, cut below its floor as
    :func:`logaxis.fit_log_axes` does), columns = ``col`` (shared axes per row); a curve per ``hue`` value and
    mask, each mask in its colour and marker, each norm in its line style; one text column wide, one legend
    below with one entry per mask and per norm.

    Shapes: ``table`` is a tidy experiments table.
    """
    titles = titles or {}
    col_values = list(dict.fromkeys(table[col]))
    fig = plt.figure(figsize=(COLUMN_WIDTH_IN, 2.2 * len(_GEOMETRY_METRICS) + 1.6), layout="constrained")
    axes = fig.subplots(len(_GEOMETRY_METRICS), len(col_values), squeeze=False, sharex=True, sharey="row")
    curves = table.assign(curve=table[hue] + ", " + table["mask"].map(mask_label)) \
        if table["mask"].nunique() > 1 else table.assign(curve=table[hue])
    styles = palette.curve_styles(curves[~curves["metric"].isin(FLOOR_OF.values())], "curve")
    for i, metric in enumerate(_GEOMETRY_METRICS):
        for j, c in enumerate(col_values):
            ax = axes[i, j]
            rows = curves[curves[col] == c]
            plot_layer_curves(ax, rows, metric, hue="curve", log_x=False, log_y=metric == "sigma_min",
                              floor=metric in FLOOR_OF, styles=styles)
            palette.describe(ax, **_panel_dims(rows))
            # the panel's name in words
            ax.set_label(f"{titles.get(c, c).split(':')[0]} {_GEOMETRY_METRICS[metric]}")
            if i == 0:
                ax.set_title(titles.get(c, c))
        if metric == "sigma_min":
            logaxis.fit_log_axes(axes[i], logaxis.shaded_floor(axes[i]))
    label_outer(axes.ravel(), len(col_values))
    overlap.restyle_coinciding(fig)
    figure_legend(fig, axes.ravel(), floor_cross=True, entries=palette.style_entries(styles))
    return fig
