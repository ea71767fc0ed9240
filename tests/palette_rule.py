"""The book's visual language, checked on a figure's data download (the CSV of
:func:`rankcollapse.book.plotting.drawn.drawn_table`): what the unit test over every page's figures and the
site test over the built book's exported figures hold each figure to.

The rule (:mod:`rankcollapse.book.plotting.palette`): a series whose colour encodes its mask is drawn in that
mask's colour (and, as a line with markers, its marker); any other series in a grey (never a mask's colour); a
norm's line in its line style; and every drawn row says what its colour encodes.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.colors import to_rgb
from matplotlib.lines import _get_dash_pattern

from rankcollapse.book.plotting import palette
from rankcollapse.book.plotting.drawn import STYLE_COLUMNS, _WORDS_OF

DRAWN_KINDS = ("line", "band", "points", "markers", "bar", "settled")  # rows that draw data (not image cells)


def _grey(colour: str) -> bool:
    red, green, blue = to_rgb(colour)
    return abs(red - green) < 1e-3 and abs(green - blue) < 1e-3


def problems(drawn: pd.DataFrame, stem: str) -> list[str]:
    """Every way ``drawn`` (a figure's CSV) breaks the rule, as sentences naming ``stem``; [] when none."""
    if not set(STYLE_COLUMNS) <= set(drawn.columns):
        return [f"{stem}: the data name no colours (columns {', '.join(STYLE_COLUMNS)} missing)"]
    found = []
    data = drawn[drawn["kind"].isin(DRAWN_KINDS)]
    silent = data[data["colour_encodes"].isna() | (data["colour_encodes"].astype(str) == "")]
    if len(silent):
        found.append(f"{stem}: {len(silent)} drawn rows say not what their colour encodes "
                     f"(series {sorted(set(silent['series'].astype(str)))[:4]})")
    by_mask = data[data["colour_encodes"] == "mask"]
    if len(by_mask) and ("mask" not in by_mask or by_mask["mask"].isna().any()):
        found.append(f"{stem}: rows coloured by their mask do not name it")
        by_mask = by_mask[by_mask["mask"].notna()] if "mask" in by_mask else by_mask[:0]
    for mask, rows in by_mask.groupby("mask") if "mask" in by_mask else ():
        style = palette.mask_style(str(mask))
        colours = set(rows["colour"]) - {style.colour}
        if colours:
            found.append(f"{stem}: mask {mask} drawn in {sorted(colours)}, not its {style.colour}")
        marked = rows.loc[(rows["kind"] == "line") & rows["marker"].notna(), "marker"]
        markers = set(marked.astype(str)) - {"", "nan"}
        if markers - {style.marker}:
            found.append(f"{stem}: mask {mask} marked {sorted(markers)}, not its {style.marker!r}")
    others = data[data["colour_encodes"].notna() & (data["colour_encodes"] != "mask")]
    coloured = sorted({c for c in others["colour"].dropna() if not _grey(c)})
    if coloured:
        found.append(f"{stem}: series that are no mask drawn in colours {coloured} (not the greys)")
    if "norm" in data:
        lines = data[(data["kind"] == "line") & data["norm"].notna() & ~data["line_style"].isin(["none", ""])
                     & data["line_style"].notna()]
        for norm, rows in lines.groupby("norm"):
            if str(norm) not in palette.NORM_STYLES:
                continue
            wanted = _WORDS_OF.get(_get_dash_pattern(palette.NORM_STYLES[str(norm)]))
            if set(rows["line_style"]) - {wanted}:
                found.append(f"{stem}: norm {norm} drawn {sorted(set(rows['line_style']))}, not {wanted}")
    return found


def one_colour_per_mask(tables: dict[str, pd.DataFrame]) -> dict[str, set[str]]:
    """Over many figures' data (stem -> CSV table), each mask's colours where the colour encodes it: one each
    when the figures keep the rule."""
    colours: dict[str, set[str]] = {}
    for table in tables.values():
        if "colour_encodes" not in table or "mask" not in table:
            continue
        rows = table[(table["colour_encodes"] == "mask") & table["kind"].isin(DRAWN_KINDS)]
        for mask, group in rows.groupby("mask"):
            colours.setdefault(str(mask), set()).update(group["colour"])
    return colours
