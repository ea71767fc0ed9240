"""The figures of the reviewers' questions page (book/response/reviewers.md), one function per question.

Drawn like the theory pages' figures (:mod:`rankcollapse.book.plotting.theory`): one text column wide
through :func:`rankcollapse.book.plotting.common.panel_grid`, the theme's font sizes, legends below.

Used by: :mod:`rankcollapse.book.pages.reviewers` (its ``show``), tests/unit/test_reviewers_samples.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch import Tensor

from rankcollapse.book.labels import mask_label
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette
from rankcollapse.core.norms import NORM_LABELS
from rankcollapse.theory.rates import layer_rates

_LOG10 = math.log(10)


def decay_shape_figure(complete: Tensor, linear: dict[str, Tensor]) -> Figure:
    """Q4. Left: log10 mu against the layer for the complete mask with attention logits (median over
    samples, exact below the floor) and the linear cases; right: ``log(-log(mu(t)/mu(0)))``, a straight
    rising line for doubly exponential decay, flattening for exponential decay.

    Shapes: complete ``[sample, layer + 1]`` (natural log); every linear curve ``[layer + 1]`` (natural log).
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=2.9)
    median = complete.median(dim=0).values
    n = median.shape[0]
    curves = {"complete, attention logits": median,
              **{f"{mask_label(k)}, linear": v[:n] for k, v in linear.items()}}
    for k, (label, curve) in enumerate(curves.items()):
        t = np.arange(curve.shape[0])
        left.plot(t, curve.numpy() / _LOG10, "o-", color=f"C{k}", lw=2, ms=4, label=label)
        drop = (curve[0] - curve).numpy()
        keep = (drop > 0) & np.isfinite(drop)
        right.plot(t[keep], np.log(drop[keep]), "o-", color=f"C{k}", lw=2, ms=4)
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
    """Q4. The decay per layer ``log mu(t) - log mu(t + 1)`` of the linear cases, with
    ``log 2 = -log|λ₂|``.

    Shapes: every curve ``[layer + 1]`` (natural log).
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.6)
    for k, (name, curve) in enumerate(linear.items()):
        ax.plot(np.arange(1, curve.shape[0]), layer_rates(curve).numpy(), color=f"C{k + 1}", lw=2,
                label=mask_label(name))
    ax.axhline(log2, color="0.3", lw=1, ls=":", label=r"$-\log|\lambda_2| = \log 2$")
    ax.set_xlabel("layer $t$")
    ax.set_ylabel("decay per layer")
    ax.set_ylim(0, 1.5 * log2)
    plotting.figure_legend(fig, [ax])
    return fig


def rotation_figure(paths: dict[float, Tensor], limits: pd.DataFrame) -> Figure:
    """Q2. The rotated counterexample's two tokens on the unit circle for every rotation (token 1 solid,
    token 2 dashed), token 1's limit ``(0, 1) Z`` marked.

    Shapes: every path ``[layer + 1, token, 2]``; ``limits`` indexed by angle with token 1 limit x, y.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=3.6)
    circle = torch.linspace(0, 2 * math.pi, 200)
    ax.plot(torch.cos(circle), torch.sin(circle), color="0.8", lw=1)
    for k, (angle, path) in enumerate(paths.items()):
        ax.plot(path[:, 0, 0], path[:, 0, 1], "-", color=f"C{k}", lw=1.5, label=f"Z: angle {angle:g}")
        ax.plot(path[:, 1, 0], path[:, 1, 1], "--", color=f"C{k}", lw=1.5)
        ax.plot(limits.loc[angle, "token 1 limit x"], limits.loc[angle, "token 1 limit y"], "*",
                color=f"C{k}", ms=12)
    ax.plot([], [], "*", color="0.3", ms=10, label="(0, 1) Z")
    ax.plot([], [], "--", color="0.3", label="token 2")
    ax.set_aspect("equal")
    ax.set_xlabel("coordinate 1")
    ax.set_ylabel("coordinate 2")
    plotting.figure_legend(fig, [ax])
    return fig


