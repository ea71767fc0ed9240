"""The book's words for masks and norms, in one table each: legends and panel titles of every figure, the
setup page's radius table and the group names of the mask-design figure read them, so a mask or a norm is
named the same everywhere. A new mask gets its words here (and its builder in :mod:`rankcollapse.core.masks`,
its colour and marker in :mod:`rankcollapse.book.plotting.palette`).

Used by: :mod:`rankcollapse.book.plotting.palette` (legends), :mod:`rankcollapse.book.plotting.theory`
(legends, mask pictures, bar labels), :mod:`rankcollapse.book.plotting.results` (panel titles),
:mod:`rankcollapse.book.plotting.beyond` (group names), the setup page (:mod:`rankcollapse.book.pages.setup`).
"""

from __future__ import annotations

from rankcollapse.core.masks import PAPER_MASKS, WINDOWED_MASKS
from rankcollapse.core.norms import NORM_LABELS

MASK_LABELS = {"complete": "complete", "causal": "causal", "sliding_window": "sliding window",
               "causal_sliding_window": "uni-directional window", "strided": "strided",
               "dilated_window": "dilated window", "global_window": "global + window",
               "random": "random sparse", "prefix": "prefix + causal",
               "self": "no mixing (self only)",
               # "model": a pretrained model's own mask (its full transformer)
               "model": "the model's own mask"}
# A figure's words for a norm: the norms' labels, the model's own norm without naming its parameters (a
# LayerNorm has a gain and a bias, an RMSNorm a gain only; trained in a pretrained model, fresh at init).
NORM_WORDS = {**NORM_LABELS, "model": "+ the model's own norm"}
# Masks whose panel title names the window w: the paper's windowed masks (the mask-design zoo's windowed masks
# are drawn by their own figure, each with a window of its own, never under one page-wide w).
_TITLED_WINDOW_MASKS = tuple(m for m in PAPER_MASKS if m in WINDOWED_MASKS)


def mask_label(mask: str) -> str:
    """The words for a mask name (the name itself when the table has none).

    >>> mask_label("causal_sliding_window"), mask_label("my_mask")
    ('uni-directional window', 'my_mask')
    """
    return MASK_LABELS.get(mask, mask)


def mask_title(mask: str, window: int | None) -> str:
    """Words for a mask in a panel title: its label, with ``w`` for the window masks.

    >>> mask_title("sliding_window", 4), mask_title("model", None)
    ('sliding window, w = 4', "the model's own mask")
    """
    return f"{mask_label(mask)}, w = {window}" if mask in _TITLED_WINDOW_MASKS else mask_label(mask)


def norm_label(norm: str) -> str:
    """A figure's words for a norm name (the name itself when the table has none).

    >>> norm_label("none"), norm_label("model")
    ('pure attention', "+ the model's own norm")
    """
    return NORM_WORDS.get(norm, norm)
