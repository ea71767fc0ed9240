"""The figures of the setup and theory pages, one function per kind of figure.

Every figure is drawn with :func:`rankcollapse.book.plotting.common.panel_grid`: one text column wide (672 px
at the inline 110 dpi, so it is shown at its natural size), at most two panels per row, the theme's font sizes
(11 pt and up, no smaller hand-set sizes) and legends below the panels or inside them, never beside them —
so every text reads at 9 px or more on screen. Titles are short; captions go through ``{glue:figure}``. The
book's theme, the rounding floor, the shared legend and the mask pictures come from
:mod:`rankcollapse.book.plotting.common`, the masks' words from :mod:`rankcollapse.book.labels`.

Used by: ``book/setup.md`` and the ``show`` of the four theory pages' modules (:mod:`rankcollapse.book.pages`:
``theorem1``, ``theorem2``, ``counterexample``, ``equilibria``).
"""

from __future__ import annotations

import math
import textwrap

import pandas as pd
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from rankcollapse.book.labels import mask_label
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import logaxis, palette
from rankcollapse.theory.dynamics import CollapseSummary
from rankcollapse.core.stats import quantile_band

_DODGE = 0.35  # horizontal offset (radius units) between masks of one radius in the rate figure
_TITLE_CHARS = 28  # a longer panel title wraps: two panels share the 672 px column


def _tex_number(x: float) -> str:
    r"""A number for math text: ``1e-08`` -> ``10^{-8}``, ``2.5e-05`` -> ``2.5\times 10^{-5}``, else ``{:g}``.

    >>> print(_tex_number(1e-8), _tex_number(2.5e-5), _tex_number(0.5))
    10^{-8} 2.5\times 10^{-5} 0.5
    """
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:g}"
    mantissa, exponent = f"{x:.3g}".split("e") if "e" in f"{x:.3g}" else (f"{x:.3g}", "0")
    power = f"10^{{{int(exponent)}}}"
    return power if float(mantissa) == 1 else f"{mantissa}\\times {power}"


def _edge(y_min: float) -> str:
    """An axis edge in words, e.g. ``1e-40``."""
    return f"{y_min:.0e}".replace("e-0", "e-").replace("e+0", "e+")


def _radius_label(name: str, radius: int | None) -> str:
    """Legend text of a mask with its radius, e.g. ``causal (r = 1)``."""
    return f"{mask_label(name)} (r = {'none' if radius is None else radius})"


def mask_grid(shown: dict[str, Tensor]) -> Figure:
    """Adjacency pictures of masks, two per row, centers and radius marked (:func:`plotting.draw_mask`).

    Shapes: every mask ``[token, token]`` bool.
    """
    fig, axes = plotting.panel_grid(len(shown), panel_height=3.3)
    for ax, (name, mask) in zip(axes, shown.items()):
        plotting.draw_mask(ax, mask, mask_label(name))
    plotting.label_outer(axes, min(2, len(shown)))
    for ax in axes:  # axis labels on the outer panels only, token indices on none (draw_mask hides them)
        ax.tick_params(labelbottom=False, labelleft=False)
    return fig


def _legend_below(fig: Figure, axes, n_cols: int | None = None) -> None:
    """:func:`plotting.figure_legend` under the panels (``n_cols`` columns when given), with the figure made
    taller by the legend's height so that the panels keep theirs."""
    plotting.figure_legend(fig, axes, n_cols=n_cols)
    height = fig.legends[-1].get_window_extent(fig.canvas.get_renderer()).height / fig.dpi  # inches
    fig.set_figheight(fig.get_figheight() + height)


def _layer_log_axes(ax: Axes, ylabel: str) -> None:
    """A log y axis over the layers, with the y label in math (e.g. ``$\\mu(X^{(t)})$``)."""
    ax.set_yscale("log")
    ax.set_xlabel("layer $t$")
    ax.set_ylabel(ylabel)


