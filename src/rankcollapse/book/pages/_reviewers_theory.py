"""The reviewers' questions that the page computes itself (book/response/reviewers.md), from
:class:`ReviewersConfig` (the page's ``parameters`` cell): Q4 (exponential or doubly exponential: the
complete mask with logits, the linear case, the window's Jordan chain), Q2 (the counterexample rotated),
Q1-continuity (a path of value matrices) and Q2-width (non-orthogonal W_V as the width grows), all in
:func:`compute`.

Used by: :mod:`rankcollapse.book.pages.reviewers` (its config and result) and the page registry
(:mod:`rankcollapse.book.registry`: its ``compute``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.book.pages._common import MAX_LAYERS, MAX_DRAWS, MAX_SEED, MAX_SYSTEM_TOKENS
from rankcollapse.core import masks, metrics
from rankcollapse.core.checks import (check_choice, check_choices, check_int, check_ints, check_numbers,
                                      check_temperature, freeze_lists)
from rankcollapse.core.masks import PAPER_MASKS
from rankcollapse.core.stats import fit_decay_rate
from rankcollapse.theory import counterexample as ce
from rankcollapse.theory import rates
from rankcollapse.theory.dynamics import (DynamicsConfig, SystemConfig, linear_rate, sample_system,
                                          summarize_collapse)

WIDTH_LAWS = ("orthogonal", "gaussian", "uniform")  # value-weight laws of the width sweep (Q2)


@dataclass(frozen=True)
class ReviewersConfig:
    """The page's own parameters (the Fig. 2 ones, prefixed ``fig2_``, go to its stored sweep)."""

    n_tokens: int = 16  # N of the theory systems (Q4, Q2-width)
    d_model: int = 8  # d of Q4's systems
    n_samples: int = 16  # random draws of X(0) and weights (Q4)
    seed: int = 0  # seed of every torch.Generator
    temperature: float = 8.0  # d_QK of Q4's attention (as on the Theorem 1 page)
    complete_layers: int = 10  # layers of the complete mask with attention logits (exact track)
    linear_layers: int = 120  # layers of the linear case
    window: int = 2  # w of the uni-directional window (it attends to w + 1 tokens)
    rotations: tuple[float, ...] = (0.3, 0.7, 1.9, 4.0)  # angles (radians) of the rotations Z (Q2)
    pair_layers: int = 40  # layers of the rotated counterexample
    path_points: int = 41  # points on the path of value matrices (Q1-continuity)
    path_depths: tuple[int, ...] = (50, 1000)  # depths at which mu is read along the path
    bisection_rounds: int = 8  # rounds of 16 points locating the jump (17x narrower each)
    widths: tuple[int, ...] = (8, 16, 32, 64, 128)  # d of the width sweep (Q2-width)
    width_layers: int = 30  # depth of the width sweep
    width_seeds: int = 3  # seeds per width, law and mask
    width_masks: tuple[str, ...] = PAPER_MASKS  # masks of the width sweep
    dtype: str = "float64"  # of every theory system here

    def __post_init__(self) -> None:
        freeze_lists(self, "rotations", "path_depths", "widths", "width_masks")
        check_int("n_tokens", self.n_tokens, 4, MAX_SYSTEM_TOKENS)
        check_int("d_model", self.d_model, 1, 4096)
        check_int("n_samples", self.n_samples, 1, MAX_DRAWS)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_choice("dtype", self.dtype, tuple(metrics.DTYPES))
        check_temperature("temperature", self.temperature)
        check_int("complete_layers", self.complete_layers, 2, 60)
        check_int("linear_layers", self.linear_layers, 2, MAX_LAYERS)
        check_int("window", self.window, 1, self.n_tokens - 2)
        check_numbers("rotations", self.rotations, 0.0, 2 * math.pi)
        check_int("pair_layers", self.pair_layers, 1, MAX_LAYERS)
        check_int("path_points", self.path_points, 3, 10_000)
        check_ints("path_depths", self.path_depths, 1, MAX_LAYERS)
        check_int("bisection_rounds", self.bisection_rounds, 1, 12)
        check_ints("widths", self.widths, 2, 4096)
        check_int("width_layers", self.width_layers, 2, MAX_LAYERS)
        check_int("width_seeds", self.width_seeds, 1, 1000)
        check_choices("width_masks", self.width_masks, masks.MASK_NAMES)

    def system(self, **changes: object) -> SystemConfig:
        """Q4's random system (``changes`` override fields)."""
        return SystemConfig(**{"n_tokens": self.n_tokens, "d_model": self.d_model,
                               "n_samples": self.n_samples, "seed": self.seed, "dtype": self.dtype,
                               **changes})


