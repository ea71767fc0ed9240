"""The data a figure draws, read back from the drawing: one tidy row per point of every curve, band, marker,
bar and image cell, so a reader can download exactly what a figure shows (``<stem>.csv`` beside its PNG, SVG,
PDF and JSON, written by :func:`rankcollapse.book.plotting.common.export_figure`).

Read from the figure rather than from the table it was drawn from, the rows are what was plotted (the median
line, its 10-90 % band, the flagged layers), for the theory pages' arrays as for the stored results. Each row
names every dimension its series and panel are described by
(:func:`rankcollapse.book.plotting.palette.describe`: weights, mask, norm, temperature, ...) and how it is
drawn (colour, what the colour encodes, marker, line style), in one line of plain text per field.

Used by: :mod:`rankcollapse.book.plotting.common`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_hex, to_rgb
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D, _get_dash_pattern

from rankcollapse.book.plotting import palette, settled

COLUMNS = ("panel", "panel_title", "x_label", "y_label", "series", "kind", "x", "y", "y_low", "y_high",
           "value")
STYLE_COLUMNS = ("colour", "colour_encodes", "marker", "line_style")
# A line style in words, by its dash pattern (the norms' styles and matplotlib's named ones)
_STYLE_WORDS = {"-": "solid", (0, (5, 2)): "dashed", (0, (1, 1.3)): "dotted",
                (0, (5, 1.5, 1, 1.5)): "dash-dot", (0, (5, 1.5, 1, 1.5, 1, 1.5)): "dash-dot-dot",
                "--": "dashed", ":": "dotted", "-.": "dash-dot"}
_WORDS_OF = {_get_dash_pattern(style): words for style, words in reversed(_STYLE_WORDS.items())}
# Math text of labels and titles as plain words (a CSV field holds no TeX)
_TEX = {r"\mu": "μ", r"\varepsilon": "ε", r"\lambda": "λ", r"\sigma": "σ", r"\min": "min", r"\log": "log",
        r"\|": "‖", r"\Vert": "‖", r"\cos": "cos", r"\,": " ", r"\mathrm": "", r"\bar": "",
        r"\sqrt": "√",
        r"\cdot": "·", r"\times": "×", r"\le": "≤", "{": "", "}": "", "$": ""}


def plain(text: object) -> str:
    """A label, title or value as one line of plain text: newlines made spaces, math text as words.

    >>> plain("initialized:\\n$d_{QK} = 1/64$")
    'initialized: d_QK = 1/64'
    """
    words = " ".join(str(text).split())
    for tex, plain_words in _TEX.items():
        words = words.replace(tex, plain_words)
    return words


def style_words(line: Line2D) -> str:
    """A line's style in words (``solid``, ``dashed``, ...; its dash pattern when it has no name)."""
    pattern = line._unscaled_dash_pattern  # (offset, dashes or None), as set, before the line width scales it
    return _WORDS_OF.get(pattern, str(pattern[1]))


def _named(label: str) -> bool:
    return bool(label) and not label.startswith("_")


def _rgb(colours) -> tuple[float, ...] | None:
    """The first colour of an artist's colour list (or a single colour), as rounded RGB; None when empty."""
    array = np.atleast_2d(np.asarray(colours, dtype=float)) if not isinstance(colours, str) else None
    if array is not None and array.size == 0:
        return None
    return tuple(np.round(to_rgb(colours if array is None else array[0][:3]), 4))


def _colour_of(artist) -> tuple[float, ...] | None:
    """The colour an artist draws in (a line's, a collection's face or edge), as rounded RGB."""
    if isinstance(artist, Line2D):
        return _rgb(artist.get_color())
    if isinstance(artist, (PolyCollection, PathCollection)):
        return _rgb(artist.get_facecolor()) or _rgb(artist.get_edgecolor())
    return None


def _look(artist, colour) -> dict:
    """How ``artist`` draws: its colour (hex), marker and line style (lines)."""
    look = {"colour": to_hex(colour) if colour is not None else ""}
    if isinstance(artist, Line2D):
        marker = artist.get_marker()
        look |= {"marker": "" if marker in (None, "None", "", " ") else str(marker),
                 "line_style": "none" if artist.get_linestyle() in ("None", "", " ") else style_words(artist)}
    return look