def _band_axes(ax: Axes, curves: dict[str, Tensor], colours: dict[str, object],
               dashed: dict[str, Tensor] | None = None,
              y_min: float = 0.0) -> bool:
    """Per label: the median over samples (thick, in ``colours[label]``), its 10-90 % band and optionally
    a dashed second curve's median (e.g. mu of X itself next to the exact track), on a log y axis that ends
    at ``y_min``: a median below it is not drawn (no flat line along the edge that would read as a
    plateau), a triangle marks where it leaves. Returns whether any median left the axis.

    Shapes: every curve ``[sample, layer + 1]``.
    """
    left = False
    for label, curve in curves.items():
        q = quantile_band(curve)  # [3, layer + 1]
        t = torch.arange(q.shape[1])
        below = q[1] < y_min
        ax.plot(t, torch.where(below, torch.nan, q[1]), color=colours[label], lw=2, label=label)
        ax.fill_between(t, q[0].clamp(min=y_min) if y_min > 0 else q[0], q[2], where=(~below).tolist(),
                        color=colours[label], alpha=0.2, lw=0)
        if bool(below.any()):
            left = True
            ax.plot([int(below.nonzero()[0])], [y_min], marker="v", ms=8, color=colours[label], clip_on=False,
                    zorder=5)
        if dashed is not None and label in dashed:
            median = quantile_band(dashed[label])[1]
            ax.plot(t, torch.where(median < y_min, torch.nan, median), color=colours[label], lw=1, ls="--")
    _layer_log_axes(ax, r"$\mu(X^{(t)})$")
    return left


def summary_bands(panels: dict[str, dict[str, CollapseSummary]], exact: bool, y_min: float = 0.0) -> Figure:
    """One :func:`_band_axes` panel per entry of ``panels`` (title -> mask -> run), two per row with shared
    axes, each with its rounding floor shaded; one legend below, a mask keeping its colour in every
    panel. ``exact``: the thick line is mu from the exact centred tracking and mu of X itself is dashed
    (a legend entry says so); else mu of X alone.

    Shapes: the runs' curves are ``[sample, layer + 1]``.
    """
    fig, axes = plotting.panel_grid(len(panels), panel_height=2.9, sharex=True, sharey=True)
    labels = [_radius_label(m, s.radius) for runs in panels.values() for m, s in runs.items()]
    colours = palette.hue_colours(pd.DataFrame({"mask": labels}), "mask")
    for ax, (title, runs) in zip(axes, panels.items()):
        curves = {_radius_label(m, s.radius): s.mu_exact if exact else s.mu_direct for m, s in runs.items()}
        dashed = {_radius_label(m, s.radius): s.mu_direct for m, s in runs.items()} if exact else None
        if _band_axes(ax, curves, colours, dashed, y_min):
            ax.plot([], [], ls="", marker="v", ms=8, color="0.3",
                    label=f"falls below {_edge(y_min)}, the axis' edge")
        if exact:
            ax.plot([], [], color="0.3", lw=1, ls="--", label=r"$\mu$ of $X$ itself (dashed)")
        plotting.draw_floor(ax, float(next(iter(runs.values())).floor.median()))
        ax.set_title(textwrap.fill(title, _TITLE_CHARS))
    for ax in axes:  # each panel's draw_floor fixed the shared limits to its own floor: span them all
        ax.set_autoscaley_on(True)
        ax.autoscale_view(scalex=False)
        if y_min > 0:
            ax.set_ylim(bottom=y_min)
    plotting.label_outer(axes, min(2, len(panels)))
    _legend_below(fig, axes)
    return fig


