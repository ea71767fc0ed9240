"""Log axes that show what a panel is about: the y range set by the curves near and above the rounding
floor, not by exactly tracked values far below it (cut with a marked break, the cut named in the caption),
nor by a floor far below every curve (left off the axis, named in the caption); layer ticks 1, 2, 5, 10, ...

Used by: :mod:`rankcollapse.book.plotting.common` (every layer-curve grid),
:mod:`~rankcollapse.book.plotting.overlap` (the caption words, :func:`cut_words`, and panel names),
:mod:`~rankcollapse.book.plotting.theory` (plain log ticks), :mod:`~rankcollapse.book.plotting.beyond` (plain
numbers).
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

CUT_DECADES = 3  # a log y axis reaches at most this many decades below the rounding floor it shades
FLOOR_OFF_DECADES = 4  # a floor more than this many decades below every curve is left off the axis
BAND = "sample band"  # the gid of a curve's quantile band: the axis spans it too
_MARGIN = 3.0  # room (a factor) between the lowest or highest curve and the axis' edge


def plain_number(value: float, _position: int = 0) -> str:
    """A tick label as a plain number (``20``, not ``2 x 10^1``)."""
    return f"{value:g}"


def plain_log_ticks(axis) -> None:
    """Ticks at 1, 2, 5 times the powers of ten on a log ``axis`` (an x or y axis), written as plain
    numbers: a log axis over one or two decades would be labelled with one or two powers of ten only."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(plain_number))
    axis.set_minor_formatter(NullFormatter())


def min_log_ticks(ax: Axes, n: int = 3) -> None:
    """At least ``n`` labelled ticks on a log y axis: a short panel over a few decades had two (every
    decade then, or 1, 2, 5 times each within a decade or two)."""
    low, high = ax.get_ylim()
    if ax.get_yscale() != "log" or sum(low <= t <= high for t in ax.yaxis.get_majorticklocs()) >= n:
        return
    if high / low < 10 ** 1.5:
        plain_log_ticks(ax.yaxis)
    else:
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=2 * n + 1))


def layer_ticks(ax: Axes) -> None:
    """:func:`plain_log_ticks` on a log layer axis (12 layers were labelled 10^0 and 10^1 only)."""
    plain_log_ticks(ax.xaxis)


def _curve_values(ax: Axes) -> np.ndarray:
    """Every positive finite y value of the panel's labelled curves and the top edges of their bands.
    Shapes: -> [value]."""
    values = [np.asarray(line.get_ydata(), dtype=float) for line in ax.get_lines()
              if not line.get_label().startswith("_")]
    values += [np.asarray(path.vertices[:, 1], dtype=float).max(keepdims=True) * np.ones(1)
               for band in ax.collections if band.get_gid() == BAND
               for path in band.get_paths() if len(path.vertices)]
    flat = np.concatenate(values) if values else np.zeros(0)
    return flat[np.isfinite(flat) & (flat > 0)]


def fit_log_axes(axes, floor: float | None) -> tuple[float, float]:
    """Set one y range for panels that share their y axis (log): from the lowest curve value, but not below
    CUT_DECADES under the shaded ``floor`` (a cut, marked by :func:`mark_cut`), nor down to a ``floor`` that
    lies more than FLOOR_OFF_DECADES under every curve (left off); up to the highest curve. Returns it.

    Shapes: axes [panel].
    """
    values = np.concatenate([_curve_values(ax) for ax in axes])
    if not len(values):
        return axes[0].get_ylim()
    cut = floor / 10 ** CUT_DECADES if floor is not None and floor > 0 else 0.0
    kept = values[values >= cut]  # values more than CUT_DECADES below the floor leave through the broken edge
    kept = kept if len(kept) else values
    low, high = float(kept.min()) / _MARGIN, float(values.max()) * _MARGIN
    if cut and kept.min() < floor * 10 ** FLOOR_OFF_DECADES:  # the floor belongs on the axis
        low = max(min(low, floor / 10), cut)
    for ax in axes:
        ax.set_ylim(low, high)
        for patch in _floor_patches(ax):  # the shading reaches the axis' new bottom edge
            top = patch.get_y() + patch.get_height()
            patch.set_y(min(low, top))
            patch.set_height(top - min(low, top))
        mark_cut(ax)
    return low, high


