"""Attention masks as directed graphs, and the graph quantities the theorems use.

Edge convention (used everywhere in this package and the book): a mask is a ``torch.bool`` tensor
``[token, token]`` and ``mask[i, j]`` is True when token ``i`` may attend to token ``j``. In graph terms
that is the directed edge ``j -> i``: information flows from ``j`` to ``i``. Every token attends to
itself (assumption A1), so the diagonal is always True.

A node ``c`` is a *center* when every token can be reached from ``c`` along directed edges; the mask is
*quasi-strongly connected* when it has a center. The *radius* is the smallest, over centers, of the
largest hop distance from the center to any token. The *diameter* here is the largest finite hop
distance between any ordered pair of tokens (pairs with no directed path are skipped, so a causal mask has
diameter 1, not infinity); it bounds the radius from above. All three are computed by breadth-first
search, never by formula, so the book's closed forms are checked rather than assumed.

Soft locality is not a mask: :func:`decay_bias` (with :func:`alibi_slopes`) is an additive logit bias that
keeps the graph complete (or causal) and only shrinks the weights of far tokens.

Used by: book/setup.md (mask pictures, radius table), the theory pages and the SAN engine.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import torch

# the paper's four masks (Fig. 2)
PAPER_MASKS = ("complete", "causal", "sliding_window", "causal_sliding_window")


def _check_n_tokens(n_tokens: int) -> None:
    if not isinstance(n_tokens, int) or isinstance(n_tokens, bool) or n_tokens < 1:
        raise ValueError(f"n_tokens must be an integer >= 1, got {n_tokens!r}")


def _check_width(name: str, value: int, n_tokens: int) -> None:
    """``value`` must be an integer in [1, n_tokens - 1] (a window of n_tokens or more is the complete
    mask)."""
    upper = max(n_tokens - 1, 1)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= upper:
        raise ValueError(f"{name} must be an integer in [1, {upper}] for n_tokens={n_tokens}, got {value!r}")


def _offsets(n_tokens: int) -> torch.Tensor:
    """``offsets[i, j] = i - j``.  Shapes: -> [token, token] (int64)."""
    idx = torch.arange(n_tokens)
    return idx[:, None] - idx[None, :]  # [token, token]


def complete_mask(n_tokens: int) -> torch.Tensor:
    """Every token attends to every token (encoder attention).  Shapes: -> [token, token] bool.

    >>> complete_mask(2).tolist()
    [[True, True], [True, True]]
    """
    _check_n_tokens(n_tokens)
    return torch.ones(n_tokens, n_tokens, dtype=torch.bool)


def self_mask(n_tokens: int) -> torch.Tensor:
    """Each token attends only to itself: attention is the identity, the no-mixing control (what the value
    maps and norms do without any mixing of tokens). Not quasi-strongly connected for n_tokens > 1 (no
    center, radius None).  Shapes: -> [token, token] bool.

    >>> self_mask(2).tolist()
    [[True, False], [False, True]]
    """
    _check_n_tokens(n_tokens)
    return torch.eye(n_tokens, dtype=torch.bool)


def causal_mask(n_tokens: int) -> torch.Tensor:
    """Token i attends to tokens j <= i (decoder attention).  Shapes: -> [token, token] bool.

    >>> causal_mask(3).int().tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    _check_n_tokens(n_tokens)
    return _offsets(n_tokens) >= 0


def sliding_window_mask(n_tokens: int, window: int) -> torch.Tensor:
    """Bidirectional window: token i attends to j with |i - j| <= window.  Shapes: -> [token, token] bool."""
    _check_n_tokens(n_tokens)
    _check_width("window", window, n_tokens)
    return _offsets(n_tokens).abs() <= window


def causal_sliding_window_mask(n_tokens: int, window: int) -> torch.Tensor:
    """Uni-directional window (Mistral-style): token i attends to j with 0 <= i - j <= window.

    Shapes: -> [token, token] bool.
    """
    _check_n_tokens(n_tokens)
    _check_width("window", window, n_tokens)
    off = _offsets(n_tokens)
    return (off >= 0) & (off <= window)


def prefix_mask(n_tokens: int, prefix: int) -> torch.Tensor:
    """Prefix-LM attention (T5's prefix LM, UniLM, PaLI): the first ``prefix`` tokens attend to each other
    both ways, every later token i to j <= i. Every prefix token is attended by every token, so they are the
    centers and the radius is 1, as for the causal mask.  Shapes: -> [token, token] bool.

    >>> prefix_mask(4, 2).int().tolist()
    [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    """
    _check_n_tokens(n_tokens)
    _check_width("prefix", prefix, n_tokens)
    mask = _offsets(n_tokens) >= 0
    mask[:prefix, :prefix] = True
    return mask