def rate_figure(table: pd.DataFrame, sweep: pd.DataFrame, temperature: float) -> Figure:
    """Theorem 1's rates: left, the measured rate of each mask with a center against its radius; right,
    the sliding-window sweep (measured, and the linear case's ``-log|lambda_2|``) against the radius, each
    point labelled with its window; one legend below.

    Shapes: ``table`` indexed by mask with columns radius, rate; ``sweep`` indexed by window with
    columns radius, rate, linear rate.
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=2.9)
    applies = table[table["radius"].notna()]
    slot = applies.groupby("radius").cumcount()  # masks sharing a radius sit side by side, none under another
    dodge = (slot - (applies.groupby("radius")["rate"].transform("size") - 1) / 2) * _DODGE
    for k, (name, row) in enumerate(applies.iterrows()):
        left.scatter(int(row["radius"]) + dodge[name], row["rate"], color=f"C{k}", marker="os^Dv<>p"[k % 8],
                     s=50, zorder=3, label=mask_label(name))
    left.set_yscale("log")
    left.set_xlabel("graph radius $r$")
    left.set_ylabel("rate per layer")
    left.set_title("every mask with a center")
    right.plot(sweep["radius"], sweep["rate"], "o-", color="0.15",
               label=f"sliding window, $d_{{QK}}$ = {temperature:g}")
    right.plot(sweep["radius"], sweep["linear rate"].clip(upper=10), "s--", color="0.55",
               label=r"linear case $-\log|\lambda_2|$")
    for window, row in sweep.iterrows():
        right.annotate(f"$w$={window}", (row["radius"], row["rate"]), xytext=(6, 3),
                       textcoords="offset points")
    right.set_yscale("log")
    for axis in (left.yaxis, right.yaxis):  # one decade or two would show one or two ticks
        logaxis.plain_log_ticks(axis)
    low, high = right.get_ylim()
    right.set_ylim(low, high * 1.6)  # room above the highest window's label
    right.set_xlabel("radius $r$ of the window")
    right.set_title("sliding window, varying $w$")
    right.set_xlim(0.5, float(sweep["radius"].max()) + 1.5)  # room for the window labels
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _legend_below(fig, [left, right])
    return fig


def linear_figure(curves: dict[str, Tensor], linear: pd.DataFrame) -> Figure:
    """The linear special case: median mu per mask and the dotted line ``|lambda_2|^t`` through its end.

    Shapes: every curve ``[layer + 1]``; ``linear`` indexed by mask with column ``rate -log|lambda_2|``.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.9)
    for k, (name, median) in enumerate(curves.items()):
        rate = float(linear.loc[name, "rate -log|lambda_2|"])
        t = torch.arange(median.shape[0])
        label = rf"{mask_label(name)}: $|\lambda_2| = {math.exp(-rate):.3f}$"
        ax.plot(t, median, color=f"C{k}", lw=2, label=label)
        ax.plot(t, median[-1] * torch.exp(rate * (median.shape[0] - 1 - t)), color=f"C{k}", lw=1, ls=":")
    ax.plot([], [], color="0.3", lw=1, ls=":", label=r"$|\lambda_2|^t$ (dotted)")
    _layer_log_axes(ax, r"$\mu(X^{(t)})$")
    _legend_below(fig, [ax])
    return fig


def _proportion_bars(ax: Axes, table: pd.DataFrame, x: str, hue: str | None = None) -> None:
    """Bars of ``fraction`` with Wilson error bars (columns ``low``, ``high``), grouped by ``x`` and coloured
    by ``hue`` (one colour per bar when ``hue`` is None).

    Shapes: ``table`` has columns ``x``, fraction, low, high (and ``hue``).
    """
    groups = list(dict.fromkeys(table[x]))
    hues = list(dict.fromkeys(table[hue])) if hue else [None]
    width = 0.8 / len(hues)
    for k, value in enumerate(hues):
        part = table if hue is None else table[table[hue] == value]
        position = (torch.tensor([groups.index(g) for g in part[x]], dtype=torch.float64)
                    + (k - (len(hues) - 1) / 2) * width)
        colours = [f"C{i}" for i in range(len(part))] if hue is None else f"C{k}"
        ax.bar(position, part["fraction"], width, color=colours, label=value)
        # a bar of height 0 draws nothing: a thick line at 0 shows it
        zero = torch.as_tensor((part["fraction"] == 0).to_numpy().copy())
        ax.hlines([0.0] * int(zero.sum()), (position[zero] - width / 2).tolist(),
                  (position[zero] + width / 2).tolist(),
                  colors=colours if hue is None else [colours] * int(zero.sum()), lw=4, zorder=3)
        ax.errorbar(position, part["fraction"],
                    yerr=[part["fraction"] - part["low"], part["high"] - part["fraction"]],
                    fmt="none", color="black", lw=1)
    ax.set_xticks(range(len(groups)), [mask_label(str(g)) for g in groups])


