"""The book's visual language, in one place: every figure of the book draws with it.

The rule, the same on every page:

* a **mask** is a colour and a marker (:data:`MASK_STYLES`): Okabe and Ito's colour-blind-safe colours for the
  paper's four masks and the no-mixing control, Tol's muted ones for the other masks, black for the full
  transformer (its model's own mask);
* a **normalization** is a line style (:data:`NORM_STYLES`): solid pure attention, dashed the paper's
  LayerNorm D, dotted the model's own (trained) norm, dash-dot RMSNorm, dash-dot-dot LayerNorm without affine;
* any **other dimension** a figure tells apart by colour (temperature, skip connection, weight source, sample
  count, seed, width, depth, outcome, ...) takes the greys of :func:`non_mask_colours`, dark to light in the
  dimension's order: never a mask's colour; or it gets panels of its own;
* the theory's **predicted lines** are thin dark-grey dotted lines (:data:`THEORY`).

A figure's drawn series are described (:func:`describe`: mask, norm, weights, ... and which dimension the
colour encodes), so its CSV download names every dimension it draws (:mod:`rankcollapse.book.plotting.drawn`)
and a test reads every exported figure back and checks the rule.

Used by: every plotting module (:mod:`rankcollapse.book.plotting`), the page modules that build figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from matplotlib.colors import to_hex
from matplotlib.lines import Line2D

from rankcollapse.book.labels import mask_label, norm_label


@dataclass(frozen=True)
class MaskStyle:
    """A mask's colour (hex) and marker, the same on every figure."""

    colour: str
    marker: str


# One colour and one marker per mask: every name of core.masks.MASK_NAMES (tests/unit/test_palette.py checks),
# and "model", the full transformer's own mask. Okabe-Ito for the paper's four and "self", Tol's muted scheme
# for the other masks.
MASK_STYLES = {
    "complete": MaskStyle("#0072b2", "o"),  # blue
    "causal": MaskStyle("#d55e00", "s"),  # vermilion
    "sliding_window": MaskStyle("#009e73", "^"),  # bluish green
    "causal_sliding_window": MaskStyle("#cc79a7", "D"),  # reddish purple
    "self": MaskStyle("#e69f00", "X"),  # orange: no mixing
    "strided": MaskStyle("#56b4e9", "v"),  # sky blue
    "dilated_window": MaskStyle("#882255", "P"),  # wine
    "global_window": MaskStyle("#999933", "h"),  # olive
    "random": MaskStyle("#332288", "*"),  # indigo
    "prefix": MaskStyle("#117733", ">"),  # green: prefix-LM attention
    "model": MaskStyle("#000000", "p"),  # black: the full transformer under its model's own mask
}
MASK_COLOURS = frozenset(style.colour for style in MASK_STYLES.values())

# One line style per normalization (core.norms.NORM_NAMES)
NORM_STYLES: dict[str, object] = {
    "none": "-",
    "unit": (0, (5, 2)),
    "model": (0, (1, 1.3)),
    "rms": (0, (5, 1.5, 1, 1.5)),
    "layernorm": (0, (5, 1.5, 1, 1.5, 1, 1.5)),
}

# The greys of the non-mask series, darkest and lightest: never black (the full transformer's) nor a mask's.
_GREY_DARK, _GREY_LIGHT = 0.22, 0.68
# The theory's predicted lines, and the neutral colour of legend entries that stand for a line style only.
THEORY = {"color": "#4d4d4d", "lw": 1.1, "ls": (0, (1, 1.6))}
NEUTRAL = "#4d4d4d"
THEORY_LABEL = "theory"

# The dimensions a figure's series are described by, in the order its CSV names them.
DIMENSIONS = ("weights", "variant", "mask", "window", "norm", "skip", "temperature", "n_samples")
# Non-mask dimensions in the order one takes the colour when a figure's curves differ in several.
_COLOUR_ORDER = ("temperature", "skip", "n_samples", "weights")

def mask_style(mask: str) -> MaskStyle:
    """The colour and marker of ``mask`` (a name of MASK_STYLES).

    >>> mask_style("causal")
    MaskStyle(colour='#d55e00', marker='s')
    """
    if mask not in MASK_STYLES:
        raise ValueError(f"mask must be one of {', '.join(MASK_STYLES)}; got {mask!r}")
    return MASK_STYLES[mask]


