"""Layers a sweep did not compute because the curve had settled on its rounding floor: the engine's metric
``settled`` (:data:`rankcollapse.engine.SETTLED_METRIC`, the share of samples held at a layer). Where most
samples were held the figures draw the curve on as a thin dotted line at the value it held -- no band, no
floor crosses, its own legend entry -- so a reader sees that those layers are not data.

Used by: :mod:`rankcollapse.book.plotting.common` (layer curves and their legends),
:mod:`rankcollapse.book.plotting.drawn` (the figure's data rows say ``settled``).
"""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from rankcollapse.book.plotting import palette
from rankcollapse.engine import SETTLED_METRIC

GID = "settled"  # the gid of a held line (the figure's data rows read it as kind "settled")
LABEL = "not computed: settled on its floor"
_STYLE = {"ls": (0, (1, 3)), "lw": 1.1}  # sparser and thinner than a norm's dots


def split(curve: pd.DataFrame, rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One curve's computed layers and its held ones (most of its samples not computed: the last layers, as a
    sample once held stays held), the held part starting at the last computed layer so the two join.

    Shapes: ``curve`` one curve's rows of the drawn metric, sorted by layer; ``rows`` that curve's rows of
    every metric (its ``settled`` rows, when the sweep has them) -> (rows of ``curve``, rows of ``curve``).
    """
    flags = rows[rows["metric"] == SETTLED_METRIC]
    held = curve["layer"].isin(flags.loc[flags["mean"] > 0.5, "layer"]).to_numpy() if len(flags) else []
    if not any(held):
        return curve, curve[:0]
    first = int(held.argmax())
    return curve.iloc[:first], curve.iloc[max(0, first - 1):]


def draw(ax: Axes, held: pd.DataFrame, centre: str, colour, dims: dict | None = None) -> None:
    """The held layers of a curve (from :func:`split`) as a thin dotted line in its colour, described by
    the curve's ``dims`` for the figure's data (:func:`rankcollapse.book.plotting.palette.describe`)."""
    if len(held) > 1:
        line, = ax.plot(held["layer"], held[centre], color=colour, gid=GID, label="_settled", **_STYLE)
        palette.describe(line, **(dims or {}))


def legend_entries(axes) -> dict[str, Line2D]:
    """The legend entry for held layers, when any panel of ``axes`` draws some."""
    drawn = any(line.get_gid() == GID for ax in axes for line in ax.get_lines())
    return {LABEL: Line2D([], [], color="0.3", **_STYLE)} if drawn else {}