def contrast_figure(contrast: pd.DataFrame, collapse_tol: float, n_layers: int) -> Figure:
    """Theorem 2's contrast: fraction of seeds not collapsed per mask and law of W_V; one legend below.

    Shapes: ``contrast`` has columns mask, W_V, fraction (``not collapsed``), low, high.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.7)
    _proportion_bars(ax, contrast.rename(columns={"not collapsed": "fraction"}).assign(
        W_V=lambda frame: "$W_V$ " + frame["W_V"]), "mask", "W_V")
    ax.set_ylabel(f"fraction with $\\mu > {_tex_number(collapse_tol)}$\nafter {n_layers} layers")
    _legend_below(fig, [ax], n_cols=contrast["W_V"].nunique())  # one row, in the bars' order
    return fig


def _circle_axes(ax: Axes, paths: Tensor, reaches_B: Tensor, arc: Tensor, points: dict[str, Tensor]) -> None:
    """Token 2's paths on the unit circle (orange: ends at B, blue: collapses), the arc of starts that
    reach B (green), starts as black squares and named points.

    Shapes: paths ``[start, layer + 1, 2]``, reaches_B ``[start]`` bool, arc ``[angle]`` (radians), each
    point ``[2]``.
    """
    circle = torch.linspace(0, 2 * math.pi, 400, dtype=torch.float64)
    ax.plot(torch.cos(circle), torch.sin(circle), color="0.7", lw=1)
    ax.scatter(torch.cos(arc), torch.sin(arc), color="C2", s=30, alpha=0.5, lw=0,
               label="starts that reach $B$")
    for k in range(paths.shape[0]):
        ax.plot(paths[k, :, 0], paths[k, :, 1], color="C1" if bool(reaches_B[k]) else "C0", lw=0.8,
                marker=".", ms=4)
        ax.plot(paths[k, 0, 0], paths[k, 0, 1], marker="s", color="black", ms=4)
    for name, p in points.items():
        x, y = float(p[0]), float(p[1])
        ax.plot(x, y, marker="o", ms=7, color="black", mfc="white" if name.startswith("U") else "black",
                zorder=4)
        ax.annotate(name, (x, y), xytext=(16 * x, 16 * y), textcoords="offset points", weight="bold",
                    ha="center", va="center", zorder=5)  # outward from the circle
    ax.set_aspect("equal")
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)


def pair_figure(plain: Tensor, normed: Tensor, reaches_B: Tensor, arc: Tensor,
                points: dict[str, Tensor]) -> Figure:
    """The paper's Fig. 1: left, both tokens without LayerNorm (they meet, stars); right, token 2 on the
    circle with LayerNorm (:func:`_circle_axes`) and token 1's path (vermilion, C3 of the colour-blind
    palette); one legend below.

    Shapes: plain, normed ``[start, layer + 1, token, 2]``; reaches_B ``[start]``; arc ``[angle]``.
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=3.0)
    for k in range(plain.shape[0]):
        for token, marker in ((0, "o"), (1, "s")):
            left.plot(plain[k, :, token, 0], plain[k, :, token, 1], color=f"C{k}", lw=0.8, marker=marker,
                      ms=2.5)
        left.plot(float(plain[k, -1, 0, 0]), float(plain[k, -1, 0, 1]), marker="*", color=f"C{k}", ms=12,
                  mec="black")
    left.set_title("no LayerNorm")
    left.set_xlabel("$x_1$")
    left.set_ylabel("$x_2$")
    left.set_aspect("equal", adjustable="datalim")
    _circle_axes(right, normed[:, :, 1], reaches_B, arc, points)
    right.plot(normed[0, :, 0, 0], normed[0, :, 0, 1], color="C3", lw=1.2, marker="o", ms=3, label="token 1")
    right.set_title("with LayerNorm")
    right.set_xlabel("$x_1$")
    _legend_below(fig, [right])
    return fig


