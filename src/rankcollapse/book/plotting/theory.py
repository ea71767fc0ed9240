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
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import offset_copy
from torch import Tensor

from rankcollapse.book.labels import mask_label, norm_label
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import logaxis, palette
from rankcollapse.theory.dynamics import CollapseSummary
from rankcollapse.core.stats import quantile_band

_DODGE_PT = 9.0  # drawn offset (points, not data) between masks of one radius in the rate figure
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
    """Legend text of a mask with its radius, e.g. ``causal (r = 1)``; ``no center`` where it has no radius.

    >>> _radius_label("causal", 1), _radius_label("dilated_window", None)
    ('causal (r = 1)', 'dilated window (no center)')
    """
    return f"{mask_label(name)} ({'no center' if radius is None else f'r = {radius}'})"


def mask_grid(shown: dict[str, Tensor]) -> Figure:
    """Adjacency pictures of masks, two per row, centers and radius marked (:func:`plotting.draw_mask`).

    Shapes: every mask ``[token, token]`` bool.
    """
    fig, axes = plotting.panel_grid(len(shown), panel_height=3.3)
    for ax, (name, mask) in zip(axes, shown.items()):
        plotting.draw_mask(ax, mask, mask_label(name), palette.mask_style(name).colour)
        palette.describe(ax, mask=name)
    plotting.label_outer(axes, min(2, len(shown)))
    for ax in axes:  # axis labels on the outer panels only, token indices on none (draw_mask hides them)
        ax.tick_params(labelbottom=False, labelleft=False)
    return fig


def legend_below(fig: Figure, axes, n_cols: int | None = None, entries: dict | None = None) -> None:
    """:func:`plotting.figure_legend` under the panels (``n_cols`` columns when given; ``entries`` before the
    guides, default the panels' own), with the figure made taller by the legend's height so that the panels
    keep theirs."""
    plotting.figure_legend(fig, axes, n_cols=n_cols, entries=entries)
    height = fig.legends[-1].get_window_extent(fig.canvas.get_renderer()).height / fig.dpi  # inches
    fig.set_figheight(fig.get_figheight() + height)


def _layer_log_axes(ax: Axes, ylabel: str) -> None:
    """A log y axis over the layers, with the y label in math (e.g. ``$\\mu(X^{(t)})$``)."""
    ax.set_yscale("log")
    ax.set_xlabel("layer $t$")
    ax.set_ylabel(ylabel)


def _band_axes(ax: Axes, curves: dict[str, tuple[str, Tensor]], dims: dict[str, dict] | None = None,
               direct: dict[str, Tensor] | None = None, y_min: float = 0.0) -> bool:
    """Per label: the median over samples of its mask's run (thick, in the mask's colour and marker, the line
    style of the panel's norm from ``dims``), its 10-90 % band and optionally a thin second curve's median
    (``direct``: mu of X itself next to the exact track), on a log y axis that ends at ``y_min``: a median
    below it is not drawn (no flat line along the edge that would read as a plateau), a triangle marks where
    it leaves. Returns whether any median left the axis.

    Shapes: ``curves`` label -> (mask, [sample, layer + 1]); every ``direct`` curve ``[sample, layer + 1]``.
    """
    left = False
    for label, (mask, curve) in curves.items():
        style, d = palette.mask_style(mask), {"mask": mask, **(dims or {}).get(label, {}),
                                              "colour_encodes": "mask", "series": label}
        ls = palette.NORM_STYLES.get(d.get("norm"), "-")
        q = quantile_band(curve)  # [3, layer + 1]
        t = torch.arange(q.shape[1])
        below = q[1] < y_min
        line, = ax.plot(t, torch.where(below, torch.nan, q[1]), color=style.colour, lw=2, ls=ls, label=label,
                        marker=style.marker, markevery=(0.03, 0.14), ms=5)
        band = ax.fill_between(t, q[0].clamp(min=y_min) if y_min > 0 else q[0], q[2],
                               where=(~below).tolist(), color=style.colour, alpha=0.2, lw=0)
        for artist in (line, band):
            palette.describe(artist, **d)
        if bool(below.any()):
            left = True
            ax.plot([int(below.nonzero()[0])], [y_min], marker="v", ms=8, ls="", color=style.colour,
                    clip_on=False, zorder=5)
        if direct is not None and label in direct:
            median = quantile_band(direct[label])[1]
            thin, = ax.plot(t, torch.where(median < y_min, torch.nan, median), color=style.colour, lw=0.8,
                            ls=ls)
            palette.describe(thin, **{**d, "series": f"{label}: μ of X itself"})
    _layer_log_axes(ax, r"$\mu(X^{(t)})$")
    return left


