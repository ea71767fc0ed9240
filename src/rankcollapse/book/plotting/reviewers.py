"""The figures of the reviewers' questions page (book/response/reviewers.md), one function per question.

Drawn like the theory pages' figures (:mod:`rankcollapse.book.plotting.theory`): one text column wide
through :func:`rankcollapse.book.plotting.common.panel_grid`, the theme's font sizes, legends below; a mask in
its colour and marker, a norm in its line style, anything else in the non-mask greys
(:mod:`rankcollapse.book.plotting.palette`).

Used by: :mod:`rankcollapse.book.pages.reviewers` (its ``show``), tests/unit/test_reviewers_samples.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from torch import Tensor

from rankcollapse.book.labels import mask_label, norm_label
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette
from rankcollapse.theory.rates import layer_rates

_LOG10 = math.log(10)


def decay_shape_figure(complete: Tensor, linear: dict[str, Tensor]) -> Figure:
    """Q4. Left: log10 mu against the layer for the complete mask with attention logits (median over
    samples, exact below the floor) and the linear cases, each in its mask's colour and marker; right:
    ``log(-log(mu(t)/mu(0)))``, a straight rising line for doubly exponential decay, flattening for
    exponential decay.

    Shapes: complete ``[sample, layer + 1]`` (natural log); every linear curve ``[layer + 1]`` (natural log).
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=2.9)
    median = complete.median(dim=0).values
    n = median.shape[0]
    curves = {"complete": ("complete, attention logits", median),
              **{k: (f"{mask_label(k)}, linear", v[:n]) for k, v in linear.items()}}
    for mask, (label, curve) in curves.items():
        style = palette.mask_style(mask)
        t = np.arange(curve.shape[0])
        drop = (curve[0] - curve).numpy()
        keep = (drop > 0) & np.isfinite(drop)
        for ax, x, y, name in ((left, t, curve.numpy() / _LOG10, label),
                               (right, t[keep], np.log(drop[keep]), f"_{label}")):
            line, = ax.plot(x, y, "-", color=style.colour, marker=style.marker, lw=2, ms=4, label=name)
            palette.describe(line, mask=mask, series=label, colour_encodes="mask")
    left.set_yscale("symlog", linthresh=10)
    left.set_xlabel("layer $t$")
    left.set_ylabel(r"$\log_{10}\mu(X^{(t)})$")
    left.set_title("μ itself")
    right.set_xlabel("layer $t$")
    right.set_ylabel(r"$\log(-\log(\mu_t/\mu_0))$")
    right.set_title("straight: doubly exponential")
    plotting.figure_legend(fig, [left])
    return fig


def linear_rate_figure(linear: dict[str, Tensor], log2: float) -> Figure:
    """Q4. The decay per layer ``log mu(t) - log mu(t + 1)`` of the linear cases (each mask's colour and
    marker), with the theory's ``log 2 = -log|λ₂|``.

    Shapes: every curve ``[layer + 1]`` (natural log).
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.6)
    for name, curve in linear.items():
        style = palette.mask_style(name)
        line, = ax.plot(np.arange(1, curve.shape[0]), layer_rates(curve).numpy(), color=style.colour, lw=2,
                        marker=style.marker, markevery=(0.03, 0.14), ms=5, label=mask_label(name))
        palette.describe(line, mask=name, colour_encodes="mask")
    ax.axhline(log2, label=r"theory: $-\log|\lambda_2| = \log 2$", **palette.THEORY)
    ax.set_xlabel("layer $t$")
    ax.set_ylabel("decay per layer")
    ax.set_ylim(0, 1.5 * log2)
    plotting.figure_legend(fig, [ax])
    return fig


def rotation_figure(paths: dict[float, Tensor], limits: pd.DataFrame) -> Figure:
    """Q2. The rotated counterexample's two tokens on the unit circle for every rotation (one grey per angle;
    token 1 thick, token 2 thin), token 1's limit ``(0, 1) Z`` marked.

    Shapes: every path ``[layer + 1, token, 2]``; ``limits`` indexed by angle with token 1 limit x, y.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=3.6)
    circle = torch.linspace(0, 2 * math.pi, 200)
    unit, = ax.plot(torch.cos(circle), torch.sin(circle), color="0.8", lw=1)
    palette.describe(unit, series="unit circle", colour_encodes="guide")
    greys = palette.non_mask_colours(paths)
    for angle, path in paths.items():
        for token, width in ((0, 2.0), (1, 0.9)):
            line, = ax.plot(path[:, token, 0], path[:, token, 1], "-", color=greys[angle], lw=width,
                            label=f"Z: angle {angle:g}" if token == 0 else "_token 2")
            palette.describe(line, series=f"angle {angle:g}, token {token + 1}", angle=angle, token=token + 1,
                             colour_encodes="angle")
        ax.plot(limits.loc[angle, "token 1 limit x"], limits.loc[angle, "token 1 limit y"], "*",
                color=greys[angle], ms=12, mec="black", mew=0.5)
    ax.plot([], [], "*", color="0.3", ms=10, label="(0, 1) Z")
    ax.plot([], [], "-", color="0.3", lw=2.0, label="token 1 (thick)")
    ax.plot([], [], "-", color="0.3", lw=0.9, label="token 2 (thin)")
    ax.set_aspect("equal")
    ax.set_xlabel("coordinate 1")
    ax.set_ylabel("coordinate 2")
    plotting.figure_legend(fig, [ax])
    return fig