def strided_mask(n_tokens: int, stride: int, causal: bool = True) -> torch.Tensor:
    """Sparse Transformer strided pattern (Child et al. 2019): token i attends to j when
    |i - j| < stride (local) or (i - j) is a multiple of stride (strided); ``causal`` keeps j <= i.

    Shapes: -> [token, token] bool.
    """
    _check_n_tokens(n_tokens)
    _check_width("stride", stride, n_tokens)
    off = _offsets(n_tokens)
    mask = (off.abs() < stride) | (off % stride == 0)
    return mask & (off >= 0) if causal else mask


def dilated_window_mask(n_tokens: int, window: int, dilation: int) -> torch.Tensor:
    """Dilated sliding window (Longformer): token i attends to j = i + k * dilation, |k| <= window.

    Shapes: -> [token, token] bool.
    """
    _check_n_tokens(n_tokens)
    _check_width("window", window, n_tokens)
    _check_width("dilation", dilation, n_tokens)
    off = _offsets(n_tokens)
    return (off % dilation == 0) & (off.abs() <= window * dilation)


def global_window_mask(n_tokens: int, window: int, n_global: int = 1) -> torch.Tensor:
    """Bidirectional window plus global tokens (Longformer/BigBird): the first ``n_global`` tokens attend
    to every token and every token attends to them.  Shapes: -> [token, token] bool.
    """
    _check_n_tokens(n_tokens)
    _check_width("window", window, n_tokens)
    _check_width("n_global", n_global, n_tokens)
    mask = _offsets(n_tokens).abs() <= window
    mask[:n_global, :] = True
    mask[:, :n_global] = True
    return mask