FLOOR_LABELS = ("dtype floor", "rounding floor")


def _floor_patches(ax: Axes) -> list:
    """The panel's shaded rounding floor (the patches :func:`rankcollapse.book.plotting.common.draw_floor`
    adds)."""
    return [patch for patch in ax.patches if patch.get_label() in FLOOR_LABELS]


def shaded_floor(axes) -> float | None:
    """The highest rounding floor shaded in ``axes`` (its top edge), or None.  Shapes: axes [panel]."""
    tops = [patch.get_y() + patch.get_height() for ax in axes for patch in _floor_patches(ax)]
    return max(tops) if tops else None


def mark_cut(ax: Axes) -> None:
    """Where a curve leaves the panel through its bottom edge: a down-pointing triangle in its colour at
    the edge, and the break sign (two short slanted strokes) on the left axis' bottom."""
    low = ax.get_ylim()[0]
    cut = False
    for line in [line for line in ax.get_lines() if not line.get_label().startswith("_")]:
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        below = np.flatnonzero(np.isfinite(y) & (y < low))
        if len(below):
            cut = True
            ax.plot([x[below[0]]], [low], marker="v", ms=7, ls="", color=line.get_color(), clip_on=False,
                    zorder=5, label="_cut")
    if cut:
        kw = {"transform": ax.transAxes, "color": "0.2", "lw": 1.2, "clip_on": False, "label": "_break"}
        for dy in (0.0, 0.035):
            ax.plot([-0.03, 0.03], [0.01 + dy, 0.045 + dy], **kw)


def _exponent(value: float) -> str:
    """``1e-19``-style words of a value's order of magnitude, or two digits (``2.3e-101``)."""
    return f"{value:.1e}" if value > 0 else "exactly 0, an underflow"


def cut_words(fig: Figure) -> str:
    """The caption's sentence naming, per curve, the panels whose log axis cuts it off (with the curve's
    lowest value there) and the panels whose rounding floor lies below the axis; "" when there are none."""
    cuts: dict[str, list[tuple[str, float]]] = {}
    floors_below: list[str] = []
    for ax in fig.axes:
        if ax.get_yscale() != "log":
            continue
        low = ax.get_ylim()[0]
        name = panel_name(ax)
        for line in ax.get_lines():
            y = np.asarray(line.get_ydata(), dtype=float)
            if not line.get_label().startswith("_") and (y[np.isfinite(y)] < low).any():
                cuts.setdefault(line.get_label(), []).append((name, float(np.nanmin(y))))
        floor = shaded_floor([ax])
        if floor is not None and floor < low:
            floors_below.append(f"{name} ({_exponent(floor)})")
    words = []
    if cuts:
        parts = [f"{label} goes below it in {', '.join(f'{p} (to {_exponent(v)})' for p, v in where)}"
                 for label, where in cuts.items()]
        words.append(f"A y axis ends at most {CUT_DECADES} decades below the highest rounding floor of its "
                     "row of panels (broken axis; ▼ marks where a curve leaves the panel): "
                     + "; ".join(parts) + ".")
    if floors_below:
        words.append(f"The rounding floor lies below the axis in {', '.join(floors_below)}.")
    return " ".join(words)


def panel_name(ax: Axes) -> str:
    """A panel's name in words: its label when it has one, else its block's title up to the first colon,
    then its own title."""
    if ax.get_label() and not ax.get_label().startswith("_"):
        return ax.get_label()
    block = getattr(ax.get_figure(root=False), "_suptitle", None)
    head = block.get_text().split(":")[0].strip() if block is not None else ""
    return " ".join(part for part in (head, ax.get_title().strip()) if part) or "the panel"
