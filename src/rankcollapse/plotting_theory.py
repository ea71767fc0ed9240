"""The figures of the setup and theory pages, one function per kind of figure.

Every figure is ``FIGURE_WIDTH`` inches wide, the width of the book's text column (672 px), with at most
two panels per row and no text below 9 pt, so each label reads at 9 px or more on screen. Titles are
short; captions go through ``{glue:figure}``. The book's theme, the rounding floor and the mask pictures
come from :mod:`rankcollapse.plotting`.

Used by: ``book/setup.md`` and the four pages of ``book/theory/``.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter
from torch import Tensor

from rankcollapse import plotting
from rankcollapse.dynamics import CollapseSummary
from rankcollapse.theory import quantile_band

FIGURE_WIDTH = 7.0  # inches: the book's 672 px text column at 96 px per inch
SMALL = 9  # points: the smallest text of any figure (legends, annotations)
MASK_LABELS = {"complete": "complete", "causal": "causal", "sliding_window": "sliding window",
               "causal_sliding_window": "uni-directional window", "strided": "strided",
               "dilated_window": "dilated window", "global_window": "global + window", "random": "random sparse"}


def tex_number(x: float) -> str:
    r"""A number for math text: ``1e-08`` -> ``10^{-8}``, ``2.5e-05`` -> ``2.5\times 10^{-5}``, else ``{:g}``.

    >>> print(tex_number(1e-8), tex_number(2.5e-5), tex_number(0.5))
    10^{-8} 2.5\times 10^{-5} 0.5
    """
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:g}"
    mantissa, exponent = f"{x:.3g}".split("e") if "e" in f"{x:.3g}" else (f"{x:.3g}", "0")
    power = f"10^{{{int(exponent)}}}"
    return power if float(mantissa) == 1 else f"{mantissa}\\times {power}"


def mask_label(name: str, radius: int | None) -> str:
    """Legend text of a mask with its radius, e.g. ``causal (r = 1)``."""
    return f"{MASK_LABELS.get(name, name)} (r = {'none' if radius is None else radius})"


def mask_grid(shown: dict[str, Tensor]) -> Figure:
    """Adjacency pictures of masks, two per row, centers and radius marked (:func:`plotting.draw_mask`).

    Shapes: every mask ``[token, token]`` bool.
    """
    rows = math.ceil(len(shown) / 2)
    fig, axes = plt.subplots(rows, 2, figsize=(FIGURE_WIDTH, 3.6 * rows), squeeze=False)
    for ax, (name, mask) in zip(axes.flat, shown.items()):
        plotting.draw_mask(ax, mask, MASK_LABELS.get(name, name))
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def layer_log_axes(ax: Axes, ylabel: str) -> None:
    """A log y axis over the layers, with the y label in math (e.g. ``$\\mu(X^{(t)})$``)."""
    ax.set_yscale("log")
    ax.set_xlabel("layer $t$")
    ax.set_ylabel(ylabel)


def band_axes(ax: Axes, curves: dict[str, Tensor], dashed: dict[str, Tensor] | None = None,
              y_min: float = 0.0) -> None:
    """Per label: the median over samples (thick), its 10-90 % band and optionally a dashed second curve's
    median (e.g. mu of X itself next to the exact track), on a log y axis clipped at ``y_min``.

    Shapes: every curve ``[sample, layer + 1]``.
    """
    for k, (label, curve) in enumerate(curves.items()):
        q = quantile_band(curve).clamp(min=y_min) if y_min > 0 else quantile_band(curve)  # [3, layer + 1]
        t = torch.arange(q.shape[1])
        ax.plot(t, q[1], color=f"C{k}", lw=2, label=label)
        ax.fill_between(t, q[0], q[2], color=f"C{k}", alpha=0.2, lw=0)
        if dashed is not None and label in dashed:
            ax.plot(t, quantile_band(dashed[label])[1].clamp(min=y_min), color=f"C{k}", lw=1, ls="--")
    layer_log_axes(ax, r"$\mu(X^{(t)})$")


def summary_bands(panels: dict[str, dict[str, CollapseSummary]], exact: bool, y_min: float = 0.0) -> Figure:
    """One :func:`band_axes` panel per entry of ``panels`` (title -> mask -> run), stacked, each with its
    rounding floor shaded and its own legend. ``exact``: the thick line is mu from the exact centred
    tracking and mu of X itself is dashed; else mu of X alone.

    Shapes: the runs' curves are ``[sample, layer + 1]``.
    """
    fig, axes = plt.subplots(len(panels), 1, figsize=(FIGURE_WIDTH, 3.3 * len(panels)), squeeze=False, sharex=True)
    for ax, (title, runs) in zip(axes[:, 0], panels.items()):
        curves = {mask_label(m, s.radius): s.mu_exact if exact else s.mu_direct for m, s in runs.items()}
        dashed = {mask_label(m, s.radius): s.mu_direct for m, s in runs.items()} if exact else None
        band_axes(ax, curves, dashed, y_min)
        plotting.draw_floor(ax, float(next(iter(runs.values())).floor.median()))
        ax.set_title(title, fontsize=11)
        ax.legend(fontsize=SMALL, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")
    fig.tight_layout()
    return fig


def rate_figure(table: pd.DataFrame, sweep: pd.DataFrame, temperature: float) -> Figure:
    """Theorem 1's rates: top, the measured rate of each mask with a center against its radius; below,
    the sliding-window sweep (measured, and the linear case's ``-log|lambda_2|``) against the radius.

    Shapes: ``table`` indexed by mask with columns radius, rate; ``sweep`` indexed by window with
    columns radius, rate, linear rate.
    """
    fig, (left, right) = plt.subplots(2, 1, figsize=(FIGURE_WIDTH, 6.0))
    applies = table[table["radius"].notna()]
    for k, (name, row) in enumerate(applies.iterrows()):
        left.scatter(int(row["radius"]), row["rate"], color=f"C{k}", marker="os^Dv<>p"[k % 8], s=50, zorder=3,
                     label=MASK_LABELS.get(name, name))
    left.set_yscale("log")
    left.set_xlabel("graph radius $r$")
    left.set_ylabel("rate per layer")
    left.set_title("every mask with a center", fontsize=11)
    left.legend(fontsize=SMALL, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    right.plot(sweep["radius"], sweep["rate"], "o-", label=f"measured, $d_{{QK}}$ = {temperature:g}")
    right.plot(sweep["radius"], sweep["linear rate"].clip(upper=10), "s--", label=r"linear case $-\log|\lambda_2|$")
    for window, row in sweep.iterrows():
        right.annotate(f"w = {window}", (row["radius"], row["rate"]), fontsize=SMALL, xytext=(5, 4),
                       textcoords="offset points")
    right.set_yscale("log")
    right.yaxis.set_minor_formatter(NullFormatter())
    right.set_xlabel("radius $r$ of the sliding window")
    right.set_ylabel("rate per layer")
    right.set_title("sliding window, varying $w$", fontsize=11)
    right.legend(fontsize=SMALL, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def linear_figure(curves: dict[str, Tensor], linear: pd.DataFrame) -> Figure:
    """The linear special case: median mu per mask and the dotted line ``|lambda_2|^t`` through its end.

    Shapes: every curve ``[layer + 1]``; ``linear`` indexed by mask with column ``rate -log|lambda_2|``.
    """
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.4))
    for k, (name, median) in enumerate(curves.items()):
        rate = float(linear.loc[name, "rate -log|lambda_2|"])
        t = torch.arange(median.shape[0])
        label = rf"{MASK_LABELS.get(name, name)}: $|\lambda_2| = {math.exp(-rate):.3f}$"
        ax.plot(t, median, color=f"C{k}", lw=2, label=label)
        ax.plot(t, median[-1] * torch.exp(rate * (median.shape[0] - 1 - t)), color=f"C{k}", lw=1, ls=":")
    layer_log_axes(ax, r"$\mu(X^{(t)})$")
    ax.legend(fontsize=SMALL)
    fig.tight_layout()
    return fig


def proportion_bars(ax: Axes, table: pd.DataFrame, x: str, hue: str | None = None) -> None:
    """Bars of ``fraction`` with Wilson error bars (columns ``low``, ``high``), grouped by ``x`` and coloured
    by ``hue`` (one colour per bar when ``hue`` is None).

    Shapes: ``table`` has columns ``x``, fraction, low, high (and ``hue``).
    """
    groups = list(dict.fromkeys(table[x]))
    hues = list(dict.fromkeys(table[hue])) if hue else [None]
    width = 0.8 / len(hues)
    for k, value in enumerate(hues):
        part = table if hue is None else table[table[hue] == value]
        position = torch.tensor([groups.index(g) for g in part[x]], dtype=torch.float64) + (k - (len(hues) - 1) / 2) * width
        colours = [f"C{i}" for i in range(len(part))] if hue is None else f"C{k}"
        ax.bar(position, part["fraction"], width, color=colours, label=value)
        ax.errorbar(position, part["fraction"], yerr=[part["fraction"] - part["low"], part["high"] - part["fraction"]],
                    fmt="none", color="black", lw=1)
    ax.set_xticks(range(len(groups)), [MASK_LABELS.get(g, str(g)) for g in groups])
    if hue:
        ax.legend(fontsize=SMALL)


def contrast_figure(contrast: pd.DataFrame, collapse_tol: float, n_layers: int) -> Figure:
    """Theorem 2's contrast: fraction of seeds not collapsed per mask and law of W_V.

    Shapes: ``contrast`` has columns mask, W_V, fraction (``not collapsed``), low, high.
    """
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.2))
    proportion_bars(ax, contrast.rename(columns={"not collapsed": "fraction"}).assign(
        W_V=lambda frame: "$W_V$ " + frame["W_V"]), "mask", "W_V")
    ax.set_ylabel(f"fraction with $\\mu > {tex_number(collapse_tol)}$\nafter {n_layers} layers")
    fig.tight_layout()
    return fig


def circle_axes(ax: Axes, paths: Tensor, reaches_B: Tensor, arc: Tensor, points: dict[str, Tensor]) -> None:
    """Token 2's paths on the unit circle (orange: ends at B, blue: collapses), the arc of starts that
    reach B (green), starts as black squares and named points.

    Shapes: paths ``[start, layer + 1, 2]``, reaches_B ``[start]`` bool, arc ``[angle]`` (radians), each
    point ``[2]``.
    """
    circle = torch.linspace(0, 2 * math.pi, 400, dtype=torch.float64)
    ax.plot(torch.cos(circle), torch.sin(circle), color="0.7", lw=1)
    ax.scatter(torch.cos(arc), torch.sin(arc), color="C2", s=30, alpha=0.5, lw=0, label="starts that reach B")
    for k in range(paths.shape[0]):
        ax.plot(paths[k, :, 0], paths[k, :, 1], color="C1" if bool(reaches_B[k]) else "C0", lw=0.8, marker=".", ms=4)
        ax.plot(paths[k, 0, 0], paths[k, 0, 1], marker="s", color="black", ms=4)
    for name, p in points.items():
        x, y = float(p[0]), float(p[1])
        ax.plot(x, y, marker="o", ms=7, color="black", mfc="white" if name.startswith("U") else "black", zorder=4)
        ax.annotate(name, (x, y), xytext=(16 * x, 16 * y), textcoords="offset points", fontsize=11, weight="bold",
                    ha="center", va="center", zorder=5)  # outward from the circle
    ax.set_aspect("equal")
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)


def pair_figure(plain: Tensor, normed: Tensor, reaches_B: Tensor, arc: Tensor, points: dict[str, Tensor]) -> Figure:
    """The paper's Fig. 1: left, both tokens without LayerNorm (they meet, stars); right, token 2 on the
    circle with LayerNorm (:func:`circle_axes`) and token 1's path (red).

    Shapes: plain, normed ``[start, layer + 1, token, 2]``; reaches_B ``[start]``; arc ``[angle]``.
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH, 3.7))
    for k in range(plain.shape[0]):
        for token, marker in ((0, "o"), (1, "s")):
            left.plot(plain[k, :, token, 0], plain[k, :, token, 1], color=f"C{k}", lw=0.8, marker=marker, ms=2.5)
        left.plot(float(plain[k, -1, 0, 0]), float(plain[k, -1, 0, 1]), marker="*", color=f"C{k}", ms=12, mec="black")
    left.set_title("no LayerNorm", fontsize=11)
    left.set_xlabel("$x_1$")
    left.set_ylabel("$x_2$")
    left.set_aspect("equal", adjustable="datalim")
    circle_axes(right, normed[:, :, 1], reaches_B, arc, points)
    right.plot(normed[0, :, 0, 0], normed[0, :, 0, 1], color="C3", lw=1.2, marker="o", ms=3, label="token 1")
    right.set_title("with LayerNorm", fontsize=11)
    right.set_xlabel("$x_1$")
    right.legend(fontsize=SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def basin_figure(angles: Tensor, basin: Tensor, strip: Tensor, marks: dict[str, float]) -> Figure:
    """Left: full rank (dark) vs collapse over both starting angles; right: token 1 at A, full rank as a
    function of token 2's start, with the angles in ``marks`` (radians) drawn as dashed lines.

    Shapes: angles ``[angle]`` (radians), basin ``[theta1, theta2]`` bool, strip ``[theta2]`` bool.
    """
    fig, (ax, ax_strip) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH, 3.4), gridspec_kw={"width_ratios": [1, 1.2]})
    ax.imshow(basin.numpy().T, origin="lower", extent=(0, 360, 0, 360), cmap="Greens", vmin=-0.3, vmax=1.2,
              interpolation="nearest", aspect="equal")
    ax.set_xlabel(r"token 1 starts at $\theta_1$ (°)")
    ax.set_ylabel(r"token 2 starts at $\theta_2$ (°)")
    ax.set_xticks([0, 180, 360])
    ax.set_yticks([0, 180, 360])
    ax.grid(False)
    ax_strip.plot(angles.numpy() * 180 / math.pi, strip.double().numpy(), drawstyle="steps-mid", color="C2")
    for label, value in marks.items():
        ax_strip.axvline(math.degrees(value) % 360, color="0.4", ls="--", lw=0.8)
        ax_strip.annotate(label, (math.degrees(value) % 360, 1.06), ha="center", fontsize=11)
    ax_strip.set_ylim(-0.1, 1.2)
    ax_strip.set_yticks([0, 1], ["collapse", "full rank"])
    ax_strip.set_xlabel(r"token 2 starts at $\theta_2$ (°), token 1 at $A$")
    fig.tight_layout()
    return fig