def basin_figure(angles: Tensor, basin: Tensor, strip: Tensor, marks: dict[str, float]) -> Figure:
    """Left: full rank (dark) vs collapse over both starting angles; right: token 1 at A, full rank as a
    function of token 2's start, with the angles in ``marks`` (radians) drawn as dashed lines.

    Shapes: angles ``[angle]`` (radians), basin ``[theta1, theta2]`` bool, strip ``[theta2]`` bool.
    """
    fig, (ax, ax_strip) = plotting.panel_grid(2, panel_height=2.9)
    ax.imshow(basin.numpy().T, origin="lower", extent=(0, 360, 0, 360), cmap="Greens", vmin=-0.3, vmax=1.2,
              interpolation="nearest", aspect="equal")
    ax.set_xlabel(r"token 1 starts at $\theta_1$ (°)")
    ax.set_ylabel(r"token 2 starts at $\theta_2$ (°)")
    ax.set_xticks([0, 180, 360])
    ax.set_yticks([0, 180, 360])
    ax.grid(False)
    ax.set_title("full rank (dark) or collapse")
    ax_strip.plot(angles.numpy() * 180 / math.pi, strip.double().numpy(), drawstyle="steps-mid", color="C2")
    for label, value in marks.items():
        ax_strip.axvline(math.degrees(value) % 360, color="0.4", ls="--", lw=0.8)
        ax_strip.annotate(label, (math.degrees(value) % 360, 1.06), ha="center")
    ax_strip.set_ylim(-0.1, 1.25)
    ax_strip.set_xticks([0, 90, 180, 270, 360])
    ax_strip.set_yticks([0, 1], ["collapse", "full\nrank"])
    ax_strip.set_xlabel(r"token 2 starts at $\theta_2$ (°)")
    ax_strip.set_title("token 1 starts at $A$")
    return fig


def rotation_figure(paths: Tensor, reaches_B: Tensor, arc: Tensor, points: dict[str, Tensor]) -> Figure:
    """The counterexample with ``Z^T W_V Z``: :func:`_circle_axes` alone (square, half the column).

    Shapes: paths ``[start, layer + 1, 2]``, reaches_B ``[start]``, arc ``[angle]``.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=3.0)
    _circle_axes(ax, paths, reaches_B, arc, points)
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    return fig


def rank_figure(fractions: pd.DataFrame, steps: Tensor, final_ranks: Tensor, floor: float) -> Figure:
    """Left: the final rank's distribution with Wilson intervals; right: the median size of the last update
    per final rank (exponential convergence to an equilibrium) down to the rounding ``floor`` (shaded);
    one legend below.

    Shapes: ``fractions`` indexed by rank; steps ``[sample, layer]``; final_ranks ``[sample]`` (-1:
    unsettled).
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=2.8)
    _proportion_bars(left, fractions.reset_index(), "rank")
    left.set_xlabel("rank of the final $X$")
    left.set_ylabel("fraction of starts")
    t = torch.arange(1, steps.shape[1] + 1)
    for k in fractions.index:
        group = steps[final_ranks == k]
        if group.shape[0]:
            right.plot(t, group.median(dim=0).values.clamp(min=1e-17), color=f"C{k - 1}", lw=2,
                       label=f"rank {k}")
    _layer_log_axes(right, r"$\Vert X^{(t)} - X^{(t-1)} \Vert_F$")
    plotting.draw_floor(right, floor)
    _legend_below(fig, [right])
    return fig


def threshold_figure(sweep: pd.DataFrame) -> Figure:
    """Fraction of random starts not collapsed against ``c / c*``, one line per width d, with the derived
    threshold ``c / c* = 1`` dashed; legend inside the panel.

    Shapes: ``sweep`` has columns d, ``c / c*``, fraction, low, high.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.8)
    for k, (d, part) in enumerate(sweep.groupby("d")):
        ax.errorbar(part["c / c*"], part["fraction"],
                    yerr=[part["fraction"] - part["low"], part["high"] - part["fraction"]],
                    marker="o", color=f"C{k}", lw=1.5, capsize=2, label=f"$d = {d}$")
    ax.axvline(1.0, color="0.3", ls="--", lw=1, label=r"$c = c^*$")
    ax.set_xlabel(r"$c / c^*$ with $c^* = \sqrt{a(2-a)/(d-1)}$")
    ax.set_ylabel("fraction not collapsed")
    ax.legend(loc="upper left")
    return fig
