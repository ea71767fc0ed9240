"""The counterexample page's figures: the two tokens' paths without and with LayerNorm (the paper's Fig. 1),
the basins of full rank, and the rotated counterexample, in the greys of the book's non-mask series (the
tokens and the outcomes are no masks: :mod:`rankcollapse.book.plotting.palette`).

Drawn like the theory pages' other figures (:mod:`rankcollapse.book.plotting.theory`): one text column wide,
at most two panels per row, legends below.

Used by: the counterexample page's module (:mod:`rankcollapse.book.pages.counterexample`).
"""

from __future__ import annotations

import math

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette
from rankcollapse.book.plotting.theory import legend_below

_TOKEN = {"colour": "#383838", "lw": 2.0}  # token 1's path
_TO_B, _COLLAPSES = palette.non_mask_colours(["reaches B", "collapses"]).values()


def _circle_axes(ax: Axes, paths: Tensor, reaches_B: Tensor, arc: Tensor, points: dict[str, Tensor]) -> None:
    """Token 2's paths on the unit circle (dark grey: ends at B, light grey: collapses onto token 1), the arc
    of starts that reach B (a thick light band on the circle), starts as small squares and named points.

    Shapes: paths ``[start, layer + 1, 2]``, reaches_B ``[start]`` bool, arc ``[angle]`` (radians), each
    point ``[2]``.
    """
    circle = torch.linspace(0, 2 * math.pi, 400, dtype=torch.float64)
    unit, = ax.plot(torch.cos(circle), torch.sin(circle), color="0.75", lw=1)
    palette.describe(unit, series="unit circle", colour_encodes="guide")
    band = ax.scatter(torch.cos(arc), torch.sin(arc), color=_COLLAPSES, s=40, alpha=0.45, lw=0,
                      label="token 2 starts reaching $B$")
    palette.describe(band, colour_encodes="outcome")
    for k in range(paths.shape[0]):
        outcome = "reaches B" if bool(reaches_B[k]) else "collapses"
        path, = ax.plot(paths[k, :, 0], paths[k, :, 1], color=_TO_B if outcome == "reaches B" else _COLLAPSES,
                        lw=0.9, marker=".", ms=3)
        palette.describe(path, series=f"token 2, start {k}", token=2, outcome=outcome,
                         colour_encodes="outcome")
        start, = ax.plot(paths[k, 0, 0], paths[k, 0, 1], marker="s", color="black", ms=3.5, ls="")
        palette.describe(start, series="token 2 starts", colour_encodes="guide")
    ax.plot([], [], color=_TO_B, lw=1.2, marker=".", label="token 2: reaches $B$")
    ax.plot([], [], color=_COLLAPSES, lw=1.2, marker=".", label="token 2: collapses")
    ax.plot([], [], marker="s", color="black", ms=4, ls="", label="token 2 starts")
    for name, p in points.items():
        x, y = float(p[0]), float(p[1])
        point, = ax.plot(x, y, marker="o", ms=7, color="black",
                         mfc="white" if name.startswith("U") else "black", zorder=4)
        palette.describe(point, series=name, colour_encodes="guide")
        ax.annotate(name, (x, y), xytext=(16 * x, 16 * y), textcoords="offset points", weight="bold",
                    ha="center", va="center", zorder=5)  # outward from the circle
    ax.set_aspect("equal")
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)