@dataclass(frozen=True)
class ReviewersResult:
    """What the page computes itself.

    Shapes: ``complete_log_mu`` ``[sample, layer + 1]``; ``linear_log_mu`` mask -> ``[layer + 1]`` (median);
    ``rotated`` angle -> ``[layer + 1, token, 2]``; ``path_mu`` ``[depth, point]``.
    """

    complete_log_mu: Tensor  # natural log of mu, complete mask with logits, exact below the floor
    linear_log_mu: dict[str, Tensor]  # linear case per mask (median over samples, exact)
    jordan: pd.DataFrame  # rank of (A - lambda I)^k per power k, for the window's repeated eigenvalue
    rotated: dict[float, Tensor]  # rotated counterexample's trajectory per angle (first start)
    # per angle: identity gap, token 1's limit (0, 1) Z, its smallest |coordinate|
    rotation_table: pd.DataFrame
    path_s: Tensor  # the path parameter  [point]
    path_mu: Tensor  # mu at each depth along the path
    widths: pd.DataFrame  # per mask, law, width, seed: fitted rate (NaN: no decay measured)
    numbers: dict[str, object]


def _linear(config: ReviewersConfig) -> dict[str, Tensor]:
    """The linear case W_Q = W_K = 0, W_V = I: median log mu per mask (exact tracking, no floor)."""
    system = config.system(n_layers=config.linear_layers, qk_weights="zero", value_weights="identity")
    out = {}
    for name in ("causal", "causal_sliding_window"):
        mask = masks.build_mask(name, config.n_tokens, config.window if name != "causal" else None)
        out[name] = summarize_collapse(mask, system).mu_exact.log().median(dim=0).values  # [layer + 1]
    return out


def _jordan(config: ReviewersConfig) -> tuple[pd.DataFrame, dict[str, object]]:
    """Ranks of (A - 1/(w+1) I)^k for the uniform causal window, and what they say."""
    mask = masks.build_mask("causal_sliding_window", config.n_tokens, config.window)
    eigenvalue = Fraction(1, config.window + 1)
    ranks = rates.jordan_ranks(mask, eigenvalue, config.n_tokens)
    chain = next(k for k in range(1, len(ranks)) if ranks[k] == ranks[k - 1]) - 1  # largest Jordan block
    table = pd.DataFrame({"k": range(len(ranks)), "rank of (A - λI)^k": ranks}).set_index("k")
    return table, {"jordan_eigenvalue": f"1/{config.window + 1}", "jordan_geometric": ranks[0] - ranks[1],
                   "jordan_algebraic": config.n_tokens - ranks[-1], "jordan_chain": chain}


def _rotations(config: ReviewersConfig) -> tuple[dict[float, Tensor], pd.DataFrame]:
    """The counterexample with Z^T W Z for every angle: trajectories, the identity gap, token 1's limit."""
    W = ce.COUNTEREXAMPLE_W_V
    v1 = ce.token1_limit(W)
    B = next(q for q in ce.token2_fixed_points(W, v1) if q.stable and abs(q.point[0]) > 1e-9)
    generator = torch.Generator().manual_seed(config.seed)
    X0 = torch.randn(8, 2, 2, generator=generator, dtype=torch.float64)  # [sample, token, 2]
    X0[0, 0], X0[0, 1] = torch.tensor([0.6, 0.8]), torch.tensor(B.point) + 0.1  # one start that ends at B
    paths, rows = {}, []
    for angle in config.rotations:
        Z = ce.rotation_matrix(angle)
        paths[angle] = ce.run_pair(X0[:1] @ Z, Z.T @ W @ Z,
                                   config.pair_layers).states[0]  # [layer + 1, token, 2]
        limit = v1 @ Z  # [2]
        rows.append({"angle": angle,
                     "max_t ‖X_Z(t) − X(t)Z‖": ce.rotation_invariance_gap(X0, W, Z, config.pair_layers),
                     "token 1 limit x": float(limit[0]), "token 1 limit y": float(limit[1]),
                     "smallest |coordinate|": float(limit.abs().min()),
                     "token 1 at its limit": float((paths[angle][-1, 0] - limit).norm())})
    return paths, pd.DataFrame(rows).set_index("angle")