def summary_bands(panels: dict[str, dict[str, CollapseSummary]], exact: bool, y_min: float = 0.0,
                  norms: dict[str, str] | None = None) -> Figure:
    """One :func:`_band_axes` panel per entry of ``panels`` (title -> mask -> run), two per row with shared
    axes, each with its rounding floor shaded; each mask in its colour and marker, each panel's norm
    (``norms``: title -> norm name) in its line style; one legend below, the masks first, then the guides.
    ``exact``: the thick line is mu from the exact centred tracking and mu of X itself is a thin line (a
    legend entry says so); else mu of X alone.

    Shapes: the runs' curves are ``[sample, layer + 1]``.
    """
    fig, axes = plotting.panel_grid(len(panels), panel_height=2.9, sharex=True, sharey=True)
    entries, guides = {}, {}
    for ax, (title, runs) in zip(axes, panels.items()):
        norm = (norms or {}).get(title)
        curves = {_radius_label(m, s.radius): (m, s.mu_exact if exact else s.mu_direct)
                  for m, s in runs.items()}
        direct = {_radius_label(m, s.radius): s.mu_direct for m, s in runs.items()} if exact else None
        dims = {label: {"norm": norm} for label in curves}
        if _band_axes(ax, curves, dims, direct, y_min):
            guides[f"falls below {_edge(y_min)}, the axis' edge"] = Line2D([], [], ls="", marker="v", ms=8,
                                                                            color="0.3")
        entries |= {label: palette.mask_handle(mask) for label, (mask, _) in curves.items()}
        palette.describe(ax, norm=norm)
        plotting.draw_floor(ax, float(next(iter(runs.values())).floor.median()))
        ax.set_title(textwrap.fill(title, _TITLE_CHARS))
    if exact:
        guides[r"thin: $\mu$ of $X$ itself"] = Line2D([], [], color="0.3", lw=0.8)
    if norms and len(set(norms.values())) > 1:
        entries |= {norm_label(n): Line2D([], [], color=palette.NEUTRAL, lw=1.8, ls=palette.NORM_STYLES[n])
                    for n in dict.fromkeys(norms.values())}
    for ax in axes:  # each panel's draw_floor fixed the shared limits to its own floor: span them all
        ax.set_autoscaley_on(True)
        ax.autoscale_view(scalex=False)
        if y_min > 0:
            ax.set_ylim(bottom=y_min)
    plotting.label_outer(axes, min(2, len(panels)))
    legend_below(fig, axes, entries=entries | guides)
    return fig