def pair_figure(plain: Tensor, normed: Tensor, reaches_B: Tensor, arc: Tensor,
                points: dict[str, Tensor]) -> Figure:
    """The paper's Fig. 1: left, both tokens without LayerNorm (token 1 dark grey circles, token 2 light grey
    squares; each pair meets at a star); right, token 2 on the circle with LayerNorm (:func:`_circle_axes`)
    and token 1's path (thick, dark); one legend below, in the greys of the non-mask series.

    Shapes: plain, normed ``[start, layer + 1, token, 2]``; reaches_B ``[start]``; arc ``[angle]``.
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=3.0)
    tokens = palette.non_mask_colours([1, 2])
    for k in range(plain.shape[0]):
        for token, marker in ((0, "o"), (1, "s")):
            path, = left.plot(plain[k, :, token, 0], plain[k, :, token, 1], color=tokens[token + 1], lw=0.8,
                              marker=marker, ms=2.5)
            palette.describe(path, series=f"token {token + 1}, start {k}", token=token + 1,
                             colour_encodes="token")
        meets, = left.plot(float(plain[k, -1, 0, 0]), float(plain[k, -1, 0, 1]), marker="*", color="black",
                           ms=11, ls="")
        palette.describe(meets, series="where the pair meets", colour_encodes="guide")
    left.plot([], [], color=tokens[1], lw=0.8, marker="o", ms=4, label="token 1")
    left.plot([], [], color=tokens[2], lw=0.8, marker="s", ms=4, label="token 2")
    left.plot([], [], marker="*", color="black", ms=10, ls="", label="where a pair meets")
    left.set_title("no LayerNorm")
    left.set_xlabel("$x_1$")
    left.set_ylabel("$x_2$")
    left.set_aspect("equal", adjustable="datalim")
    _circle_axes(right, normed[:, :, 1], reaches_B, arc, points)
    path, = right.plot(normed[0, :, 0, 0], normed[0, :, 0, 1], color=_TOKEN["colour"], lw=_TOKEN["lw"],
                       marker="o", ms=3, label="token 1: goes to $A$")
    palette.describe(path, token=1, colour_encodes="token")
    right.set_title("with LayerNorm")
    right.set_xlabel("$x_1$")
    legend_below(fig, [left, right])
    return fig


def basin_figure(angles: Tensor, basin: Tensor, strip: Tensor, marks: dict[str, float]) -> Figure:
    """Left: full rank (dark) vs collapse over both starting angles; right: token 1 at A, full rank as a
    function of token 2's start, with the angles in ``marks`` (radians) drawn as dashed lines.

    Shapes: angles ``[angle]`` (radians), basin ``[theta1, theta2]`` bool, strip ``[theta2]`` bool.
    """
    fig, (ax, ax_strip) = plotting.panel_grid(2, panel_height=2.9)
    ax.imshow(basin.numpy().T, origin="lower", extent=(0, 360, 0, 360), cmap="Greys", vmin=-0.3, vmax=1.2,
              interpolation="nearest", aspect="equal")
    ax.set_xlabel(r"token 1 starts at $\theta_1$ (°)")
    ax.set_ylabel(r"token 2 starts at $\theta_2$ (°)")
    ax.set_xticks([0, 180, 360])
    ax.set_yticks([0, 180, 360])
    ax.grid(False)
    ax.set_title("full rank (dark) or collapse")
    step, = ax_strip.plot(angles.numpy() * 180 / math.pi, strip.double().numpy(), drawstyle="steps-mid",
                          color=_TOKEN["colour"])
    palette.describe(step, series="full rank (1) or collapse (0)", colour_encodes="outcome")
    for label, value in marks.items():
        ax_strip.axvline(math.degrees(value) % 360, color="0.4", lw=0.8, ls=(0, (1, 1.6)))
        ax_strip.annotate(label, (math.degrees(value) % 360, 1.06), ha="center")
    ax_strip.set_ylim(-0.1, 1.25)
    ax_strip.set_xticks([0, 90, 180, 270, 360])
    ax_strip.set_yticks([0, 1], ["collapse", "full\nrank"])
    ax_strip.set_xlabel(r"token 2 starts at $\theta_2$ (°)")
    ax_strip.set_title("token 1 starts at $A$")
    return fig


def rotation_figure(paths: Tensor, reaches_B: Tensor, arc: Tensor, points: dict[str, Tensor]) -> Figure:
    """The counterexample with ``Z^T W_V Z``: :func:`_circle_axes` alone (square, half the column), its
    legend below.

    Shapes: paths ``[start, layer + 1, 2]``, reaches_B ``[start]``, arc ``[angle]``.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=3.0)
    _circle_axes(ax, paths, reaches_B, arc, points)
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    legend_below(fig, [ax])
    return fig