def _path(config: ReviewersConfig) -> tuple[Tensor, Tensor, dict[str, object]]:
    """mu along W(s) = (1 - s) I + s W_counterexample at each depth, and the jump located two ways."""
    W0, W1 = torch.eye(2, dtype=torch.float64), ce.COUNTEREXAMPLE_W_V
    v1 = ce.token1_limit(W1)
    B = next(q for q in ce.token2_fixed_points(W1, v1) if q.stable and abs(q.point[0]) > 1e-9)
    X0 = torch.stack([v1, torch.tensor(B.point, dtype=torch.float64)])[None]  # [1, token, 2]
    s = torch.linspace(0, 1, config.path_points, dtype=torch.float64)
    mu = torch.stack([ce.path_mu(X0, W0, W1, s, depth)[:, 0]
                      for depth in config.path_depths])  # [depth, point]
    analytic = ce.locate_switch(
        lambda x: torch.tensor([ce.has_second_stable_point(ce.value_path(W0, W1, float(v))) for v in x]),
        0.0, 1.0, config.bisection_rounds)
    deepest = max(config.path_depths)
    apart = ce.locate_switch(lambda x: ce.path_mu(X0, W0, W1, x, deepest)[:, 0] > 1e-3, 0.0, 1.0,
                             config.bisection_rounds)
    below, above = mu[-1][s < apart[0]], mu[-1][s > apart[1]]
    return s, mu, {"path_s_analytic": sum(analytic) / 2, "path_s_simulated": sum(apart) / 2,
                   "path_interval": apart[1] - apart[0], "path_depth": deepest,
                   "path_mu_below": float(below.max()) if len(below) else math.nan,
                   "path_mu_below_words": "exactly 0" if len(below) and float(below.max()) == 0
                   else f"at most {float(below.max()) if len(below) else math.nan:.1e}",
                   "path_mu_above": float(above.min()) if len(above) else math.nan}


def _widths(config: ReviewersConfig) -> pd.DataFrame:
    """The LayerNorm (D) dynamics with W_V orthogonal, Gaussian or uniform (scaled 1/sqrt(d)) per width."""
    layer = DynamicsConfig(norm="unit")
    rows = []
    for name in config.width_masks:
        mask = masks.build_mask(name, config.n_tokens,
                                config.window if name in masks.WINDOWED_MASKS else None)
        for d in config.widths:
            for law in WIDTH_LAWS:
                system = SystemConfig(n_tokens=config.n_tokens, d_model=d, n_layers=config.width_layers,
                                      n_samples=config.width_seeds, value_weights=law, seed=config.seed)
                s = summarize_collapse(mask, system, layer)
                rows += [{"mask": name, "law": law, "width": d, "seed": k, "rate": float(s.rates[k]),
                          "last mu / floor": float(s.mu_direct[k, -1] / s.floor[k, -1])}
                         for k in range(config.width_seeds)]
    return pd.DataFrame(rows)


def compute(config: ReviewersConfig) -> ReviewersResult:
    """Every computed answer of the page (Q1 reads a stored sweep instead: :func:`limits`)."""
    X0, W_Q, W_K, W_V = sample_system(config.system(n_layers=config.complete_layers))
    complete = rates.complete_mask_log_mu(X0, W_Q, W_K, W_V, config.complete_layers, config.temperature)
    linear = _linear(config)
    jordan, jordan_numbers = _jordan(config)
    rotated, rotation_table = _rotations(config)
    path_s, path_mu, path_numbers = _path(config)
    widths = _widths(config)
    return ReviewersResult(complete, linear, jordan, rotated, rotation_table, path_s, path_mu, widths,
                           {**_rate_numbers(config, complete, linear), **jordan_numbers, **path_numbers,
                            **_rotation_numbers(rotation_table), **_width_numbers(widths)})