def path_figure(s: Tensor, mu: Tensor, depths: tuple[int, ...], jump: float) -> Figure:
    """Q1 (continuity). mu at each depth against the path parameter s, the located jump dotted.

    Shapes: s ``[point]``, mu ``[depth, point]``.
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.8)
    for k, depth in enumerate(depths):
        ax.plot(s, mu[k].clamp(min=1e-300), "o-", color=f"C{k}", ms=3, lw=1.5, label=f"depth {depth}")
    ax.axvline(jump, color="0.3", ls=":", lw=1, label=f"jump at s = {jump:.4f}")
    ax.set_yscale("log")
    ax.set_xlabel(r"$s$ in $W_V = (1-s)\,I + s\,W$")
    ax.set_ylabel(r"$\mu(X^{(t)})$")
    plotting.figure_legend(fig, [ax])
    return fig


def width_figure(widths: pd.DataFrame) -> Figure:
    """Q2 (width). Per mask, the fitted rate of mu against the width d per value-weight law (median over
    seeds, min-max bar), on a log width axis.

    Shapes: ``widths`` rows of mask, law, width, seed, rate.
    """
    shown = list(dict.fromkeys(widths["mask"]))
    fig, axes = plotting.panel_grid(len(shown), panel_height=2.4, sharex=True)
    for ax, name in zip(axes, shown):
        rows = widths[widths["mask"] == name]
        for k, (law, group) in enumerate(rows.groupby("law", sort=False)):
            stats = group.groupby("width")["rate"].agg(["median", "min", "max"])
            ax.errorbar(stats.index, stats["median"],
                        yerr=[stats["median"] - stats["min"], stats["max"] - stats["median"]],
                        fmt="o-", color=f"C{k}", ms=4, lw=1.5, capsize=2, label=f"$W_V$ {law}")
        ax.set_xscale("log", base=2)
        ax.set_title(mask_label(name))
        ax.set_xlabel("width $d$")
        ax.set_ylabel("rate of μ per layer")
    plotting.label_outer(axes, min(2, len(shown)))
    plotting.figure_legend(fig, axes)
    return fig


def limits_figure(table: pd.DataFrame, limit_table: pd.DataFrame) -> Figure:
    """Q1. ‖X‖_F over its layer-1 value (left) and μ/‖X‖_F (right) per configuration of a tidy
    experiments table (medians), coloured by the configuration's limit
    (:func:`rankcollapse.verdicts.limits.table_limits`).

    Shapes: ``table`` tidy (metric, layer, median, labels); ``limit_table`` one row per configuration.
    """
    fig, (left, right) = plotting.panel_grid(2, panel_height=2.9)
    colours = {limit: f"C{k}" for k, limit in enumerate(dict.fromkeys(limit_table["limit"]))}
    labels = [c for c in ("weights", "variant", "mask", "window", "temperature", "norm", "skip")
              if c in table.columns]
    for _, row in limit_table.iterrows():
        chosen = np.ones(len(table), dtype=bool)
        for c in labels:
            chosen &= (table[c].isna() & pd.isna(row[c])) | (table[c] == row[c])
        group = table[chosen]
        norm = group[group["metric"] == "norm"].sort_values("layer")
        relative = group[group["metric"] == "relative_mu"].sort_values("layer")
        style = "-" if row["weights"] == "initialized" else "--"
        left.plot(norm["layer"], norm["median"] / norm["median"].iloc[1], style, color=colours[row["limit"]],
                  lw=1.2)
        right.plot(relative["layer"], relative["median"], style, color=colours[row["limit"]], lw=1.2,
                   label=row["limit"])
    right.plot([], [], "--", color="0.3", label="pretrained (dashed)")
    for ax, label in ((left, r"$\|X^{(t)}\|_F / \|X^{(1)}\|_F$"), (right, r"$\mu/\|X\|_F$")):
        ax.set_yscale("log")
        ax.set_xlabel("layer $t$")
        ax.set_ylabel(label)
    plotting.figure_legend(fig, [right])
    return fig


def temperature_figure(alignment: pd.DataFrame) -> Figure:
    """The temperature question. Per weight source, the layer's own temperature effect against how far the
    entering tokens are from aligned (1 - mean |cos|, log axes), one colour per mask, points labelled by
    nothing (the layer grows to the left as the tokens align).

    Shapes: ``alignment`` rows of weights, mask, layer, effect, cosine.
    """
    shown = list(dict.fromkeys(alignment["weights"]))
    fig, axes = plotting.panel_grid(len(shown), panel_height=2.8, sharey=True)
    masks = list(dict.fromkeys(alignment["mask"]))
    for ax, weights in zip(axes, shown):
        rows = alignment[alignment["weights"] == weights]
        for k, name in enumerate(masks):
            group = rows[rows["mask"] == name]
            ax.plot((1 - group["cosine"]).clip(lower=1e-12), group["effect"].clip(lower=1e-6), "o-",
                    color=f"C{k}", ms=4, lw=1, label=mask_label(name))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.invert_xaxis()
        ax.set_title(weights)
        ax.set_xlabel(r"$1 - $ mean $|\cos|$ (input)")
        ax.set_ylabel("temperature effect per layer")
    plotting.label_outer(axes, min(2, len(shown)))
    plotting.figure_legend(fig, axes)
    return fig


def _norm_colours(norms) -> dict[str, object]:
    """Each norm's variant colour (:data:`rankcollapse.book.plotting.palette.VARIANT_COLOURS`), by norm
    name."""
    colours = palette.hue_colours({"variant": [NORM_LABELS[n] for n in norms]}, "variant")
    return {n: colours[NORM_LABELS[n]] for n in norms}


def local_figure(local: pd.DataFrame) -> Figure:
    """Q (local or causal). Per weight source, the mean decay rate per layer of μ/‖X‖_F for the causal
    mask and the windows (x axis), one line per norm in its variant colour: a window is more effective where
    its point lies below the causal one.

    Shapes: ``local`` one row per (weights, norm), a column per mask
    (:func:`~rankcollapse.book.pages._reviewers_sweeps.local_or_causal`).
    """
    shown = list(dict.fromkeys(local["weights"]))
    masks = [m for m in ("causal", "sliding_window", "causal_sliding_window") if m in local.columns]
    colours = _norm_colours(list(dict.fromkeys(local["norm"])))
    fig, axes = plotting.panel_grid(len(shown), panel_height=2.6, sharey=True)
    for ax, weights in zip(axes, shown):
        for _, row in local[local["weights"] == weights].iterrows():
            ax.plot(range(len(masks)), [row[m] for m in masks], "o-", color=colours[row["norm"]], ms=5,
                    lw=1.5, label=NORM_LABELS[row["norm"]])
        ax.set_xticks(range(len(masks)), [mask_label(m).replace(" ", "\n") for m in masks])
        ax.set_xlim(-0.5, len(masks) - 0.5)
        ax.set_title(weights)
        ax.set_ylabel("mean rate of μ/‖X‖$_F$ per layer")
    plotting.label_outer(axes, min(2, len(shown)))
    plotting.figure_legend(fig, axes)
    return fig


def sample_size_figure(joined: pd.DataFrame | None, small: int) -> Figure:
    """Q (32 samples). Per curve of Fig. 2's sweep, the median of μ over the first ``small`` samples divided
    by its median over all, against the layer (variant colours; dashed: pretrained), equal medians dotted; a
    note instead when the small run is not stored at the shown scale.

    Shapes: ``joined`` tidy, both runs' rows told apart by ``n_samples``
    (:func:`~rankcollapse.book.pages.sample_size.pair`).
    """
    fig, (ax,) = plotting.panel_grid(1, panel_height=2.6)
    if joined is None:
        ax.text(0.5, 0.5, f"no stored Fig. 2 run on {small} samples at this scale", ha="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    mu = joined[(joined["metric"] == "mu") & (joined["layer"] >= 1) & (joined["median"] > 0)]
    pivot = mu.pivot_table(index=["weights", "norm", "mask", "layer"], columns="n_samples",
                           values="median").dropna()
    ratio = pivot[small] / pivot[max(pivot.columns)]
    colours = _norm_colours(list(dict.fromkeys(pivot.index.get_level_values("norm"))))
    for (weights, norm, _), curve in ratio.groupby(level=["weights", "norm", "mask"], sort=False):
        ax.plot(curve.index.get_level_values("layer"), curve.to_numpy(),
                "-" if weights == "initialized" else "--", color=colours[norm], lw=1.2,
                label=NORM_LABELS[norm])
    ax.axhline(1, color="0.3", ls=":", lw=1)
    ax.plot([], [], "--", color="0.3", label="pretrained (dashed)")
    ax.set_xlabel("layer $t$")
    ax.set_ylabel(f"median μ: {small} / {max(pivot.columns)} samples")
    plotting.figure_legend(fig, [ax])
    return fig
