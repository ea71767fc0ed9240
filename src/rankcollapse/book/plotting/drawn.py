"""The data a figure draws, read back from the drawing: one tidy row per point of every curve, band, marker,
bar and image cell, so a reader can download exactly what a figure shows (``<stem>.csv`` beside its PNG, SVG,
PDF and JSON, written by :func:`rankcollapse.book.plotting.common.export_figure`).

Read from the figure rather than from the table it was drawn from, the rows are what was plotted (the median
line, its 10-90 % band, the flagged layers), for the theory pages' arrays as for the stored results.

Used by: :mod:`rankcollapse.book.plotting.common`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_rgb
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D

from rankcollapse.book.plotting import settled

COLUMNS = ("panel", "panel_title", "x_label", "y_label", "series", "kind", "x", "y", "y_low", "y_high",
           "value")


def _named(label: str) -> bool:
    return bool(label) and not label.startswith("_")


def _rgb(colours) -> tuple[float, ...] | None:
    """The first colour of an artist's colour list (or a single colour), as rounded RGB; None when empty."""
    array = np.atleast_2d(np.asarray(colours, dtype=float)) if not isinstance(colours, str) else None
    if array is not None and array.size == 0:
        return None
    return tuple(np.round(to_rgb(colours if array is None else array[0][:3]), 4))


def _axes_rows(ax: Axes) -> list[dict]:
    """Rows of one panel (without its panel columns), its artists in the order they were drawn: an
    unlabelled band or marker belongs to the last curve drawn in its colour (its curve, as
    :func:`rankcollapse.book.plotting.common.plot_layer_curves` draws line, band, crosses)."""
    rows: list[dict] = []
    curve_of: dict[tuple, str] = {}  # colour -> the last labelled curve drawn in it
    for i, artist in enumerate(ax.get_children()):
        label = artist.get_label() if _named(str(artist.get_label())) else ""
        if isinstance(artist, Line2D):
            if artist.get_transform() is not ax.transData:  # axhline / axvline: a reference value, not data
                continue
            colour = _rgb(artist.get_color())
            if label:
                curve_of[colour] = label
            kind = ("settled" if artist.get_gid() == settled.GID else  # layers held, not computed
                    "line" if label or artist.get_linestyle() not in ("None", "", " ") else "markers")
            x, y = (np.asarray(v, dtype=float) for v in artist.get_data())
            rows += [{"series": label or curve_of.get(colour, f"line {i}"), "kind": kind, "x": a, "y": b}
                     for a, b in zip(x, y)]
        elif isinstance(artist, PolyCollection):  # fill_between: a band per x
            series = label or curve_of.get(_rgb(artist.get_facecolor()), f"band {i}")
            for path in artist.get_paths():
                edges = pd.DataFrame(path.vertices, columns=["x", "y"]).groupby("x")["y"]
                rows += [{"series": series, "kind": "band", "x": x, "y_low": low, "y_high": high}
                         for x, low, high in zip(edges.min().index, edges.min(), edges.max())]
        elif isinstance(artist, PathCollection):
            # scatter; unlabelled in a curve's colour: its flagged points
            colour = _rgb(artist.get_facecolor()) or _rgb(artist.get_edgecolor())
            series = label or curve_of.get(colour, "")
            rows += [{"series": series or f"points {i}",
                      "kind": "points" if label or not series else "markers",
                      "x": x, "y": y} for x, y in np.asarray(artist.get_offsets(), dtype=float)]
        elif isinstance(artist, AxesImage):
            rows += _image_rows(artist, label or "image")
    for container in ax.containers:
        if isinstance(container, BarContainer):
            rows += [{"series": container.get_label(), "kind": "bar", "x": bar.get_x() + bar.get_width() / 2,
                      "y": bar.get_y() + bar.get_height()} for bar in container]
    return rows


def _image_rows(image: AxesImage, series: str) -> list[dict]:
    """One row per cell of an image: its centre in data coordinates and its value."""
    values = np.asarray(image.get_array(), dtype=float)  # [row, column]
    left, right, bottom, top = image.get_extent()
    xs = left + (np.arange(values.shape[1]) + 0.5) * (right - left) / values.shape[1]
    ys = bottom + (np.arange(values.shape[0]) + 0.5) * (top - bottom) / values.shape[0]
    if image.origin == "upper":
        ys = ys[::-1]
    return [{"series": series, "kind": "image cell", "x": xs[c], "y": ys[r], "value": values[r, c]}
            for r in range(values.shape[0]) for c in range(values.shape[1])]


def drawn_table(fig: Figure) -> pd.DataFrame:
    """Every point ``fig`` draws: curves (``line``; flagged points ``markers``), quantile bands (``band``:
    ``y_low``..``y_high`` per x), scatter ``points``, ``bar`` tops and ``image cell`` values (``value`` at the
    cell's centre), one row each, with its panel's number, title and axis labels (columns :data:`COLUMNS`)."""
    rows = []
    for panel, ax in enumerate(fig.axes):
        words = {"panel": panel, "panel_title": ax.get_title(), "x_label": ax.get_xlabel(),
                 "y_label": ax.get_ylabel()}
        rows += [{**words, **row} for row in _axes_rows(ax)]
    return pd.DataFrame(rows, columns=list(COLUMNS))
