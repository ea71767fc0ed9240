"""Which curves of a figure a reader can tell apart, computed from the plotted data (not the picture).

A legend entry is *hidden* where most of its drawn points lie within a pixel of another entry's line in the
same panel (points in display pixels at the figure's inline dpi, the size it is shown at). Curves that
coincide are named in the figure's notes (:func:`coincidence_words`, glued under the figure) and drawn so that
each stays visible: markers of its own fill placed at other layers than its partners'
(:func:`restyle_coinciding`).

Used by: :func:`rankcollapse.book.plotting.common.layer_curve_grid`, ``book/report.py`` (the caption words),
tests/unit/test_figure_legibility.py (every legend entry visible or named).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rankcollapse.book.plotting import logaxis
from rankcollapse.book.plotting.logaxis import panel_name

PIXEL = 1.0  # two drawn points closer than this (display px at the inline dpi) cannot be told apart
# an entry with more of its points than this within PIXEL of another entry's line is hidden
HIDDEN_FRACTION = 0.5
_FILLS = ("full", "none", "left", "bottom", "right", "top")  # a coinciding curve's markers: their fill
# markers every this fraction of the axes' diagonal, shifted per curve so they do not overlap
_MARK_STEP = 0.09


@dataclass(frozen=True)
class Coincidence:
    """Entries whose curves are drawn within a pixel of each other in ``panels``, their values there
    differing by at most ``largest_difference`` (relative, |a / b - 1|, on log y axes; absolute,
    |a - b|, on linear ones: ``relative`` says which)."""

    labels: tuple[str, ...]
    panels: tuple[str, ...]
    n_panels: int
    largest_difference: float
    relative: bool = True


def entry_lines(ax: Axes) -> dict[str, list[Line2D]]:
    """The panel's curves by legend label (lines whose label starts with ``_`` are not legend entries)."""
    lines: dict[str, list[Line2D]] = {}
    for line in ax.get_lines():
        if not line.get_label().startswith("_") and line.get_visible():
            lines.setdefault(line.get_label(), []).append(line)
    return lines


def drawn_pixels(line: Line2D) -> np.ndarray:
    """The points of ``line`` that are drawn (finite, inside its panel), in display pixels.

    Shapes: -> [point, 2].
    """
    x, y = (np.asarray(v, dtype=float) for v in line.get_data())
    ax = line.axes
    ok = np.isfinite(x) & np.isfinite(y)
    if ax.get_yscale() == "log":
        ok &= y > 0
    if ax.get_xscale() == "log":
        ok &= x > 0
    pixels = ax.transData.transform(np.column_stack([x[ok], y[ok]])) if ok.any() else np.zeros((0, 2))
    box = ax.bbox
    inside = (pixels[:, 0] >= box.x0 - PIXEL) & (pixels[:, 0] <= box.x1 + PIXEL) \
        & (pixels[:, 1] >= box.y0 - PIXEL) & (pixels[:, 1] <= box.y1 + PIXEL)
    return pixels[inside]


def _distance_to_polyline(points: np.ndarray, path: np.ndarray) -> np.ndarray:
    """Each point's distance to the nearest segment of ``path`` (or to its one point).

    Shapes: points [point, 2], path [vertex, 2] -> [point].
    """
    if len(path) == 0:
        return np.full(len(points), np.inf)
    if len(path) == 1:
        return np.linalg.norm(points - path[0], axis=1)
    a, b = path[:-1], path[1:]  # [segment, 2]
    ab = b - a
    length2 = np.maximum((ab ** 2).sum(axis=1), 1e-12)
    # [point, segment]
    t = np.clip(((points[:, None, :] - a[None]) * ab[None]).sum(axis=2) / length2, 0.0, 1.0)
    nearest = a[None] + t[..., None] * ab[None]
    return np.linalg.norm(points[:, None, :] - nearest, axis=2).min(axis=1)