def rotation_figure(paths: Tensor, reaches_B: Tensor, arc: Tensor, points: dict[str, Tensor]) -> Figure:
    """The counterexample with ``Z^T W_V Z``: :func:`circle_axes` alone.

    Shapes: paths ``[start, layer + 1, 2]``, reaches_B ``[start]``, arc ``[angle]``.
    """
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH / 2, 3.5))
    circle_axes(ax, paths, reaches_B, arc, points)
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    fig.tight_layout()
    return fig


def rank_figure(fractions: pd.DataFrame, steps: Tensor, final_ranks: Tensor, floor: float) -> Figure:
    """Left: the final rank's distribution with Wilson intervals; right: the median size of the last update
    per final rank (exponential convergence to an equilibrium) down to the rounding ``floor`` (shaded).

    Shapes: ``fractions`` indexed by rank; steps ``[sample, layer]``; final_ranks ``[sample]`` (-1: unsettled).
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH, 3.3))
    proportion_bars(left, fractions.reset_index(), "rank")
    left.set_xlabel("rank of the final $X$")
    left.set_ylabel("fraction of starts")
    t = torch.arange(1, steps.shape[1] + 1)
    for k in fractions.index:
        group = steps[final_ranks == k]
        if group.shape[0]:
            right.plot(t, group.median(dim=0).values.clamp(min=1e-17), color=f"C{k - 1}", lw=2, label=f"rank {k}")
    layer_log_axes(right, r"$\Vert X^{(t)} - X^{(t-1)} \Vert_F$")
    plotting.draw_floor(right, floor)
    right.legend(fontsize=SMALL)
    fig.tight_layout()
    return fig


def threshold_figure(sweep: pd.DataFrame) -> Figure:
    """Fraction of random starts not collapsed against ``c / c*``, one line per width d, with the derived
    threshold ``c / c* = 1`` dashed.

    Shapes: ``sweep`` has columns d, ``c / c*``, fraction, low, high.
    """
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.2))
    for k, (d, part) in enumerate(sweep.groupby("d")):
        ax.errorbar(part["c / c*"], part["fraction"], yerr=[part["fraction"] - part["low"], part["high"] - part["fraction"]],
                    marker="o", color=f"C{k}", lw=1.5, capsize=2, label=f"$d = {d}$")
    ax.axvline(1.0, color="0.3", ls="--", lw=1, label=r"$c = c^*$")
    ax.set_xlabel(r"$c / c^*$ with $c^* = \sqrt{a(2-a)/(d-1)}$")
    ax.set_ylabel("fraction not collapsed")
    ax.legend(fontsize=SMALL)
    fig.tight_layout()
    return fig