def rate_figure(table: pd.DataFrame, sweep: pd.DataFrame, temperature: float) -> Figure:
    """Theorem 1's rates: left, the measured rate of each mask with a center against its radius (masks of one
    radius drawn side by side, a few points apart, at their exact radius in the data); right, the
    sliding-window sweep (measured, in the sliding window's colour, and the linear case's
    ``-log|lambda_2|``, the theory's line) against the radius, each point labelled with its window; one
    legend below.

    Shapes: ``table`` indexed by mask with columns radius, rate; ``sweep`` indexed by window with
    columns radius, rate, linear rate.
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=2.9)
    applies = table[table["radius"].notna()]
    slot = applies.groupby("radius").cumcount()  # masks sharing a radius sit side by side, none under another
    dodge = (slot - (applies.groupby("radius")["rate"].transform("size") - 1) / 2) * _DODGE_PT
    for name, row in applies.iterrows():
        style = palette.mask_style(name)
        points = left.scatter([int(row["radius"])], [row["rate"]], color=style.colour, marker=style.marker,
                              s=50, zorder=3, label=mask_label(name))
        # drawn a few points aside, its data (and the axis' limits) at the exact radius
        points.set_offset_transform(offset_copy(left.transData, fig=fig, x=float(dodge[name]),
                                                units="points"))
        palette.describe(points, mask=name, colour_encodes="mask")
    left.set_yscale("log")
    left.set_xlabel("graph radius $r$")
    left.set_ylabel("rate per layer")
    left.set_title("every mask with a center")
    window = palette.mask_style("sliding_window")
    measured, = right.plot(sweep["radius"], sweep["rate"], color=window.colour, marker=window.marker, lw=1.8,
                           label=f"sliding window, $d_{{QK}}$ = {temperature:g}")
    theory, = right.plot(sweep["radius"], sweep["linear rate"].clip(upper=10), marker=".", ms=7,
                         label=r"theory, linear case: $-\log|\lambda_2|$", **palette.THEORY)
    palette.describe(measured, mask="sliding_window", colour_encodes="mask")
    palette.describe(theory, mask="sliding_window", colour_encodes=palette.THEORY_LABEL)
    for window_size, row in sweep.iterrows():
        right.annotate(f"$w$={window_size}", (row["radius"], row["rate"]), xytext=(6, 3),
                       textcoords="offset points")
    right.set_yscale("log")
    for axis in (left.yaxis, right.yaxis):  # one decade or two would show one or two ticks
        logaxis.plain_log_ticks(axis)
    low, high = right.get_ylim()
    right.set_ylim(low, high * 1.6)  # room above the highest window's label
    right.set_xlabel("radius $r$ of the window")
    right.set_title("sliding window, varying $w$")
    right.set_xlim(0.5, float(sweep["radius"].max()) + 1.5)  # room for the window labels
    left.set_xlim(float(applies["radius"].min()) - 0.6, float(applies["radius"].max()) + 0.6)  # room to dodge
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    legend_below(fig, [left, right], n_cols=2)
    return fig


def linear_figure(curves: dict[str, Tensor], linear: pd.DataFrame) -> Figure:
    """The linear special case: median mu per mask (its colour and marker) and the theory's line
    ``|lambda_2|^t`` through its end.

    Shapes: every curve ``[layer + 1]``; ``linear`` indexed by mask with column ``rate -log|lambda_2|``.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.9)
    for name, median in curves.items():
        style = palette.mask_style(name)
        rate = float(linear.loc[name, "rate -log|lambda_2|"])
        t = torch.arange(median.shape[0])
        label = rf"{mask_label(name)}: $|\lambda_2| = {math.exp(-rate):.3f}$"
        line, = ax.plot(t, median, color=style.colour, lw=2, label=label, marker=style.marker,
                        markevery=(0.03, 0.14), ms=5)
        theory, = ax.plot(t, median[-1] * torch.exp(rate * (median.shape[0] - 1 - t)), **palette.THEORY)
        palette.describe(line, mask=name, colour_encodes="mask")
        palette.describe(theory, mask=name, series=f"{label}: theory", colour_encodes=palette.THEORY_LABEL)
    ax.plot([], [], label=r"theory: $|\lambda_2|^t$", **palette.THEORY)
    _layer_log_axes(ax, r"$\mu(X^{(t)})$")
    legend_below(fig, [ax])
    return fig