def norm_style(norm: str) -> object:
    """The line style of ``norm`` (a name of NORM_STYLES).

    >>> norm_style("none"), norm_style("unit")
    ('-', (0, (5, 2)))
    """
    if norm not in NORM_STYLES:
        raise ValueError(f"norm must be one of {', '.join(NORM_STYLES)}; got {norm!r}")
    return NORM_STYLES[norm]


def _order_key(value: object) -> tuple:
    """Numbers in order (a missing value last), anything else as it came."""
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and not missing
    return (missing, float(value) if number else 0.0)


def non_mask_colours(values: Iterable[object]) -> dict[object, str]:
    """One grey per value of a non-mask dimension, dark to light: numbers in increasing order (a missing
    value last), other values in the order given (``False`` before ``True``). Never a mask's colour.

    >>> non_mask_colours([64.0, 1.0])
    {1.0: '#383838', 64.0: '#adadad'}
    """
    ordered = sorted(dict.fromkeys(values), key=_order_key)
    n = len(ordered)
    greys = [_GREY_DARK + (_GREY_LIGHT - _GREY_DARK) * k / max(n - 1, 1) for k in range(n)]
    return {value: to_hex((g, g, g)) for value, g in zip(ordered, greys)}


# ---------------------------------------------------------------- describing what a figure draws

_DESCRIBED: WeakKeyDictionary = WeakKeyDictionary()


def describe(artist, **dims) -> None:
    """Record what ``artist`` (a line, band, scatter, bar, or a panel's axes) draws: its dimensions (mask,
    norm, weights, ...), ``series`` (the curve it belongs to, for bands and markers) and ``colour_encodes``
    (the dimension its colour stands for). The figure's CSV reads them (:func:`description`); a panel's
    dimensions hold for everything in it."""
    _DESCRIBED[artist] = {**_DESCRIBED.get(artist, {}), **{k: v for k, v in dims.items() if v is not None}}


def description(artist) -> dict:
    """What :func:`describe` recorded of ``artist`` ({} when nothing)."""
    return dict(_DESCRIBED.get(artist, {}))


# ---------------------------------------------------------------- the style of a layer curve


@dataclass(frozen=True)
class CurveStyle:
    """How one curve is drawn: its colour (hex), marker, line style, and its dimensions (with
    ``colour_encodes``), which :func:`describe` records on everything drawn for it."""

    colour: str
    marker: str | None
    linestyle: object
    dims: dict = field(default_factory=dict)


def _single(values) -> object:
    """The one value of ``values`` (a pandas column), or None when there are several or none."""
    unique = list(dict.fromkeys(values.tolist()))
    return unique[0] if len(unique) == 1 else None


def curve_dims(table, hue: str | list[str]) -> dict[object, dict]:
    """Per ``hue`` value (per tuple of values when ``hue`` lists columns: a panel's and its curve's), the
    dimensions (DIMENSIONS) that have one value over all its rows.

    Shapes: ``table`` tidy, one or more rows per curve."""
    return {name: {d: v for d in DIMENSIONS if d in rows and (v := _single(rows[d])) is not None
                   and not (isinstance(v, float) and math.isnan(v))}
            for name, rows in table.groupby(hue, sort=False)}


def colour_dimension(dims: Mapping[object, dict]) -> str:
    """The dimension the colour of these curves encodes: the first non-mask dimension (_COLOUR_ORDER) in which
    the curves of one panel differ (a curve keyed by a tuple: its panel is all but its last value), else
    ``mask``; ``series`` when they name no mask and no such dimension."""
    panels: dict[object, list[dict]] = {}
    for name, d in dims.items():
        if d.get("mask") != "model":
            panels.setdefault(name[:-1] if isinstance(name, tuple) else None, []).append(d)
    for dim in _COLOUR_ORDER:
        if any(len({repr(d.get(dim)) for d in curves}) > 1 for curves in panels.values()):
            return dim
    return "mask" if any(d.get("mask") in MASK_STYLES for d in dims.values()) else "series"


