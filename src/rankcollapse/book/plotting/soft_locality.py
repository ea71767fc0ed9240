"""The figure of the soft-locality page (book/beyond/soft_locality.md): per direction (bidirectional,
causal), 1 − the measured per-layer factor of pure attention under each decay slope, beside the linear
case's |λ₂| and, bidirectional, the hard window of the matched width. The book's visual language
(:mod:`rankcollapse.book.plotting.palette`): a mask's colour and marker, the theory's thin grey dotted line.

Used by: :mod:`rankcollapse.book.pages.soft_locality`.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.book.labels import mask_label
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette
from rankcollapse.book.plotting.depth import factor_series


def slope_figure(table: pd.DataFrame, n_tokens: int) -> Figure:
    """Per direction, 1 − the measured per-layer factor (with its interval) against the slope m, in the
    mask's colour and marker; the linear case's over the same layers and its asymptotic 1 − |λ₂| (the
    theory); bidirectional, the matched window's measured 1 − factor (the sliding window's colour, hollow).
    On log axes: 0.5 is a fast collapse, 10⁻³ a slow one; a point missing is a factor not fitted (collapsed
    onto the floor at once, or not resolved).

    Shapes: ``table`` as from :func:`rankcollapse.book.pages.soft_locality.slope_table`.
    """
    fig, axes = plotting.panel_grid(2, sharey=True)
    for ax, mask in zip(axes, ("complete", "causal")):
        rows = table[table["mask"] == mask].sort_values("slope")
        m = rows["slope"].to_numpy(dtype=float)
        factor_series(ax, m, rows, mask, prefix="decay: ")
        if mask == "complete":
            window = palette.mask_style("sliding_window")
            matched, = ax.plot(m, 1 - rows["window_factor"].to_numpy(dtype=float), ls="none",
                               marker=window.marker, mfc="none", color=window.colour, markersize=8,
                               label="matched hard window: measured")
            palette.describe(matched, mask="sliding_window", series="matched window, measured",
                             colour_encodes="mask")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(m, [f"{v:g}" for v in m])
        ax.set_title(f"{mask_label(mask)} + decay, N = {n_tokens}", fontsize="medium")
        ax.set_xlabel("decay slope m")
    axes[0].set_ylabel("1 − factor per layer")  # shared by both panels
    plotting.figure_legend(fig, axes)
    return fig