def _axes_rows(ax: Axes) -> list[dict]:
    """Rows of one panel (without its panel columns), its artists in the order they were drawn, each with
    what :func:`palette.describe` recorded of it. An undescribed, unlabelled band or marker belongs to the
    last curve drawn in its colour (its curve, as a line, band and crosses are drawn), and is described as
    it is."""
    rows: list[dict] = []
    curve_of: dict[tuple, str] = {}  # colour -> the last labelled or described curve drawn in it
    dims_of: dict[tuple, dict] = {}  # colour -> that curve's description
    for i, artist in enumerate(ax.get_children()):
        label = artist.get_label() if _named(str(artist.get_label())) else ""
        dims = palette.description(artist)
        named, kind = dims.pop("series", ""), dims.pop("kind", None)
        if not dims and not label:  # a curve's own band or markers: its description
            dims = dict(dims_of.get(_colour_of(artist), {}))
        if isinstance(artist, Line2D):
            if artist.get_transform() is not ax.transData:  # axhline / axvline: a reference value, not data
                continue
            colour = _rgb(artist.get_color())
            if label or named or dims:
                curve_of[colour], dims_of[colour] = named or label or curve_of.get(colour, f"line {i}"), dims
            kind = kind or ("settled" if artist.get_gid() == settled.GID else  # layers held, not computed
                            "line" if label or artist.get_linestyle() not in ("None", "", " ") else "markers")
            x, y = (np.asarray(v, dtype=float) for v in artist.get_data())
            series = named or label or curve_of.get(colour, f"line {i}")
            rows += [{"series": series, "kind": kind, "x": a, "y": b, **dims, **_look(artist, colour)}
                     for a, b in zip(x, y)]
        elif isinstance(artist, PolyCollection):  # fill_between: a band per x
            colour = _rgb(artist.get_facecolor())
            series = named or label or curve_of.get(colour, f"band {i}")
            for path in artist.get_paths():
                edges = pd.DataFrame(path.vertices, columns=["x", "y"]).groupby("x")["y"]
                rows += [{"series": series, "kind": "band", "x": x, "y_low": low, "y_high": high, **dims,
                          **_look(artist, colour)}
                         for x, low, high in zip(edges.min().index, edges.min(), edges.max())]
        elif isinstance(artist, PathCollection):
            # scatter; unlabelled in a curve's colour: its flagged points
            colour = _rgb(artist.get_facecolor()) or _rgb(artist.get_edgecolor())
            series = named or label or curve_of.get(colour, "")
            kind = kind or ("points" if label or named or not series else "markers")
            rows += [{"series": series or f"points {i}", "kind": kind, "x": x, "y": y, **dims,
                      **_look(artist, colour)} for x, y in np.asarray(artist.get_offsets(), dtype=float)]
        elif isinstance(artist, AxesImage):
            rows += [{**row, **dims} for row in _image_rows(artist, named or label or "image")]
    for container in ax.containers:
        if isinstance(container, BarContainer):
            for bar in container:
                bar_dims = palette.description(bar)
                x = bar_dims.pop("x", bar.get_x() + bar.get_width() / 2)  # a category's name, where described
                rows.append({"series": bar_dims.pop("series", container.get_label()), "kind": "bar", "x": x,
                             "y": bar.get_y() + bar.get_height(), **bar_dims,
                             **_look(bar, _rgb(bar.get_facecolor()))})
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
    cell's centre), one row each, with its panel's number, title and axis labels (columns :data:`COLUMNS`),
    then every dimension described in the figure (:data:`palette.DIMENSIONS` first) and the drawing's columns
    (:data:`STYLE_COLUMNS`). Every text field is one line of plain text (:func:`plain`)."""
    rows = []
    for panel, ax in enumerate(fig.axes):
        words = {"panel": panel, "panel_title": ax.get_title(), "x_label": ax.get_xlabel(),
                 "y_label": ax.get_ylabel(), **palette.description(ax)}
        rows += [{**words, **row} for row in _axes_rows(ax)]
    found = list(dict.fromkeys(k for row in rows for k in row))
    dims = [d for d in palette.DIMENSIONS if d in found] + sorted(
        k for k in found if k not in (*COLUMNS, *STYLE_COLUMNS, *palette.DIMENSIONS))
    table = pd.DataFrame(rows, columns=[*COLUMNS, *dims, *STYLE_COLUMNS])
    for column in table.columns:
        if table[column].dtype == object or pd.api.types.is_string_dtype(table[column]):
            table[column] = [v if v is None or isinstance(v, (bool, float, int)) else plain(v)
                             for v in table[column]]
    return table