def random_mask(n_tokens: int, density: float, seed: int) -> torch.Tensor:
    """Each off-diagonal edge is kept independently with probability ``density``; self-loops always.

    Deterministic for a seed (its own ``torch.Generator``).  Shapes: -> [token, token] bool.
    """
    _check_n_tokens(n_tokens)
    if not isinstance(density, (int, float)) or isinstance(density, bool) or not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be a number in [0, 1], got {density!r}")
    gen = torch.Generator().manual_seed(int(seed))
    mask = torch.rand(n_tokens, n_tokens, generator=gen, dtype=torch.float64) < density
    return mask | torch.eye(n_tokens, dtype=torch.bool)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's head slopes (Press et al. 2022; BLOOM, MPT): for H a power of two m_h = 2^(-8h/H),
    h = 1 .. H; otherwise those of the largest power of two below H, then every other slope of twice that
    many (the authors' ``get_slopes``).  Shapes: -> [head] float64.

    >>> alibi_slopes(8).tolist()[:3], alibi_slopes(6).tolist()
    ([0.5, 0.25, 0.125], [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125])
    """
    if not isinstance(n_heads, int) or isinstance(n_heads, bool) or n_heads < 1:
        raise ValueError(f"n_heads must be an integer >= 1, got {n_heads!r}")
    power = 2 ** math.floor(math.log2(n_heads))
    slopes = [2.0 ** (-8.0 * h / power) for h in range(1, power + 1)]
    if power < n_heads:
        slopes += alibi_slopes(2 * power).tolist()[0::2][:n_heads - power]
    return torch.tensor(slopes, dtype=torch.float64)


def decay_bias(n_tokens: int, slopes: torch.Tensor | list[float]) -> torch.Tensor:
    """An additive distance-decay bias of the attention logits, one slope per head: -m_h |i - j| (ALiBi's
    bias; beside a causal mask it is -m_h (i - j) on the allowed keys). The mask graph stays complete (or
    causal): the bias only shrinks the weights of far tokens, softly, where a window cuts them.

    Shapes: slopes [head], each >= 0 -> [head, token, token] float64.

    >>> decay_bias(3, [1.0]).tolist()
    [[[-0.0, -1.0, -2.0], [-1.0, -0.0, -1.0], [-2.0, -1.0, -0.0]]]
    """
    _check_n_tokens(n_tokens)
    m = torch.as_tensor(slopes, dtype=torch.float64)
    if m.ndim != 1 or len(m) < 1 or not bool(torch.isfinite(m).all()) or bool((m < 0).any()):
        raise ValueError(f"slopes must be a non-empty list of finite numbers >= 0 (one per head), got "
                         f"{slopes!r}")
    return -m[:, None, None] * _offsets(n_tokens).abs().to(torch.float64)  # [head, token, token]


def mask_from_matrix(matrix: torch.Tensor | list) -> torch.Tensor:
    """Validate a user-supplied square boolean matrix (``[i, j]`` = i attends to j); self-loops added.

    Shapes: [token, token] -> [token, token] bool.
    """
    mask = torch.as_tensor(matrix)
    if mask.dtype != torch.bool:
        raise ValueError(f"matrix must be boolean (dtype torch.bool), got dtype {mask.dtype}")
    if mask.ndim != 2 or mask.shape[0] != mask.shape[1] or mask.shape[0] < 1:
        raise ValueError(f"matrix must be square [n_tokens, n_tokens] with n_tokens >= 1, "
                         f"got shape {tuple(mask.shape)}")
    return mask | torch.eye(mask.shape[0], dtype=torch.bool)


@dataclass(frozen=True)
class _Kind:
    """How a mask name is built: its builder, whether it takes ``window`` and the keywords it takes."""

    build: Callable[..., torch.Tensor]  # (n_tokens, [window,] **options) -> [token, token] bool
    takes_window: bool  # the half-width, window size or stride of :func:`build_mask`
    options: tuple[str, ...] = ()  # keyword arguments a sweep may pass (ExperimentConfig.mask_options)


# Every mask by name, in the order pages list them: a new mask is its builder above and one entry here.
_KINDS = {
    "complete": _Kind(complete_mask, False),
    "causal": _Kind(causal_mask, False),
    "sliding_window": _Kind(sliding_window_mask, True),
    "causal_sliding_window": _Kind(causal_sliding_window_mask, True),
    "strided": _Kind(strided_mask, True, ("causal",)),
    "dilated_window": _Kind(dilated_window_mask, True, ("dilation",)),
    "global_window": _Kind(global_window_mask, True, ("n_global",)),
    "random": _Kind(random_mask, False, ("density", "seed")),
    "prefix": _Kind(prefix_mask, True),  # ``window``: the prefix length
    "self": _Kind(self_mask, False),  # the no-mixing control: attention = identity
}
MASK_NAMES = tuple(_KINDS)
WINDOWED_MASKS = tuple(name for name, kind in _KINDS.items() if kind.takes_window)  # masks taking ``window``
MASK_OPTIONS = {name: kind.options for name, kind in _KINDS.items() if kind.options}  # keywords per mask


def build_mask(name: str, n_tokens: int, window: int | None = None, **kwargs) -> torch.Tensor:
    """Build a mask by name, for page parameters and configuration sweeps.

    ``window`` is the window half-width (``sliding_window``, ``global_window``, ``dilated_window``), the
    window size (``causal_sliding_window``), the stride (``strided``) or the prefix length (``prefix``).
    Extra keyword arguments go to the builder (``dilation``, ``n_global``, ``causal``, ``density``,
    ``seed``).  Shapes: -> [token, token] bool.
    """
    if name not in _KINDS:
        raise ValueError(f"mask name must be one of {', '.join(MASK_NAMES)}; got {name!r}")
    kind = _KINDS[name]
    if not kind.takes_window:
        return kind.build(n_tokens, **kwargs)
    if window is None:
        raise ValueError(f"window must be given for mask {name!r} (an integer in [1, n_tokens - 1])")
    return kind.build(n_tokens, window, **kwargs)


# ---------------------------------------------------------------- graph quantities (BFS)


def _check_mask(mask: torch.Tensor) -> None:
    if (not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.ndim != 2
            or mask.shape[0] != mask.shape[1]):
        raise ValueError("mask must be a square torch.bool tensor [n_tokens, n_tokens]")


def _successors(mask: torch.Tensor) -> list[list[int]]:
    """Out-neighbours along information flow: j -> i for every i that attends to j."""
    flow = mask.T  # [token (from j), token (to i)]
    return [torch.nonzero(row).flatten().tolist() for row in flow]


def _bfs(successors: list[list[int]], source: int) -> list[int | None]:
    dist: list[int | None] = [None] * len(successors)
    dist[source] = 0
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for nxt in successors[node]:
            if dist[nxt] is None:
                dist[nxt] = dist[node] + 1  # type: ignore[operator]
                queue.append(nxt)
    return dist


def _eccentricities(mask: torch.Tensor) -> list[list[int | None]]:
    succ = _successors(mask)
    return [_bfs(succ, s) for s in range(mask.shape[0])]


@dataclass(frozen=True)
class MaskGraph:
    """Graph summary of a mask (see the module docstring for the definitions)."""

    n_tokens: int  # N
    n_edges: int  # number of True entries, self-loops included
    centers: tuple[int, ...]  # center nodes, () when not quasi-strongly connected
    radius: int | None  # min over centers of the max hop distance; None without a center
    diameter: int  # max finite hop distance over ordered pairs (self-loops make it >= 0)
    quasi_strongly_connected: bool  # has a center


def describe_mask(mask: torch.Tensor) -> MaskGraph:
    """Centers, radius and diameter of a mask, from one BFS per token."""
    _check_mask(mask)
    dists = _eccentricities(mask)
    centers = tuple(s for s, d in enumerate(dists) if None not in d)
    radius = min((max(dists[c]) for c in centers), default=None)  # type: ignore[type-var]
    finite = [d for row in dists for d in row if d is not None]
    return MaskGraph(
        n_tokens=mask.shape[0],
        n_edges=int(mask.sum()),
        centers=centers,
        radius=radius,
        diameter=max(finite),
        quasi_strongly_connected=bool(centers),
    )


def graph_radius(mask: torch.Tensor) -> int | None:
    """Radius r of the mask graph (None when not quasi-strongly connected).

    >>> graph_radius(causal_sliding_window_mask(9, 2))
    4
    """
    return describe_mask(mask).radius
