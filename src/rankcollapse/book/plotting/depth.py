"""The figures of the theory's SAN at depth (book/experiments/theory_san.md): μ/‖X‖_F per mask against the
linear case's prediction (:func:`depth_figure`), and each window's measured per-layer factor against the
prediction and Theorem 1's bound (:func:`factor_figure`).

Used by: :mod:`rankcollapse.book.pages.theory_san`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.book.labels import mask_title
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting.palette import hue_colours
from rankcollapse.core.masks import PAPER_MASKS
from rankcollapse.core.norms import NORM_LABELS
from rankcollapse.experiments.store import StoredResult

PAPER_WINDOW = 4  # the window of the paper's masks drawn in the first figure
_NORMS = ("none", "unit", "model")


def _pooled(parts: list[StoredResult], mask: str, window: int | None, norm: str) -> np.ndarray:
    """The 10 %, 50 % and 90 % quantiles per layer over every weight seed's samples (the per-sample values).
    Shapes: -> [3, layer + 1]."""
    curves = np.concatenate([r.samples.curve("relative_mu", weights="initialized_nobias", variant="SAN",
                                             mask=mask, window=window, norm=norm) for r in parts], axis=1)
    return np.quantile(curves, [0.1, 0.5, 0.9], axis=1)


def depth_figure(parts: list[StoredResult], predicted: dict[str, np.ndarray]) -> Figure:
    """μ/‖X‖_F over the layers under the paper's four masks (their windows at w = 4), pure attention and the
    two norms, median over every weight seed's samples with its 10–90 % band, and the linear case's
    prediction (dotted, started at pure attention's layer-1 value). The rounding floor of the run's dtype is
    shaded; a curve tracked exactly (pure attention) may go below it.

    Shapes: ``predicted`` per mask title [layer + 1].
    """
    fig, axes = plotting.panel_grid(len(PAPER_MASKS), sharex=True, sharey=True)
    colours = hue_colours(pd.DataFrame({"label": [NORM_LABELS[n] for n in _NORMS]}), "label")
    eps = float(np.finfo(np.float64 if parts[0].provenance["parameters"]["dtype"] == "float64"
                         else np.float32).eps)  # the floor of μ/‖X‖_F
    for ax, mask in zip(axes, PAPER_MASKS):
        window = PAPER_WINDOW if "window" in mask else None
        layers = None
        for norm in _NORMS:
            low, mid, high = _pooled(parts, mask, window, norm)
            layers = np.arange(len(mid))
            label = NORM_LABELS[norm]
            ax.plot(layers, mid, color=colours[label], lw=1.6, label=label)
            ax.fill_between(layers, low, high, color=colours[label], alpha=0.2, lw=0)
        line = predicted[mask_title(mask, window)]
        start = _pooled(parts, mask, window, "none")[1][1]
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(line > 0, line / line[1] * start, np.nan)
        ax.plot(layers, scaled, color="0.1", lw=1.2, ls=":", label="linear case (uniform attention, W_V = I)")
        ax.set_yscale("log")
        ax.set_title(mask_title(mask, window), fontsize="medium")
        ax.set_xlabel("layer t")
        ax.set_ylabel(plotting.axis_label("relative_mu"))
        plotting.draw_floor(ax, eps)
    plotting.label_outer(axes, 2)
    plotting.figure_legend(fig, axes)
    return fig


def factor_figure(table: pd.DataFrame) -> Figure:
    """Per window family, the measured per-layer factor of pure attention (its 1 − factor, with the interval)
    against the window, beside the linear case's factor over the same layers and its asymptotic |λ₂| (1 −
    factor on a log axis: 0.5 is a fast collapse, 10⁻³ a slow one).

    Shapes: ``table`` as from :func:`rankcollapse.book.pages.theory_san.factor_table`.
    """
    families = ("sliding_window", "causal_sliding_window")
    fig, axes = plotting.panel_grid(len(families), sharey=True)
    for ax, family in zip(axes, families):
        rows = table[table["family"] == family].sort_values("window")
        w = rows["window"].to_numpy(dtype=float)
        gap = 1 - rows["factor"].to_numpy()
        err = np.vstack([gap - (1 - rows["high"].to_numpy()), (1 - rows["low"].to_numpy()) - gap])
        ax.errorbar(w, gap, yerr=np.nan_to_num(np.abs(err)), fmt="o-", color="C0", capsize=3,
                    label="measured (95 % interval)")
        ax.plot(w, 1 - rows["predicted"], "s--", color="C1", mfc="none", label="linear case, same layers")
        ax.plot(w, 1 - rows["lambda2"], "^:", color="C2", mfc="none", label="linear case, asymptotic |λ₂|")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(w, [f"{v:g}" for v in w])
        ax.set_title(mask_title(family, None), fontsize="medium")
        ax.set_xlabel("window w")
        ax.set_ylabel("1 − factor per layer")
    plotting.figure_legend(fig, axes)
    return fig