def _rate_numbers(config: ReviewersConfig, complete: Tensor, linear: dict[str, Tensor]) -> dict[str, object]:
    """Q4's numbers: the complete mask's log10 mu, decrement ratios and log(-log) slope; the linear rates."""
    median = complete.median(dim=0).values  # [layer + 1]
    steps = rates.layer_rates(median)  # [layer]
    causal_ratio = torch.exp(-rates.layer_rates(linear["causal"]))  # per-layer ratio of mu  [layer]
    window_rates = rates.layer_rates(linear["causal_sliding_window"])
    close = (window_rates - math.log(2)).abs() < 0.01 * math.log(2)
    settled = next((t for t in range(len(close)) if bool(close[t:].all())), None)
    half = config.linear_layers // 2
    return {
        "complete_log10_mu": ", ".join(f"{float(v) / math.log(10):.1f}" for v in median[:6]),
        "complete_last_log10_mu": float(median[-1]) / math.log(10), "complete_layers": config.complete_layers,
        "complete_step_ratio": float(steps[-1] / steps[-2]),
        "complete_loglog_slope": rates.loglog_slope(median),
        "linear_loglog_slope": rates.loglog_slope(linear["causal"][: config.complete_layers + 1]),
        "causal_ratio_40": float(causal_ratio[min(40, len(causal_ratio) - 1)]),
        "causal_lambda2": math.exp(-linear_rate(masks.causal_mask(config.n_tokens))),
        "window_late_rate": fit_decay_rate(linear["causal_sliding_window"], skip=half),
        "window_rate_30": float(window_rates[min(30, len(window_rates) - 1)]),
        "window_settled_layer": "never" if settled is None else settled, "log2": math.log(2),
        "n_samples": config.n_samples, "temperature": config.temperature, "width_seeds": config.width_seeds,
    }


def _rotation_numbers(table: pd.DataFrame) -> dict[str, object]:
    return {"rotation_max_gap": float(table["max_t ‖X_Z(t) − X(t)Z‖"].max()),
            "rotation_min_coordinate": float(table["smallest |coordinate|"].min()),
            "rotation_count": len(table)}


def width_gaps(widths: pd.DataFrame) -> pd.DataFrame:
    """Per mask, law and width: the median rate over seeds and its relative gap ``|rate / orthogonal - 1|``
    to the orthogonal W_V of the same mask and width."""
    median = (widths.groupby(["mask", "law", "width"], sort=False)["rate"].median().rename("rate")
              .reset_index())
    orthogonal = median[median["law"] == "orthogonal"].set_index(["mask", "width"])["rate"]
    reference = orthogonal.reindex(pd.MultiIndex.from_frame(median[["mask", "width"]])).to_numpy()
    return median.assign(gap=(median["rate"] / reference - 1).abs())


def _width_numbers(widths: pd.DataFrame) -> dict[str, object]:
    """Q2 (width): the rates at the largest width (causal mask, else the first), the largest gap to
    orthogonal W_V at the smallest and the largest width over masks and laws, the share of decaying runs."""
    gaps = width_gaps(widths)
    others = gaps[gaps["law"] != "orthogonal"]
    largest, smallest = int(widths["width"].max()), int(widths["width"].min())
    mask = "causal" if "causal" in set(widths["mask"]) else widths["mask"].iloc[0]
    at = gaps[(gaps["mask"] == mask) & (gaps["width"] == largest)].set_index("law")["rate"]
    return {"width_mask": mask, "width_largest": largest, "width_smallest": smallest,
            "width_decaying": float((widths["rate"] > 0).mean()),
            "width_gap_large": float(others.loc[others["width"] == largest, "gap"].max()),
            "width_gap_small": float(others.loc[others["width"] == smallest, "gap"].max()),
            "width_gap_trend": "shrinks" if others.loc[others["width"] == largest, "gap"].max()
            < others.loc[others["width"] == smallest, "gap"].max() else "does not shrink",
            **{f"width_rate_{law}": float(at[law]) for law in WIDTH_LAWS}}