def curve_styles(table, hue: str | list[str]) -> dict[object, CurveStyle]:
    """The style of every curve, by ``hue`` value (by tuple of values when ``hue`` lists columns, the curve's
    own last): a mask's colour and marker (MASK_STYLES) where the colour encodes the mask
    (:func:`colour_dimension`), else the greys of :func:`non_mask_colours` by that dimension (by the curve's
    own hue value for ``series``, or a mask the palette does not know), with the mask's marker; the line style
    of its norm (solid without one); the full transformer always in its mask's black."""
    dims = curve_dims(table, hue)
    colour_by = colour_dimension(dims)
    own = hue[-1] if isinstance(hue, list) else hue

    def masked(d: dict) -> bool:  # drawn in its mask's colour
        return d.get("mask") == "model" or (colour_by == "mask" and d.get("mask") in MASK_STYLES)

    def value(name, d: dict) -> object:  # what its grey stands for
        series = name[-1] if isinstance(hue, list) else name
        return series if colour_by in ("mask", "series") else d.get(colour_by)

    greys = non_mask_colours(value(name, d) for name, d in dims.items() if not masked(d))
    styles = {}
    for name, d in dims.items():
        mask = MASK_STYLES.get(d.get("mask"))
        by = "mask" if masked(d) else own if colour_by in ("mask", "series") else colour_by
        styles[name] = CurveStyle(mask.colour if masked(d) else greys[value(name, d)],
                                  mask.marker if mask else None, NORM_STYLES.get(d.get("norm"), "-"),
                                  {**d, "series": str(name[-1] if isinstance(hue, list) else name),
                                   "colour_encodes": by})
    return styles


# ---------------------------------------------------------------- legends: one entry per meaning


def value_words(dim: str, value: object) -> str:
    """A dimension's value in a legend's words: a mask's or norm's words, ``+ skip``, a temperature as
    ``$d_{QK} = 1/64$`` (math), a sample count, a weight source.

    >>> value_words("temperature", 1 / 64), value_words("skip", True), value_words("n_samples", 32)
    ('$d_{QK} = 1/64$', '+ skip connection', '32 samples')
    """
    if dim == "mask":
        return "full transformer" if value == "model" else mask_label(str(value))
    if dim == "norm":
        return norm_label(str(value))
    if dim == "temperature":
        return temperature_words(value)
    if dim == "skip":
        return "+ skip connection" if value else "no skip connection"
    if dim == "n_samples":
        return f"{value} samples"
    if dim == "weights":
        return {"initialized": "initialized (with biases)",
                "initialized_nobias": "initialized, no biases"}.get(str(value), str(value))
    return str(value)


def temperature_words(temperature: float | None) -> str:
    """A temperature as math text: ``$d_{QK} = 1/64$``, ``$d_{QK} = 64$``; None or NaN: the layer's own
    scaling.

    >>> temperature_words(1 / 64), temperature_words(64.0), temperature_words(None)
    ('$d_{QK} = 1/64$', '$d_{QK} = 64$', 'own scaling')
    """
    if temperature is None or temperature != temperature:
        return "own scaling"
    number = f"1/{1 / temperature:.0f}" if temperature < 1 else f"{temperature:g}"
    return f"$d_{{QK}} = {number}$"


def mask_handle(mask: str, **kw) -> Line2D:
    """A legend handle for a mask: its colour and marker on a short line."""
    style = mask_style(mask)
    return Line2D([], [], color=style.colour, marker=style.marker, markersize=6, lw=1.8, **kw)


def style_entries(styles: Mapping[object, CurveStyle], masks_named: bool = False) -> dict[str, Line2D]:
    """The legend of curves drawn in ``styles``, one entry per meaning rather than per curve: each colour's
    value (a mask: its colour and marker, unless ``masks_named`` -- every panel's title names its one mask; a
    non-mask value: its grey), each norm's line style (neutral grey) when the curves have several norms, and
    the full transformer."""
    dims = [s.dims for s in styles.values() if s.dims.get("mask") != "model"]
    entries: dict[str, Line2D] = {}
    for style in styles.values():
        d, by = style.dims, style.dims["colour_encodes"]
        if d.get("mask") == "model" or (by == "mask" and masks_named):
            continue
        if by == "mask":
            entries.setdefault(value_words("mask", d["mask"]), mask_handle(d["mask"]))
        else:
            entries.setdefault(value_words(by, d.get(by)) if by in _COLOUR_ORDER else d["series"],
                               Line2D([], [], color=style.colour, lw=2.2))
    norms = list(dict.fromkeys(d["norm"] for d in dims if "norm" in d))
    if len(norms) > 1:
        entries |= {norm_label(n): Line2D([], [], color=NEUTRAL, lw=1.8, ls=NORM_STYLES.get(n, "-"))
                    for n in norms}
    if len(dims) < len(styles):
        entries[value_words("mask", "model")] = mask_handle("model", ls=NORM_STYLES["model"])
    return entries
