"""The setup page (book/setup.md): the paper's four masks as graphs, their centres and radius, and the radius
of the window masks over a grid of N and w. One frozen config (= the page's parameters) and one function.

:class:`SetupConfig` has exactly the fields of the page's ``parameters`` cell, with the same defaults, and is
validated once in ``__post_init__`` (one ValueError naming the parameter and the allowed values);
:func:`configure` builds it from a reader's parameters, :func:`compute` gives what the page shows, its
``numbers`` the values its prose glues. :func:`show` is what the page shows of it: those numbers, the masks
figure, the radius table, and the thresholds of the verdict rules and effects its last section states.

Used by: book/setup.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_theory.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from pandas.io.formats.style import Styler
from torch import Tensor

from rankcollapse.book.labels import MASK_LABELS
from rankcollapse.book.pages._common import MAX_SYSTEM_TOKENS, own_config
from rankcollapse.book.plotting.theory import mask_grid
from rankcollapse.book.shown import Shown, config_figures, prefixed
from rankcollapse.core import masks
from rankcollapse.core.checks import check_int, check_ints, freeze_lists
from rankcollapse.core.masks import PAPER_MASKS
from rankcollapse.verdicts import effects, robustness
from rankcollapse.verdicts.rules import rule_numbers


@dataclass(frozen=True)
class SetupConfig:
    """The parameters of ``book/setup.md``."""

    n_tokens: int = 16  # N, tokens in the pictured masks
    window: int = 3  # w, window half-width (sliding) and size (uni-directional)
    table_n_tokens: tuple[int, ...] = (8, 16, 32, 64, 128)  # N values of the radius table
    table_windows: tuple[int, ...] = (1, 2, 4, 8)  # w values of the radius table

    def __post_init__(self) -> None:
        freeze_lists(self, "table_n_tokens", "table_windows")
        check_int("n_tokens", self.n_tokens, 2, 64)
        check_int("window", self.window, 1, self.n_tokens - 1)
        check_ints("table_n_tokens", self.table_n_tokens, 2, MAX_SYSTEM_TOKENS)
        check_ints("table_windows", self.table_windows, 1, MAX_SYSTEM_TOKENS - 1)
        if min(self.table_windows) >= max(self.table_n_tokens):
            raise ValueError(f"table_windows must hold a window below max(table_n_tokens) = "
                             f"{max(self.table_n_tokens)}, got {self.table_windows!r}")


@dataclass(frozen=True)
class SetupResult:
    """The paper's four masks with their graphs, and the radius table (checked against closed forms)."""

    masks: dict[str, Tensor]  # mask name -> [token, token] bool, the paper's four masks
    graphs: dict[str, masks.MaskGraph]  # mask name -> centers, radius (BFS)
    radii: pd.DataFrame  # index N, columns (mask, w): radius by BFS
    numbers: dict[str, object]  # glued values


def compute(config: SetupConfig) -> SetupResult:
    """The setup page: the four masks at ``n_tokens``, ``window`` and the radius of the window masks over
    a grid of N and w, each radius from BFS checked against ``ceil(floor(N/2)/w)`` and ``ceil((N-1)/w)``.

    Shapes: every mask ``[token, token]`` bool.
    """
    shown = {name: masks.build_mask(name, config.n_tokens, window=config.window) for name in PAPER_MASKS}
    graphs = {name: masks.describe_mask(mask) for name, mask in shown.items()}
    rows = []
    for n in config.table_n_tokens:
        for w in (w for w in config.table_windows if w < n):
            r_sliding = masks.graph_radius(masks.sliding_window_mask(n, w))
            r_uni = masks.graph_radius(masks.causal_sliding_window_mask(n, w))
            if (r_sliding, r_uni) != (math.ceil((n // 2) / w), math.ceil((n - 1) / w)):
                raise AssertionError(f"BFS radius disagrees with the closed form at N={n}, w={w}")
            rows += [{"N": n, "w": w, "mask": MASK_LABELS["sliding_window"], "r": r_sliding},
                     {"N": n, "w": w, "mask": MASK_LABELS["causal_sliding_window"], "r": r_uni}]
    radii = pd.DataFrame(rows).pivot(index="N", columns=["mask", "w"], values="r").sort_index(axis=1)
    n_max, w_min = max(config.table_n_tokens), min(config.table_windows)
    numbers = {"setup_n_tokens": config.n_tokens, "setup_window": config.window,
               "setup_radius_sliding": graphs["sliding_window"].radius,
               "setup_radius_uni": graphs["causal_sliding_window"].radius,
               "setup_table_n_max": n_max, "setup_table_w_min": w_min,
               "setup_radius_nmax_wmin": int(radii.loc[n_max, (MASK_LABELS["causal_sliding_window"], w_min)])}
    return SetupResult(shown, graphs, radii, numbers)


configure = own_config(SetupConfig)


def radius_table(radii: pd.DataFrame) -> Styler:
    """The radius table as the page shows it: a row per N (``N = 8``), the masks as column groups over their
    windows (``w = 1``), no index or level names in the header."""
    shown = radii.rename(columns=lambda w: f"w = {w}", level="w").rename(index=lambda n: f"N = {n}")
    return (shown.style.format("{:.0f}", na_rep="—").hide(names=True, axis="columns")
            .hide(names=True, axis="index"))


def show(results: dict[str, tuple], parameters: dict) -> Shown:
    """The page's numbers (``setup_*``), the thresholds of the verdict rules (``verdicts_*``) and of the
    effects (``effects_*``), the radius table (``setup_radii``: :func:`radius_table`) and the masks
    figure; first its self-checks (the complete mask has radius 1, the causal mask token 0 as its only
    centre, the uni-directional window radius ceil((N - 1) / w)). ``results``: ``{"main": Computed(config,
    SetupResult, seconds)}`` (:class:`rankcollapse.book.registry.Computed`)."""
    config, result, _ = results["main"]
    assert result.graphs["complete"].radius == 1 and result.graphs["causal"].centers == (0,)
    radius_uni = -(-(config.n_tokens - 1) // config.window)  # ceil((N - 1) / w)
    assert result.numbers["setup_radius_uni"] == radius_uni
    rules = prefixed("verdicts", {**rule_numbers(), **robustness.grid_words()})
    return Shown(values={**result.numbers, **rules, **prefixed("effects", effects.effect_numbers())},
                 tables={"setup_radii": radius_table(result.radii)},
                 figures=config_figures({"fig-setup-masks": mask_grid(result.masks)}, config))