def path_figure(s: Tensor, mu: Tensor, depths: tuple[int, ...], jump: float) -> Figure:
    """Q1 (continuity). mu at each depth (one grey per depth, dark to light) against the path parameter s,
    the located jump dotted.

    Shapes: s ``[point]``, mu ``[depth, point]``.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.8)
    greys = palette.non_mask_colours(depths)
    for k, depth in enumerate(depths):
        line, = ax.plot(s, mu[k].clamp(min=1e-300), "o-", color=greys[depth], ms=3, lw=1.5,
                        label=f"depth {depth}")
        palette.describe(line, depth=depth, colour_encodes="depth")
    ax.axvline(jump, color="0.3", ls=(0, (1, 1.6)), lw=1, label=f"jump at s = {jump:.4f}")
    ax.set_yscale("log")
    ax.set_xlabel(r"$s$ in $W_V = (1-s)\,I + s\,W$")
    ax.set_ylabel(r"$\mu(X^{(t)})$")
    plotting.figure_legend(fig, [ax])
    return fig


def width_figure(widths: pd.DataFrame) -> Figure:
    """Q2 (width). Per mask (a panel, its marker), the fitted rate of mu against the width d per value-weight
    law (one grey each; median over seeds, min-max bar), on a log width axis.

    Shapes: ``widths`` rows of mask, law, width, seed, rate.
    """
    shown = list(dict.fromkeys(widths["mask"]))
    fig, axes = plotting.panel_grid(len(shown), panel_height=2.4, sharex=True)
    greys = palette.non_mask_colours(dict.fromkeys(widths["law"]))
    for ax, name in zip(axes, shown):
        rows = widths[widths["mask"] == name]
        for law, group in rows.groupby("law", sort=False):
            stats = group.groupby("width")["rate"].agg(["median", "min", "max"])
            drawn = ax.errorbar(stats.index, stats["median"],
                                yerr=[stats["median"] - stats["min"], stats["max"] - stats["median"]],
                                fmt="-", marker=palette.mask_style(name).marker, color=greys[law], ms=4,
                                lw=1.5, capsize=2, label=f"$W_V$ {law}")
            palette.describe(drawn.lines[0], law=law, colour_encodes="law")
        palette.describe(ax, mask=name)
        ax.set_xscale("log", base=2)
        ax.set_title(mask_label(name))
        ax.set_xlabel("width $d$")
        ax.set_ylabel("rate of μ per layer")
    plotting.label_outer(axes, min(2, len(shown)))
    plotting.figure_legend(fig, axes)
    return fig


def limits_figure(table: pd.DataFrame, limit_table: pd.DataFrame) -> Figure:
    """Q1. ‖X‖_F over its layer-1 value (left) and μ/‖X‖_F (right) per configuration of a tidy
    experiments table (medians), one row of panels per weight source; coloured by the configuration's limit
    (:func:`rankcollapse.verdicts.limits.table_limits`, one grey each), its norm's line style and its mask's
    marker.

    Shapes: ``table`` tidy (metric, layer, median, labels); ``limit_table`` one row per configuration.
    """
    sources = list(dict.fromkeys(limit_table["weights"]))
    fig, axes = plotting.panel_grid(2 * len(sources), panel_height=2.5, sharex=True)
    greys = palette.non_mask_colours(dict.fromkeys(limit_table["limit"]))
    labels = [c for c in ("weights", "variant", "mask", "window", "temperature", "norm", "skip")
              if c in table.columns]
    for _, row in limit_table.iterrows():
        chosen = np.ones(len(table), dtype=bool)
        for c in labels:
            chosen &= (table[c].isna() & pd.isna(row[c])) | (table[c] == row[c])
        group = table[chosen]
        k = 2 * sources.index(row["weights"])
        style = {"color": greys[row["limit"]], "lw": 1.2, "ls": palette.norm_style(row["norm"]),
                 "marker": palette.mask_style(row["mask"]).marker, "markevery": (0.05, 0.2), "ms": 4}
        dims = {"mask": row["mask"], "norm": row["norm"], "limit": row["limit"], "colour_encodes": "limit"}
        for ax, metric in ((axes[k], "norm"), (axes[k + 1], "relative_mu")):
            curve = group[group["metric"] == metric].sort_values("layer")
            y = curve["median"] / curve["median"].iloc[1] if metric == "norm" else curve["median"]
            line, = ax.plot(curve["layer"], y, label=row["limit"], **style)
            palette.describe(line, **dims, series=f"{mask_label(row['mask'])}, {norm_label(row['norm'])}")
    for k, ax in enumerate(axes):
        ax.set_yscale("log")
        ax.set_xlabel("layer $t$")
        ax.set_ylabel(r"$\|X^{(t)}\|_F / \|X^{(1)}\|_F$" if k % 2 == 0 else r"$\mu/\|X\|_F$")
        ax.set_title(sources[k // 2])
        palette.describe(ax, weights=sources[k // 2])
    entries = {limit: Line2D([], [], color=colour, lw=2) for limit, colour in greys.items()}
    norms = dict.fromkeys(limit_table["norm"])
    entries |= {norm_label(n): Line2D([], [], color=palette.NEUTRAL, ls=palette.norm_style(n)) for n in norms}
    entries |= {mask_label(m): Line2D([], [], color=palette.NEUTRAL, marker=palette.mask_style(m).marker,
                                      ls="") for m in dict.fromkeys(limit_table["mask"])}
    plotting.figure_legend(fig, axes, entries=entries)
    return fig


def temperature_figure(alignment: pd.DataFrame) -> Figure:
    """The temperature question. Per weight source, the layer's own temperature effect against how far the
    entering tokens are from aligned (1 - mean |cos|, log axes), each mask in its colour and marker (the layer
    grows to the left as the tokens align).

    Shapes: ``alignment`` rows of weights, mask, layer, effect, cosine.
    """
    shown = list(dict.fromkeys(alignment["weights"]))
    fig, axes = plotting.panel_grid(len(shown), panel_height=2.8, sharey=True)
    masks = list(dict.fromkeys(alignment["mask"]))
    for ax, weights in zip(axes, shown):
        rows = alignment[alignment["weights"] == weights]
        for name in masks:
            group, style = rows[rows["mask"] == name], palette.mask_style(name)
            line, = ax.plot((1 - group["cosine"]).clip(lower=1e-12), group["effect"].clip(lower=1e-6), "-",
                            marker=style.marker, color=style.colour, ms=4, lw=1, label=mask_label(name))
            palette.describe(line, mask=name, colour_encodes="mask")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.invert_xaxis()
        ax.set_title(weights)
        palette.describe(ax, weights=weights)
        ax.set_xlabel(r"$1 - $ mean $|\cos|$ (input)")
        ax.set_ylabel("temperature effect per layer")
    plotting.label_outer(axes, min(2, len(shown)))
    plotting.figure_legend(fig, axes)
    return fig


def local_figure(local: pd.DataFrame) -> Figure:
    """Q (local or causal). Per weight source (panels stacked), the mean decay rate per layer of μ/‖X‖_F for
    the causal mask and the windows (x axis; each point in its mask's colour and marker), joined per norm by a
    grey line in the norm's style: a window is more effective where its point lies below the causal one.

    Shapes: ``local`` one row per (weights, norm), a column per mask
    (:func:`~rankcollapse.book.pages._reviewers_sweeps.local_or_causal`).
    """
    shown = list(dict.fromkeys(local["weights"]))
    masks = [m for m in ("causal", "sliding_window", "causal_sliding_window") if m in local.columns]
    fig, axes = plotting.panel_grid(len(shown), max_cols=1, panel_height=2.3, sharex=True, sharey=True)
    for ax, weights in zip(axes, shown):
        for _, row in local[local["weights"] == weights].iterrows():
            line, = ax.plot(range(len(masks)), [row[m] for m in masks], color=palette.NEUTRAL, lw=1.3,
                            ls=palette.norm_style(row["norm"]), label=norm_label(row["norm"]))
            palette.describe(line, norm=row["norm"], colour_encodes="norm")
            for k, mask in enumerate(masks):
                style = palette.mask_style(mask)
                point = ax.scatter([k], [row[mask]], color=style.colour, marker=style.marker, s=40, zorder=3)
                palette.describe(point, mask=mask, norm=row["norm"], colour_encodes="mask",
                                 series=f"{mask_label(mask)}, {norm_label(row['norm'])}")
        ax.set_xticks(range(len(masks)), [mask_label(m) for m in masks])
        ax.set_xlim(-0.4, len(masks) - 0.6)
        ax.set_title(weights)
        palette.describe(ax, weights=weights)
        ax.set_ylabel("mean rate of\nμ/‖X‖$_F$ per layer")
    plotting.label_outer(axes, 1)
    plotting.figure_legend(fig, axes)
    return fig


def sample_size_figure(joined: pd.DataFrame | None, small: int) -> Figure:
    """Q (32 samples). Per curve of Fig. 2's sweep, the median of μ over the first ``small`` samples divided
    by its median over all, against the layer, one panel per weight source (each mask in its colour and
    marker, each norm in its line style), equal medians dotted; a note instead when the small run is not
    stored at the shown scale.

    Shapes: ``joined`` tidy, both runs' rows told apart by ``n_samples``
    (:func:`~rankcollapse.book.pages.sample_size.pair`).
    """
    if joined is None:
        fig, (ax,) = plotting.panel_grid(1, panel_height=2.6)
        ax.text(0.5, 0.5, f"no stored Fig. 2 run on {small} samples at this scale", ha="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    mu = joined[(joined["metric"] == "mu") & (joined["layer"] >= 1) & (joined["median"] > 0)]
    pivot = mu.pivot_table(index=["weights", "norm", "mask", "layer"], columns="n_samples",
                           values="median").dropna()
    ratio = pivot[small] / pivot[max(pivot.columns)]
    sources = list(dict.fromkeys(pivot.index.get_level_values("weights")))
    fig, axes = plotting.panel_grid(len(sources), panel_height=2.4, sharey=True)
    styles = {}
    for (weights, norm, mask), curve in ratio.groupby(level=["weights", "norm", "mask"], sort=False):
        style = palette.CurveStyle(palette.mask_style(mask).colour, palette.mask_style(mask).marker,
                                   palette.norm_style(norm),
                                   {"mask": mask, "norm": norm, "colour_encodes": "mask"})
        styles[(mask, norm)] = style
        ax = axes[sources.index(weights)]
        line, = ax.plot(curve.index.get_level_values("layer"), curve.to_numpy(), color=style.colour,
                        ls=style.linestyle, marker=style.marker, markevery=(0.03, 0.2), ms=4, lw=1.2,
                        label=f"{mask_label(mask)}, {norm_label(norm)}")
        palette.describe(line, **style.dims)
    for ax, weights in zip(axes, sources):
        ax.axhline(1, color="0.3", ls=(0, (1, 1.6)), lw=1)
        ax.set_title(weights)
        palette.describe(ax, weights=weights)
        ax.set_xlabel("layer $t$")
        ax.set_ylabel(f"median μ: {small} / {max(pivot.columns)}\nsamples")
    plotting.label_outer(axes, min(2, len(sources)))
    plotting.figure_legend(fig, axes, entries=palette.style_entries(styles))
    return fig
