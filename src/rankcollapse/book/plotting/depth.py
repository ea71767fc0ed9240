"""The figures of the theory's SAN at depth (book/experiments/theory_san.md): μ/‖X‖_F per mask against the
linear case's prediction (:func:`depth_figure`), and each window's measured per-layer factor against the
linear case's (:func:`factor_figure`). The book's visual language (:mod:`rankcollapse.book.plotting.palette`):
a mask's colour and marker, a norm's line style, the theory's thin grey dotted line.

Used by: :mod:`rankcollapse.book.pages.theory_san`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rankcollapse.book.labels import mask_label, mask_title, norm_label
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette
from rankcollapse.core.masks import PAPER_MASKS
from rankcollapse.experiments.store import StoredResult

PAPER_WINDOW = 4  # the window of the paper's masks drawn in the first figure
_NORMS = ("none", "unit", "model")
_PREDICTED = "linear case (uniform attention, W_V = I)"


def _pooled(parts: list[StoredResult], mask: str, window: int | None, norm: str) -> np.ndarray:
    """The 10 %, 50 % and 90 % quantiles per layer over every weight seed's samples (the per-sample values).
    Shapes: -> [3, layer + 1]."""
    curves = np.concatenate([r.samples.curve("relative_mu", weights="initialized_nobias", variant="SAN",
                                             mask=mask, window=window, norm=norm) for r in parts], axis=1)
    return np.quantile(curves, [0.1, 0.5, 0.9], axis=1)


def depth_figure(parts: list[StoredResult], predicted: dict[str, np.ndarray]) -> Figure:
    """μ/‖X‖_F over the layers under the paper's four masks (their windows at w = 4): pure attention and the
    two norms in the mask's colour and the norms' line styles, median over every weight seed's samples with
    its 10–90 % band, and the linear case's prediction (started at pure attention's layer-1 value). The
    rounding floor of the run's dtype is drawn; pure attention, tracked exactly, may go below it.

    Shapes: ``predicted`` per mask title [layer + 1].
    """
    fig, axes = plotting.panel_grid(len(PAPER_MASKS), sharex=True, sharey=True)
    eps = float(np.finfo(np.float64 if parts[0].provenance["parameters"]["dtype"] == "float64"
                         else np.float32).eps)  # the floor of μ/‖X‖_F
    for ax, mask in zip(axes, PAPER_MASKS):
        window = PAPER_WINDOW if "window" in mask else None
        style = palette.mask_style(mask)
        palette.describe(ax, mask=mask, weights="initialized_nobias")
        layers = None
        for norm in _NORMS:
            low, mid, high = _pooled(parts, mask, window, norm)
            layers = np.arange(len(mid))
            line, = ax.plot(layers, mid, color=style.colour, ls=palette.norm_style(norm), lw=1.5,
                            marker=style.marker, markevery=16, ms=4, label=norm_label(norm))
            band = ax.fill_between(layers, low, high, color=style.colour, alpha=0.15, lw=0)
            for artist in (line, band):
                palette.describe(artist, mask=mask, norm=norm, series=norm_label(norm), colour_encodes="mask")
        line = predicted[mask_title(mask, window)]
        start = _pooled(parts, mask, window, "none")[1][1]
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(line > 0, line / line[1] * start, np.nan)
        theory, = ax.plot(layers, scaled, label=_PREDICTED, **palette.THEORY)
        palette.describe(theory, mask=mask, series=_PREDICTED, colour_encodes=palette.THEORY_LABEL)
        ax.set_yscale("log")
        ax.set_title(mask_title(mask, window), fontsize="medium")
        ax.set_xlabel("layer t")
        ax.set_ylabel(plotting.axis_label("relative_mu"))
        plotting.draw_floor(ax, eps)
    plotting.label_outer(axes, 2)
    handles = {norm_label(n): Line2D([], [], color=palette.NEUTRAL, ls=palette.norm_style(n)) for n in _NORMS}
    handles[_PREDICTED] = Line2D([], [], **palette.THEORY)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=2, frameon=False)
    return fig


def factor_figure(table: pd.DataFrame) -> Figure:
    """Per window family, 1 − the measured per-layer factor of pure attention (with its interval) against
    the window, in the family's colour and marker, beside the linear case's over the same layers and its
    asymptotic |λ₂| (grey: the theory). On a log axis: 0.5 is a fast collapse, 10⁻³ a slow one.

    Shapes: ``table`` as from :func:`rankcollapse.book.pages.theory_san.factor_table`.
    """
    families = ("sliding_window", "causal_sliding_window")
    fig, axes = plotting.panel_grid(len(families), sharey=True)
    for ax, family in zip(axes, families):
        rows = table[table["family"] == family].sort_values("window")
        w = rows["window"].to_numpy(dtype=float)
        factor_series(ax, w, rows, family)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(w, [f"{v:g}" for v in w])
        ax.set_title(mask_label(family), fontsize="medium")
        ax.set_xlabel("window w")
        ax.set_ylabel("1 − factor per layer")
    plotting.figure_legend(fig, axes)
    return fig


def factor_series(ax, x: np.ndarray, rows: pd.DataFrame, mask: str, prefix: str = "") -> None:
    """On ``ax``, against ``x``: 1 − the measured per-layer factor with its 95 % interval (the mask's colour
    and marker), the linear case's over the same layers and its asymptotic 1 − |λ₂| (the theory's grey),
    each line described for the figure's notes; ``prefix`` starts the legend labels ("decay: ").

    Shapes: x [row]; ``rows`` with columns factor, low, high, predicted, lambda2, one per x.
    """
    style = palette.mask_style(mask)
    gap = 1 - rows["factor"].to_numpy(dtype=float)
    err = np.abs(np.vstack([gap - (1 - rows["high"].to_numpy(dtype=float)),
                            (1 - rows["low"].to_numpy(dtype=float)) - gap]))
    measured = ax.errorbar(x, gap, yerr=np.nan_to_num(err), color=style.colour, marker=style.marker,
                           capsize=3, label=f"{prefix}measured, 95 % interval")
    same, = ax.plot(x, 1 - rows["predicted"], marker="o", mfc="none",
                    label=f"{prefix}linear case, same layers", **palette.THEORY)
    asymptote, = ax.plot(x, 1 - rows["lambda2"], color=palette.non_mask_colours([0, 1])[1], lw=1.0, ls=":",
                         marker="^", mfc="none", label=f"{prefix}linear case, asymptotic |λ₂|")
    palette.describe(measured.lines[0], mask=mask, series="measured", colour_encodes="mask")
    palette.describe(same, mask=mask, series="linear case, same layers", colour_encodes=palette.THEORY_LABEL)
    palette.describe(asymptote, mask=mask, series="|λ₂|", colour_encodes=palette.THEORY_LABEL)
