"""The figure of each layer's change of μ split into the value maps' gain and attention's contraction.

Per layer (x) and mask (its colour and marker): the median over samples of the value gain g_V = ‖PY‖/‖PX‖ (top
row) and of the attention contraction c_A = ‖PAY‖/‖PY‖ (bottom row) with their 10–90 % band, one column per
weight source, on log axes with the line 1 (no change) drawn; layers whose input already sat on the rounding
floor are left out (their factors are rounding noise). Sized for the book's 672 px column (7 in wide, fonts >=
10 pt).

A stored sweep's figure is shown with its cite block by :func:`decomposition_shown`.

Used by: the page modules of Fig. 2 (:mod:`rankcollapse.book.pages.fig2`) and mask design
(:mod:`rankcollapse.book.pages.mask_design`), tests/unit/test_mask_design.py.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from rankcollapse.book.labels import mask_label
from rankcollapse.book.plotting import logaxis, overlap, palette
from rankcollapse.book.shown import ShownFigure, figure_data
from rankcollapse.experiments.store import StoredResult

_FONT_PT = 10  # smallest font (>= 9 pt at the 672 px column for a 7 in figure)
AXIS_BOTTOM = 0.05  # a panel's log axis stops here; masks below it (the complete mask's collapse) are named
_ROWS = {"value_gain": "value gain $g_V$", "attention_contraction": "attention contraction $c_A$"}


def mask_kinds(labels, kinds: dict[str, tuple[str, int | None]] | None = None) -> dict[str, tuple]:
    """Each mask label's mask name and window (``kinds``; else the label read back as a mask's words or name),
    and the marker fill that tells windows of one mask apart (full for its first, then hollow, half, ...).

    >>> mask_kinds(["causal", "window ±1", "window ±8"], {"window ±1": ("sliding_window", 1),
    ...                                                   "window ±8": ("sliding_window", 8)})["window ±8"]
    ('sliding_window', 8, 'none')
    """
    names = {**{mask_label(m): (m, None) for m in palette.MASK_STYLES},
             **{m: (m, None) for m in palette.MASK_STYLES}, **(kinds or {})}
    seen: dict[str, int] = {}
    found = {}
    for label in labels:
        mask, window = names[label]
        found[label] = (mask, window, _FILLS[seen.get(mask, 0) % len(_FILLS)])
        seen[mask] = seen.get(mask, 0) + 1
    return found


_FILLS = ("full", "none", "left", "bottom")


def decomposition_figure(frame: pd.DataFrame, titles: dict[str, str] | None = None,
                         kinds: dict[str, tuple[str, int | None]] | None = None) -> Figure:
    """Value gain and attention contraction per layer, one line per mask (its colour and marker; a second
    window of one mask with hollow markers), one column per weight source (``titles``: each source's column
    title; default ``"<source> weights"``; ``kinds``: each mask label's mask name and window, as
    :func:`mask_kinds` reads them).

    Shapes: ``frame`` as from :func:`rankcollapse.book.pages.mask_design.decomposition` (columns ``mask,
    weights, metric, layer, median, q10, q90, read``).
    """
    weights = list(dict.fromkeys(frame["weights"]))
    masks = mask_kinds(dict.fromkeys(frame["mask"]), kinds)
    fig, axes = plt.subplots(len(_ROWS), len(weights), figsize=(7.0, 5.2), sharex=True, sharey="row",
                             squeeze=False)
    shown = frame[frame["read"]]
    for i, (metric, label) in enumerate(_ROWS.items()):
        for j, source in enumerate(weights):
            ax = axes[i][j]
            # name in captions
            ax.set_label(f"{(titles or {}).get(source, f'{source} weights')}: {label.split(' $')[0]}")
            palette.describe(ax, weights=source)
            for mask, (name, window, fill) in masks.items():
                rows = shown[(shown["metric"] == metric) & (shown["weights"] == source)
                             & (shown["mask"] == mask)]
                rows = rows.sort_values("layer")
                style = palette.mask_style(name)
                dims = {"mask": name, "window": window, "series": mask, "colour_encodes": "mask"}
                line, = ax.plot(rows["layer"], rows["median"], marker=style.marker, fillstyle=fill, ms=4,
                                lw=1.5, color=style.colour, label=mask)
                band = ax.fill_between(rows["layer"], rows["q10"], rows["q90"], color=style.colour,
                                       alpha=0.15, lw=0)
                for artist in (line, band):
                    palette.describe(artist, **dims)
            ax.axhline(1.0, color="black", lw=0.8, ls=":")
            ax.set_yscale("log")
            _clip_below(ax, shown[(shown["metric"] == metric) & (shown["weights"] == source)])
            logaxis.min_log_ticks(ax, 4)  # 0.3, 0.5, 1, 2 rather than 3 x 10^-1 ... 2 x 10^0
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.tick_params(labelsize=_FONT_PT)
            if i == 0:
                ax.set_title((titles or {}).get(source, f"{source} weights"), fontsize=_FONT_PT + 1)
            if j == 0:
                ax.set_ylabel(label, fontsize=_FONT_PT)
            if i == len(_ROWS) - 1:
                ax.set_xlabel("layer", fontsize=_FONT_PT)
    overlap.restyle_coinciding(fig)  # masks drawn on top of each other get markers of their own fill
    # every mask drawn
    found = dict(kv for ax in axes.flat for kv in zip(*reversed(ax.get_legend_handles_labels())))
    labels, handles = [m for m in masks if m in found], [found[m] for m in masks if m in found]
    fig.legend(handles, labels, fontsize=_FONT_PT, frameon=False, loc="lower center", ncol=min(len(masks), 3))
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def decomposition_shown(result: StoredResult, frame: pd.DataFrame, stem: str,
                        titles: dict[str, str] | None = None) -> ShownFigure:
    """:func:`decomposition_figure` of ``frame`` (read from the stored sweep ``result``; ``titles`` as there)
    shown as ``stem``, its cite block naming ``result``'s parameters and key, drawing ``result``, with its
    computed notes (coinciding curves)."""
    parameters = {**result.provenance["parameters"], "result": result.provenance["key"]}
    return ShownFigure(stem, decomposition_figure(frame, titles), parameters, figure_data([result]),
                       notes=True)


def _clip_below(ax: Axes, rows: pd.DataFrame) -> None:
    """Stop the panel's axis at AXIS_BOTTOM when a median falls below it, and name those masks and their
    smallest median in the panel, so the other masks' factors near 1 stay readable.

    Shapes: ``rows`` one panel's rows of the decomposition frame.
    """
    below = rows[rows["median"] < AXIS_BOTTOM].groupby("mask", sort=False)["median"].min()
    if below.empty:
        return
    ax.set_ylim(bottom=AXIS_BOTTOM)
    # one line each: inside the panel
    words = "\n".join(f"{mask} (to {value:.1g})" for mask, value in below.items())
    ax.text(0.03, 0.04, f"below the axis:\n{words}", transform=ax.transAxes, fontsize=_FONT_PT)