def _near(lines_a: list[Line2D], lines_b: list[Line2D]) -> tuple[np.ndarray, np.ndarray]:
    """For every drawn point of ``lines_a``: whether it lies within PIXEL of a line of ``lines_b``, and
    its y value's difference from ``lines_b``'s first line at the same x (NaN where it has none): relative
    (|a / b - 1|) on a log y axis, absolute on a linear one.

    Shapes: -> [point], [point].
    """
    near, ratios = [], []
    for line in lines_a:
        pixels = drawn_pixels(line)
        if not len(pixels):
            continue
        distance = np.min([_distance_to_polyline(pixels, drawn_pixels(other)) for other in lines_b], axis=0)
        near.append(distance <= PIXEL)
        x, y = line.axes.transData.inverted().transform(pixels).T
        bx, by = (np.asarray(v, dtype=float) for v in lines_b[0].get_data())
        order = np.argsort(bx)
        at = np.interp(x, bx[order], by[order], left=np.nan, right=np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios.append(np.abs(y / at - 1) if line.axes.get_yscale() == "log" else np.abs(y - at))
    if not near:
        return np.zeros(0, dtype=bool), np.zeros(0)
    return np.concatenate(near), np.concatenate(ratios)


def _share(near: np.ndarray) -> float:
    """The share of true values (0 when there are none).  Shapes: near [point] bool."""
    return float(near.mean()) if len(near) else 0.0


def coincidences(fig: Figure) -> list[Coincidence]:
    """Groups of entries drawn on top of each other: per panel, two entries coincide when more than
    HIDDEN_FRACTION of either's points lie within PIXEL of the other's line; coinciding entries are joined
    into groups, and a group found in several panels is reported once with all of them."""
    fig.canvas.draw()
    found: dict[tuple[str, ...], tuple[list[str], float, bool]] = {}
    n_panels = sum(1 for ax in fig.axes if entry_lines(ax))
    for ax in fig.axes:
        lines = entry_lines(ax)
        labels = list(lines)
        group_of = {label: {label} for label in labels}
        spread: dict[frozenset, float] = {}
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                near_ab, ratio_ab = _near(lines[a], lines[b])
                near_ba, _ = _near(lines[b], lines[a])
                if max(_share(near_ab), _share(near_ba)) <= HIDDEN_FRACTION:
                    continue
                merged = group_of[a] | group_of[b]
                for label in merged:
                    group_of[label] = merged
                close = ratio_ab[near_ab & np.isfinite(ratio_ab)]
                spread[frozenset((a, b))] = float(close.max()) if len(close) else 0.0
        groups = {frozenset(g) for g in group_of.values() if len(g) > 1}
        for group in sorted(groups, key=lambda g: min(labels.index(label) for label in g)):  # legend order
            key = tuple(label for label in labels if label in group)
            difference = max(v for pair, v in spread.items() if pair <= group)
            panels, worst, relative = found.get(key, ([], 0.0, True))
            found[key] = ([*panels, panel_name(ax)], max(worst, difference),
                          relative and ax.get_yscale() == "log")
    return [Coincidence(key, tuple(panels), n_panels, worst, relative)
            for key, (panels, worst, relative) in found.items()]


def _join(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def coincidence_words(fig: Figure) -> str:
    """The caption's sentence naming the curves that are drawn on top of each other, where and how close
    they are (or "" when every curve can be told apart), from :func:`coincidences`."""
    groups = coincidences(fig)
    if not groups:
        return ""
    parts = []
    for group in groups:
        where = ("the panel" if group.n_panels == 1 else "every panel") \
            if len(group.panels) == group.n_panels \
            else f"{len(group.panels)} of {group.n_panels} panels ({', '.join(group.panels)})"
        by = (f"{100 * group.largest_difference:.2g} %" if group.relative
              else f"{group.largest_difference:.2g}")
        parts.append(f"{_join(list(group.labels))} in {where}, differing by at most {by} where they overlap")
    return ("Curves drawn within a pixel of each other: "
            + "; ".join(parts) + ".")


def restyle_coinciding(fig: Figure) -> list[Coincidence]:
    """Give every entry of a coinciding group (:func:`coincidences`) markers (its mask's marker shape, or a
    circle) shifted along the line so that partners' markers fall between each other, and, where partners
    share a colour (one mask's norms), markers of its own fill; its colour and line style stay those of its
    mask and norm (:mod:`rankcollapse.book.plotting.palette`). Returns the groups."""
    groups = coincidences(fig)
    lines = {label: [line for ax in fig.axes for line in entry_lines(ax).get(label, [])]
             for group in groups for label in group.labels}
    same_colour = {label for group in groups
                   if len({str(lines[m][0].get_color()) for m in group.labels}) < len(group.labels)
                   for label in group.labels}
    involved = list(lines)
    n = max(len(involved), 1)
    for k, label in enumerate(involved):
        for line in lines[label]:
            if line.get_marker() in (None, "None", "", " "):
                line.set_marker("o")
            if label in same_colour:
                line.set_fillstyle(_FILLS[k % len(_FILLS)])
            line.set_markersize(5)
            line.set_markevery((0.01 + _MARK_STEP * k / n, _MARK_STEP))
    return groups


def caption_notes(fig: Figure) -> str:
    """The words a figure's caption needs about what it draws, computed from the drawing: the curves drawn
    on top of each other (:func:`coincidence_words`) and the log axes cut below the rounding floor or
    leaving it off (:func:`logaxis.cut_words`); "" when there is nothing to say."""
    return " ".join(words for words in (coincidence_words(fig), logaxis.cut_words(fig)) if words)


NOTES_SUMMARY = "Notes on this figure: overlapping curves, cut axes"


def notes_block(fig: Figure) -> str:
    """:func:`caption_notes` as a collapsed block to paste under the figure (Markdown with raw HTML
    ``<details>``), so the caption stays short; "" when there is nothing to say."""
    notes = caption_notes(fig)
    if not notes:
        return ""
    return f'<details class="figure-notes">\n<summary>{NOTES_SUMMARY}</summary>\n\n{notes}\n\n</details>'
