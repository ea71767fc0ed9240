"""The book's colours: one per variant, the same on every page (:data:`VARIANT_COLOURS`), the colour-blind
palette's other colours for the other hues (:func:`hue_colours`), and a control's legend label.

Used by: :mod:`rankcollapse.book.plotting.common` (layer curves and grids),
:mod:`rankcollapse.book.plotting.controls`, :mod:`rankcollapse.book.plotting.reviewers` and
:mod:`rankcollapse.book.plotting.theory`.
"""

from __future__ import annotations

import seaborn as sns

from rankcollapse.core.norms import NORM_LABELS

# One colour per variant for the whole book, as indices into seaborn's colour-blind palette (0 blue, 1 orange,
# 2 green, 3 vermilion, 4 orchid, 5 brown, 6 pink, 7 grey, 8 yellow, 9 sky blue): pure attention is blue on
# every page, the paper's LayerNorm D orange, the model's own norm green, the full transformer grey.
_SKIP = " + skip"
VARIANT_COLOURS = {
    NORM_LABELS["none"]: 0, NORM_LABELS["unit"]: 1, NORM_LABELS["model"]: 2, NORM_LABELS["rms"]: 4,
    NORM_LABELS["layernorm"]: 5, "attention" + _SKIP: 9, NORM_LABELS["model"] + _SKIP: 6,
    NORM_LABELS["rms"] + _SKIP: 3, NORM_LABELS["unit"] + _SKIP: 8,
    "full transformer": 7,
    "d_QK = 1/64": 3, "d_QK = 1": 4, "d_QK = 64": 5, "own scaling": 0,  # Fig. 3's temperatures
}


# a control's legend label: its variant's, then this; drawn in the variant's colour
CONTROL_SUFFIX = ", no biases"


def _variant(label: str) -> str:
    """A label without its sample count or control suffix (``pure attention, no biases`` ->
    ``pure attention``)."""
    head, _, tail = label.rpartition(", ")
    return head if head and (tail.endswith(" samples") or f", {tail}" == CONTROL_SUFFIX) else label


def hue_colours(table, hue: str) -> dict:
    """One colour-blind-safe colour per ``hue`` value: a variant's colour from VARIANT_COLOURS (the same on
    every page), other values the palette's unused colours in order of appearance, so that a curve keeps
    its colour in every panel of a figure."""
    names = list(dict.fromkeys(table[hue]))
    palette = sns.color_palette("colorblind", n_colors=max(10, 2 * len(names)))
    fixed = {name: palette[VARIANT_COLOURS[_variant(str(name))]] for name in names
             if _variant(str(name)) in VARIANT_COLOURS}
    if fixed:  # the other values take the palette's second round, never a variant's colour
        free = iter(palette[10:] + palette[:10])
    else:  # masks and other non-variants: the palette in order, orchid before vermilion (orange's look-alike)
        palette[3], palette[4] = palette[4], palette[3]
        free = iter(palette)
    return {name: fixed[name] if name in fixed else next(free) for name in names}