def _proportion_bars(ax: Axes, table: pd.DataFrame, x: str, hue: str | None = None) -> None:
    """Bars of ``fraction`` with Wilson error bars (columns ``low``, ``high``), grouped by ``x`` and coloured
    by ``hue`` (by ``x`` when ``hue`` is None) in the non-mask greys; a fraction of exactly 0 draws no bar but
    a "0" where it would stand. Each bar is described for the figure's data: its ``x`` value's name, its
    ``hue`` value and its interval.

    Shapes: ``table`` has columns ``x``, fraction, low, high (and ``hue``).
    """
    groups = list(dict.fromkeys(table[x]))
    hues = list(dict.fromkeys(table[hue])) if hue else [None]
    greys = palette.non_mask_colours(hues if hue else groups)
    width = 0.8 / len(hues)
    for k, value in enumerate(hues):
        part = table if hue is None else table[table[hue] == value]
        position = (torch.tensor([groups.index(g) for g in part[x]], dtype=torch.float64)
                    + (k - (len(hues) - 1) / 2) * width).tolist()
        colours = [greys[g] for g in part[x]] if hue is None else greys[value]
        bars = ax.bar(position, part["fraction"], width, color=colours, label=value)
        for bar, (_, row), at in zip(bars, part.iterrows(), position):
            palette.describe(bar, x=str(row[x]), y_low=float(row["low"]), y_high=float(row["high"]),
                             colour_encodes=hue or x, **({hue: str(value)} if hue else {}))
            if row["fraction"] == 0:  # a bar of height 0 draws nothing: say 0 above its interval
                ax.annotate("0", (at, float(row["high"])), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom")
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
    legend_below(fig, [ax], n_cols=contrast["W_V"].nunique())  # one row, in the bars' order
    return fig


def rank_figure(fractions: pd.DataFrame, steps: Tensor, final_ranks: Tensor, floor: float) -> Figure:
    """Left: the final rank's distribution with Wilson intervals; right: the median size of the last update
    per final rank (exponential convergence to an equilibrium) down to the rounding ``floor`` (shaded);
    one grey per rank in both (the non-mask greys, dark to light); one legend below.

    Shapes: ``fractions`` indexed by rank; steps ``[sample, layer]``; final_ranks ``[sample]`` (-1:
    unsettled).
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=2.8)
    _proportion_bars(left, fractions.reset_index(), "rank")
    left.set_xlabel("rank of the final $X$")
    left.set_ylabel("fraction of starts")
    greys = palette.non_mask_colours(fractions.index)
    t = torch.arange(1, steps.shape[1] + 1)
    for k in fractions.index:
        group = steps[final_ranks == k]
        if group.shape[0]:
            line, = right.plot(t, group.median(dim=0).values.clamp(min=1e-17), color=greys[k], lw=2,
                               label=f"rank {k}")
            palette.describe(line, rank=int(k), colour_encodes="rank")
    _layer_log_axes(right, r"$\Vert X^{(t)} - X^{(t-1)} \Vert_F$")
    plotting.draw_floor(right, floor)
    legend_below(fig, [right])
    return fig


def threshold_figure(sweep: pd.DataFrame) -> Figure:
    """Fraction of random starts not collapsed against ``c / c*``, one grey per width d (dark to light), with
    the derived threshold ``c / c* = 1`` (the theory's line); legend inside the panel.

    Shapes: ``sweep`` has columns d, ``c / c*``, fraction, low, high.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.8)
    greys = palette.non_mask_colours(sweep["d"])
    for d, part in sweep.groupby("d"):
        drawn = ax.errorbar(part["c / c*"], part["fraction"],
                            yerr=[part["fraction"] - part["low"], part["high"] - part["fraction"]],
                            marker="o", color=greys[d], lw=1.5, capsize=2, label=f"$d = {d}$")
        palette.describe(drawn.lines[0], d=int(d), colour_encodes="d")
    ax.axvline(1.0, label=r"theory: $c = c^*$", **palette.THEORY)
    ax.set_xlabel(r"$c / c^*$ with $c^* = \sqrt{a(2-a)/(d-1)}$")
    ax.set_ylabel("fraction not collapsed")
    ax.legend(loc="upper left")
    return fig
