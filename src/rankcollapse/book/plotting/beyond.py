"""Figures and tables of the "Beyond the paper" pages: the mask-design scatter and a sortable HTML table
(:func:`sortable_table`; a page shows it as a :class:`SortableTable`).

Sized for the book's 672 px text column: figures at most 7 in wide with fonts of at least 10 pt, so text
stays at or above 9 pt when the figure is shrunk to the column.

Used by: the mask-design, RMSNorm-decoder and sliding-window-model page modules
(:mod:`rankcollapse.book.pages`), tests/unit/test_mask_design.py, tests/site/test_sortable_table.py.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from rankcollapse.book.labels import mask_label
from rankcollapse.book.plotting import logaxis, palette

_FONT_PT = 10  # smallest font in these figures (>= 9 pt at the 672 px column for a 7 in figure)
_LINTHRESH = 0.01  # rates of smaller size are drawn on the symlog axis' linear part


def _symlog_rates(ax, rates) -> None:
    """A symlog y axis for rates of both signs, with labelled ticks on both sides of 0: the decades from
    _LINTHRESH up to the largest rate, 0, and below 0 the most negative of -1, -2, -5 times a power of ten
    that the rates reach, if any (the default ticks left the negative side unlabelled).

    Shapes: rates [mask, weights].
    """
    ax.set_yscale("symlog", linthresh=_LINTHRESH)
    top = math.ceil(math.log10(max(float(rates.max()), _LINTHRESH)))
    ticks = [_LINTHRESH * 10 ** k for k in range(top - round(math.log10(_LINTHRESH)) + 1)]
    low = float(rates.min())
    if low < 0:
        power = 10 ** math.floor(math.log10(-low))
        ticks = [-max(m * power for m in (1, 2, 5) if m * power <= -low), *ticks]
    ax.set_yticks([*ticks[:1], 0.0, *ticks[1:]] if low < 0 else [0.0, *ticks])
    ax.yaxis.set_major_formatter(FuncFormatter(logaxis.plain_number))
    ax.set_ylim(1.3 * low if low < 0 else -_LINTHRESH / 2, 2 * float(rates.max()))


def rate_radius_figure(table: pd.DataFrame, kinds: dict[str, tuple[str, int | None]]) -> Figure:
    """Collapse rate against radius (log-log; symlog when a rate is not positive), one panel per weight
    source, each mask in its colour and marker (``kinds``: a zoo label's mask name and window), point area ∝
    edges; masks without a radius (not quasi-strongly connected) sit at the right, marked "none". Where the
    table has ``verdict, <weights>``, a mask whose curve does not collapse is drawn hollow: its rate is a fit
    to a curve that stays put, not a rate of collapse.

    Shapes: ``table`` one row per mask with columns ``mask, edges, radius``, ``rate, <weights>`` and
    optionally ``verdict, <weights>``.
    """
    rate_columns = [c for c in table.columns if c.startswith("rate, ")]
    radius = table["radius"].astype(float)
    top = float(radius.max()) if radius.notna().any() else 1.0
    x = radius.fillna(top * 2.5)  # the "none" position, right of every radius
    fig, axes = plt.subplots(1, len(rate_columns), figsize=(7.0, 3.6), sharey=True, squeeze=False)
    any_hollow = False
    for ax, column in zip(axes[0], rate_columns):
        verdict = column.replace("rate, ", "verdict, ")
        collapses = (table[verdict].isin(("collapses", "reaches the floor")) if verdict in table
                     else pd.Series(True, index=table.index))
        for i, row in table.iterrows():
            name, window = kinds[row["mask"]]
            style, filled = palette.mask_style(name), bool(collapses[i])
            point = ax.scatter([x[i]], [row[column]], s=12 + 200 * row["edges"] / table["edges"].max(),
                               marker=style.marker, facecolor=style.colour if filled else "none",
                               edgecolor="black" if filled else style.colour, alpha=0.8 if filled else 1.0,
                               linewidth=0.5 if filled else 1.5)
            palette.describe(point, mask=name, window=window, series=row["mask"], colour_encodes="mask",
                             weights=column.removeprefix("rate, "), collapses=filled)
        any_hollow = any_hollow or not collapses.all()
        ax.set_xscale("log")
        if (table[rate_columns] > 0).all().all():
            ax.set_yscale("log")
        else:
            _symlog_rates(ax, table[rate_columns].to_numpy(dtype=float))
        ticks = sorted({2**k for k in range(12) if 2**k < top / 1.5} | {int(top)}) + [top * 2.5]
        ax.set_xticks(ticks, [*(str(t) for t in ticks[:-1]), "none"], fontsize=_FONT_PT)
        ax.minorticks_off()
        ax.set_xlabel("radius r", fontsize=_FONT_PT)
        ax.set_title(column.removeprefix("rate, ") + " weights", fontsize=_FONT_PT + 1)
        ax.tick_params(labelsize=_FONT_PT)
    axes[0][0].set_ylabel("rate of μ/‖X‖ per layer", fontsize=_FONT_PT)
    handles = [palette.mask_handle(name, ls="", label=mask_label(name))
               for name in dict.fromkeys(kind for kind, _ in (kinds[m] for m in table["mask"]))]
    if any_hollow:
        handles.append(Line2D([], [], ls="", marker="o", ms=7, mfc="none", mec="grey", mew=1.5,
                              label="hollow: does not collapse"))
    fig.legend(handles=handles, fontsize=_FONT_PT, loc="outside lower center", ncol=3, frameon=False)
    fig.set_layout_engine("constrained")
    return fig


_SORT_SCRIPT = """
(function () {
  document.querySelectorAll("table.rc-sortable:not([data-sort-bound])").forEach(function (table) {
    table.dataset.sortBound = "1";
    table.querySelectorAll("th").forEach(function (th, col) {
      th.style.cursor = "pointer";
      th.title = "sort";
      th.addEventListener("click", function () {
        var body = table.tBodies[0], rows = Array.from(body.rows);
        var up = th.dataset.order !== "up";
        table.querySelectorAll("th").forEach(function (h) { delete h.dataset.order; });
        th.dataset.order = up ? "up" : "down";
        var key = function (row) { var v = row.cells[col].dataset.value;\
 return v === undefined ? row.cells[col].textContent : v; };
        rows.sort(function (a, b) {
          var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
          var c = (isNaN(nx) || isNaN(ny)) ? String(x).localeCompare(String(y)) : nx - ny;
          return up ? c : -c;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
})();
"""


def _cell(value: object, digits: int) -> str:
    """A table cell: numbers carry their value for sorting; a missing value shows "none" and sorts last."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return '<td data-value="Infinity">none</td>'
    if isinstance(value, float):
        return f'<td data-value="{value!r}">{value:.{digits}g}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def sortable_table(table: pd.DataFrame, digits: int = 3) -> str:
    """An HTML table whose columns sort on a click (numbers as numbers, "none" last), with its script.

    Shapes: ``table`` any frame of numbers and words; -> HTML text.
    """
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(_cell(v, digits) for v in row) + "</tr>"
                   for row in table.astype(object).itertuples(index=False))
    return (f'<table class="rc-sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f"<script>{_SORT_SCRIPT}</script>")


@dataclass(frozen=True, eq=False, repr=False)
class SortableTable:
    """A table a page shows (``Shown.tables``) as :func:`sortable_table`'s HTML: a notebook displays, and
    myst-nb glues, its ``text/html``.

    >>> SortableTable(pd.DataFrame({"mask": ["causal"], "rate": [0.5]}))
    <sortable table: 1 rows x 2 columns>
    """

    table: pd.DataFrame  # any frame of numbers and words
    digits: int = 3  # significant digits of a number

    def _repr_html_(self) -> str:
        """The table's HTML with its sorting script (:func:`sortable_table`)."""
        return sortable_table(self.table, self.digits)

    def __repr__(self) -> str:
        return f"<sortable table: {len(self.table)} rows x {len(self.table.columns)} columns>"
