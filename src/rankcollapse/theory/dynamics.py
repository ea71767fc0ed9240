"""The small theory systems of the paper: masked attention with and without LayerNorm.

Row convention throughout (tokens are rows, as in the paper)::

    pure attention        X(t+1) = A(t) X(t) W_V(t)
    attention + LayerNorm X(t+1) = D(t) A(t) X(t) W_V(t)

with ``A(t) = softmax_G(X(t) W_Q(t) (X(t) W_K(t))^T / sqrt(temperature))`` taken only over the edges of
the mask G (``mask[i, j]`` True when token i may attend to token j). ``D(t)`` rescales every token to
unit norm (``norm="unit"``, the paper's LayerNorm without centring, i.e. RMSNorm without gain); the
other normalizations of :mod:`rankcollapse.core.norms` (``rms``, ``layernorm``: norm about sqrt(d_model)) are
variants.

For pure attention the centred part ``R = (I - 11^T/N) X`` obeys ``R(t+1) = (I - 11^T/N) A(t) R(t) W_V(t)``
exactly (A is row-stochastic), so ``mu(X) = ||R||_F`` can be followed far below the rounding floor of X:
:func:`simulate` renormalises R every layer and accumulates ``log mu``.

Used by the pages ``book/theory/theorem1.md`` and ``book/theory/theorem2.md``; the 2-D counterexample
and the equilibria of every rank live in :mod:`rankcollapse.theory.counterexample`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core import masks
from rankcollapse.core import metrics
from rankcollapse.core.stats import fit_decay_rate
from rankcollapse.core.checks import check_choice, check_temperature
from rankcollapse.core.metrics import resolve_dtype
from rankcollapse.core.norms import FIXED_NORM_NAMES, apply_norm, check_norm

# how random weight matrices are drawn
WEIGHT_LAWS = ("orthogonal", "gaussian", "uniform", "identity", "zero")


def sample_weights(
    law: str,
    d_model: int,
    n_layers: int,
    n_samples: int,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
    share_layers: bool = False,
) -> Tensor:
    """Sample one weight matrix per sample and layer.

    ``orthogonal``: Haar-random (QR of a Gaussian with the sign of diag(R) fixed); ``gaussian``: i.i.d.
    N(0, 1/d_model); ``uniform``: U(-1/sqrt(d_model), 1/sqrt(d_model)), PyTorch's ``nn.Linear`` default;
    ``identity`` and ``zero`` are deterministic. ``share_layers`` repeats layer 0 in every layer.

    Shapes: returns ``[sample, layer, d_model, d_model]``.
    """
    check_choice("law", law, WEIGHT_LAWS)
    if d_model < 1 or n_layers < 1 or n_samples < 1:
        raise ValueError(
            f"d_model, n_layers, n_samples must be >= 1, got {d_model}, {n_layers}, {n_samples}"
        )
    n_draw = 1 if share_layers else n_layers
    shape = (n_samples, n_draw, d_model, d_model)
    if law == "identity":
        W = torch.eye(d_model, dtype=dtype).expand(shape).clone()
    elif law == "zero":
        W = torch.zeros(shape, dtype=dtype)
    elif law == "gaussian":
        W = torch.randn(shape, generator=generator, dtype=dtype) / math.sqrt(d_model)
    elif law == "uniform":
        W = (2 * torch.rand(shape, generator=generator, dtype=dtype) - 1) / math.sqrt(d_model)
    else:
        Q, R = torch.linalg.qr(torch.randn(shape, generator=generator, dtype=dtype))
        W = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).unsqueeze(-2)  # [sample, n_draw, d, d]
    return W.expand(n_samples, n_layers, d_model, d_model).clone()  # [sample, layer, d_model, d_model]


def attention_matrix(X: Tensor, W_Q: Tensor, W_K: Tensor, mask: Tensor, temperature: float) -> Tensor:
    """Masked softmax attention ``softmax_G(X W_Q (X W_K)^T / sqrt(temperature))``; rows sum to one.

    Shapes: X ``[sample, token, d_model]``, W_Q/W_K ``[sample, d_model, d_head]``, mask ``[token, token]``
    -> ``[sample, token, token]`` (zero outside the mask).
    """
    Q = torch.einsum("std,sde->ste", X, W_Q)  # [sample, token, d_head]
    K = torch.einsum("std,sde->ste", X, W_K)  # [sample, token, d_head]
    logits = torch.einsum("sie,sje->sij", Q, K) / math.sqrt(temperature)  # [sample, token, token]
    logits = logits.masked_fill(~mask, float("-inf"))
    return torch.softmax(logits, dim=-1)  # [sample, token, token]


@dataclass(frozen=True)
class DynamicsConfig:
    """How one layer acts: the normalisation, the temperature, what to record."""

    norm: str = "none"  # a name from rankcollapse.core.norms.FIXED_NORM_NAMES; "unit" is the paper's D
    temperature: float = 1.0  # d_QK: attention logits are divided by sqrt(temperature)
    layernorm_eps: float = 1e-5  # epsilon of the torch-style LayerNorm (norm="layernorm" only)
    keep_states: bool = True  # keep X(t) for every t (False: only the final state, for big batches)

    def __post_init__(self) -> None:
        check_norm(self.norm, FIXED_NORM_NAMES)
        check_temperature("temperature", self.temperature)
        if not self.layernorm_eps > 0:
            raise ValueError(f"layernorm_eps must be > 0, got {self.layernorm_eps!r}")


@dataclass(frozen=True)
class Trajectory:
    """What :func:`simulate` records.

    Shapes: states ``[sample, layer + 1, token, d_model]`` (None unless keep_states), final
    ``[sample, token, d_model]``, attention_min ``[sample, layer]`` (smallest allowed attention weight of
    each layer, the epsilon of Theorem 1), log_mu_exact ``[sample, layer + 1]`` (natural log of mu from the
    exact centred tracking; None when norm != "none").
    """

    states: Tensor | None
    final: Tensor
    attention_min: Tensor
    log_mu_exact: Tensor | None


def _per_layer(W: Tensor, n_samples: int, n_layers: int, name: str) -> Tensor:
    """Broadcast ``[d, e]``, ``[layer, d, e]`` or ``[sample, layer, d, e]`` to ``[sample, layer, d, e]``."""
    if W.dim() == 2:
        W = W.expand(n_layers, *W.shape)  # [layer, d, e]
    if W.dim() == 3:
        W = W.expand(n_samples, *W.shape)  # [sample, layer, d, e]
    if W.dim() != 4 or W.shape[0] != n_samples or W.shape[1] < n_layers:
        raise ValueError(
            f"{name} has shape {tuple(W.shape)}; allowed: [d, e], [layer, d, e] or [sample, layer, d, e] "
            f"with sample={n_samples} and layer>={n_layers}"
        )
    return W


def simulate(
    X0: Tensor,
    mask: Tensor,
    W_Q: Tensor,
    W_K: Tensor,
    W_V: Tensor,
    n_layers: int,
    config: DynamicsConfig = DynamicsConfig(),
) -> Trajectory:
    """Run ``n_layers`` layers of masked attention (optionally with a normalisation) on a batch.

    The weights may be one matrix for every layer and sample (``[d, e]``), one per layer, or one per
    sample and layer. For ``norm="none"`` the centred part is tracked exactly (see module docstring).

    Shapes: X0 ``[sample, token, d_model]``, mask ``[token, token]`` bool, W_Q/W_K
    ``[(sample,) (layer,) d_model, d_head]``, W_V ``[(sample,) (layer,) d_model, d_model]``.
    """
    if X0.dim() != 3:
        raise ValueError(f"X0 has shape {tuple(X0.shape)}; allowed: [sample, token, d_model]")
    n_samples, n_tokens, _ = X0.shape
    if mask.dtype != torch.bool or mask.shape != (n_tokens, n_tokens):
        raise ValueError(f"mask must be a bool tensor [token, token] = [{n_tokens}, {n_tokens}]")
    if not bool(mask.diagonal().all()):
        raise ValueError("mask must contain every self-loop (assumption A1): "
                         "mask.diagonal() must be all True")
    if n_layers < 1:
        raise ValueError(f"n_layers={n_layers} is not allowed; it must be >= 1")
    W_Q, W_K, W_V = (_per_layer(W, n_samples, n_layers, n)
                     for n, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)))
    track = config.norm == "none"
    X = X0
    states = [X0] if config.keep_states else None
    attention_min = []
    if track:
        R = X0 - X0.mean(dim=-2, keepdim=True)  # [sample, token, d_model]
        norm_R = torch.linalg.matrix_norm(R)  # [sample]
        log_scale = torch.log(norm_R)
        R = R / torch.where(norm_R > 0, norm_R, 1.0)[:, None, None]
        log_mu = [log_scale]
    for t in range(n_layers):
        A = attention_matrix(X, W_Q[:, t], W_K[:, t], mask, config.temperature)  # [sample, token, token]
        attention_min.append(A.masked_fill(~mask, float("inf")).amin(dim=(-2, -1)))  # [sample]
        X = apply_norm(A @ X @ W_V[:, t], config.norm, config.layernorm_eps)  # [sample, token, d_model]
        if states is not None:
            states.append(X)
        if track:
            R = A @ R @ W_V[:, t]  # [sample, token, d_model]
            R = R - R.mean(dim=-2, keepdim=True)  # (I - 11^T/N) A R W_V
            norm_R = torch.linalg.matrix_norm(R)  # [sample]
            log_scale = log_scale + torch.log(norm_R)  # -inf once R is exactly zero
            R = R / torch.where(norm_R > 0, norm_R, 1.0)[:, None, None]
            log_mu.append(log_scale)
    return Trajectory(
        # [sample, layer + 1, token, d_model]
        states=torch.stack(states, dim=1) if states is not None else None,
        final=X,
        attention_min=torch.stack(attention_min, dim=1),  # [sample, layer]
        log_mu_exact=torch.stack(log_mu, dim=1) if track else None,  # [sample, layer + 1]
    )


@dataclass(frozen=True)
class SystemConfig:
    """A random instance of the theory system: initial tokens and weights for every sample and layer."""

    n_tokens: int = 16  # N
    d_model: int = 8  # d (d_head = d_model)
    n_layers: int = 40  # depth
    n_samples: int = 8  # independent draws of X(0) and the weights (seeds of the spread bands)
    qk_weights: str = "gaussian"  # law of W_Q, W_K, one of WEIGHT_LAWS ("zero": uniform attention)
    value_weights: str = "orthogonal"  # law of W_V, one of WEIGHT_LAWS
    share_layers: bool = False  # one weight draw reused in every layer
    hemisphere: bool = False  # start every token in the open hemisphere {x : x_1 > 0}
    seed: int = 0  # seed of the torch.Generator
    dtype: str = "float64"  # "float64" or "float32"

    def __post_init__(self) -> None:
        for name in ("n_tokens", "d_model", "n_layers", "n_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} is not allowed; it must be >= 1")
        check_choice("qk_weights", self.qk_weights, WEIGHT_LAWS)
        check_choice("value_weights", self.value_weights, WEIGHT_LAWS)
        resolve_dtype(self.dtype)


def sample_system(config: SystemConfig) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Draw ``(X0, W_Q, W_K, W_V)`` from one seeded generator; X0 rows are standard Gaussian.

    Shapes: X0 ``[sample, token, d_model]``; each weight ``[sample, layer, d_model, d_model]``.
    """
    c = config
    dtype = resolve_dtype(c.dtype)
    generator = torch.Generator().manual_seed(c.seed)
    # [sample, token, d]
    X0 = torch.randn(c.n_samples, c.n_tokens, c.d_model, generator=generator, dtype=dtype)
    if c.hemisphere:
        X0[..., 0] = X0[..., 0].abs() + 1e-3
    W_Q, W_K, W_V = (
        sample_weights(kind, c.d_model, c.n_layers, c.n_samples, generator, dtype, c.share_layers)
        for kind in (c.qk_weights, c.qk_weights, c.value_weights)
    )
    return X0, W_Q, W_K, W_V


def run_system(mask: Tensor, system: SystemConfig, dynamics: DynamicsConfig = DynamicsConfig()) -> Trajectory:
    """Sample a system and simulate it under ``mask``. Shapes: mask ``[token, token]``."""
    X0, W_Q, W_K, W_V = sample_system(system)
    return simulate(X0, mask, W_Q, W_K, W_V, system.n_layers, dynamics)


def log10_bound_rate(epsilon: float, radius: int | None) -> float:
    """log10 of the rate ``-log(1 - epsilon^r) / r`` Theorem 1's bound guarantees, without underflow.

    ``epsilon^r`` underflows to subnormal numbers (e.g. 2.76e-314) for sharp softmaxes, so the value is
    computed in log space; NaN without a center node or when epsilon is 0.

    >>> round(log10_bound_rate(1e-100, 4), 3)  # epsilon^4 = 1e-400 is not a float64
    -400.602
    """
    if radius is None or not epsilon > 0:
        return math.nan
    log_power = radius * math.log(epsilon)  # log(epsilon^r)
    rate = -math.log1p(-math.exp(log_power)) if log_power > -30 else math.exp(log_power)  # ~ epsilon^r
    return (math.log10(rate) if log_power > -30 else log_power / math.log(10)) - math.log10(radius)


def theorem1_bound(X0: Tensor, epsilon: float, radius: int, n_layers: int) -> Tensor:
    """A rigorous upper bound on mu(X(t)) for pure attention with orthogonal W_V.

    If every allowed attention weight is >= epsilon and the mask has radius r, any product of r
    consecutive attention matrices has a column (a center's) with entries >= epsilon^r, so its Dobrushin
    coefficient is <= 1 - epsilon^r; orthogonal W_V keep the token diameter delta = max ||x_i - x_j||, and
    mu <= sqrt(N) delta. Hence ``mu(t) <= sqrt(N) delta(0) (1 - epsilon^r)^floor(t / r)``.

    Shapes: X0 ``[sample, token, d_model]`` -> ``[sample, layer + 1]``.
    """
    if not 0 < epsilon <= 1 or radius < 1:
        raise ValueError(f"epsilon={epsilon} must lie in (0, 1] and radius={radius} must be >= 1")
    n_tokens = X0.shape[-2]
    delta0 = torch.cdist(X0, X0).amax(dim=(-2, -1))  # [sample]
    t = torch.arange(n_layers + 1, dtype=torch.float64)
    log_factor = torch.floor(t / radius) * math.log1p(-(epsilon**radius)) if epsilon < 1 else -torch.inf * t
    return math.sqrt(n_tokens) * delta0[:, None].to(torch.float64) * torch.exp(log_factor)[None, :]


def linear_rate(mask: Tensor) -> float:
    """The exact asymptotic rate of the linear special case (W_Q = W_K = 0, W_V = I).

    Then A is constant (uniform over each row's allowed tokens) and mu decays like |lambda_2(A)|^t,
    where lambda_2 is the second eigenvalue by modulus: rate = -log |lambda_2| (inf when it is 0).

    Shapes: mask ``[token, token]``.
    """
    A = mask.to(torch.float64) / mask.sum(dim=-1, keepdim=True)  # [token, token]
    moduli = torch.linalg.eigvals(A).abs().sort(descending=True).values  # [token]
    second = float(moduli[1]) if moduli.shape[0] > 1 else 0.0
    return math.inf if second < 1e-12 else -math.log(second)


def linear_curve(mask: Tensor, n_layers: int, d_model: int = 64, seed: int = 0) -> Tensor:
    """The linear special case's μ/‖X‖_F over the layers: ``X(t) = A^t X(0)`` with A the mask's uniform
    attention (W_Q = W_K = 0, W_V = I), X(0) standard normal (``seed``), in float64 with the centred part
    tracked on its own (``R(t+1) = P A R(t)``, P the centring; A is row-stochastic), so μ is exact far below
    the rounding floor of X. Its per-layer factor tends to ``|λ₂(A)|`` (:func:`linear_rate`) once every token
    has mixed — after about the mask's radius in layers — and is what the theory predicts for a SAN whose
    attention is (close to) uniform, as a bias-free initialized stack's becomes when X shrinks.

    Shapes: mask ``[token, token]`` bool -> ``[layer + 1]`` (float64; exactly 0 once μ underflows).

    >>> from rankcollapse.core.masks import causal_sliding_window_mask
    >>> curve = linear_curve(causal_sliding_window_mask(32, 3), 120)
    >>> round(float(curve[120] / curve[119]), 6)  # |λ₂| = 1/2 after the transient
    0.5
    """
    if n_layers < 1 or d_model < 1:
        raise ValueError(f"n_layers and d_model must be >= 1, got {n_layers}, {d_model}")
    allowed = mask.cpu().numpy().astype(np.float64)
    n = allowed.shape[-1]
    A = allowed / allowed.sum(axis=-1, keepdims=True)  # [token, token]
    X = torch.randn(n, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()
    R = X - X.mean(axis=0)  # the centred part, kept at norm 1 with its scale in log_scale
    log_scale = 0.0
    curve = [float(np.linalg.norm(R) / np.linalg.norm(X))]
    for _ in range(n_layers):
        X, R = A @ X, A @ R
        R = R - R.mean(axis=0)  # P A R: A is row-stochastic, so centring A R centres A X
        scale = float(np.linalg.norm(R))
        if scale == 0:
            curve += [0.0] * (n_layers + 1 - len(curve))
            break
        log_scale += math.log(scale)
        R = R / scale
        curve.append(math.exp(log_scale) / float(np.linalg.norm(X)))
    return torch.tensor(curve, dtype=torch.float64)


def bound_factor(mask: Tensor) -> float:
    """The per-layer factor Theorem 1's bound guarantees for uniform attention on ``mask``: ``(1 -
    ε^r)^(1/r)`` with ε = 1 / (the largest number of tokens a token attends to) and r the radius; 1.0 where
    ``ε^r`` is below float64's resolution (the bound holds but says nothing at any depth one can run), NaN
    without a center node.

    Shapes: mask ``[token, token]`` bool.

    >>> from rankcollapse.core.masks import build_mask
    >>> round(bound_factor(build_mask("complete", 4)), 6)
    0.75
    """
    epsilon = 1.0 / float(mask.sum(dim=-1).max())
    radius = masks.graph_radius(mask)
    if radius is None:
        return math.nan
    return math.exp(-10 ** log10_bound_rate(epsilon, radius))


@dataclass(frozen=True)
class CollapseSummary:
    """One mask's run (Theorem 1 and 2 pages): curves, measured rate, epsilon and radius (the rate Theorem 1's
    bound guarantees for pure attention: :func:`log10_bound_rate` of the two).

    Shapes: mu_exact, mu_direct, floor ``[sample, layer + 1]``; rates ``[sample]``.
    """

    radius: int | None  # graph radius by BFS; None when no center node (Theorem 1 does not apply)
    epsilon: float  # smallest allowed attention weight over samples and layers
    mu_exact: Tensor  # mu from the exact centred tracking (norm="none"), else mu of X itself
    mu_direct: Tensor  # mu of X itself (stalls at the rounding floor)
    floor: Tensor  # eps(dtype) * ||X||_F
    rates: Tensor  # per-sample rate fitted where mu_direct > floor_margin * floor (and on t <= 1)

    @property
    def rate(self) -> float:
        """Median over samples of the measured rate per layer."""
        return float(self.rates.median())


def summarize_collapse(
    mask: Tensor, system: SystemConfig, dynamics: DynamicsConfig = DynamicsConfig(),
    floor_margin: float = 100.0
) -> CollapseSummary:
    """Run the dynamics under ``mask`` and measure the exponential rate of mu, per sample.

    The rate is fitted (on the exact track for pure attention) over the layers where mu of X is above
    ``floor_margin`` floors, plus t = 0, 1, so a one-layer collapse still yields a rate. Every curve
    is returned in float64 whatever ``system.dtype``.

    Shapes: mask ``[token, token]``; see :class:`CollapseSummary`.
    """
    if not dynamics.keep_states:
        raise ValueError("keep_states=False is not allowed here; the rate needs every layer")
    trajectory = run_system(mask, system, dynamics)
    mu_direct = metrics.mu(trajectory.states)  # [sample, layer + 1]
    floor = metrics.rounding_floor(metrics.frobenius_norm(trajectory.states), resolve_dtype(system.dtype))
    # [sample, layer + 1]
    valid = (mu_direct > floor_margin * floor) | (torch.arange(system.n_layers + 1) <= 1)
    exact = trajectory.log_mu_exact if trajectory.log_mu_exact is not None else mu_direct.log()
    log_mu = exact.double().clamp(min=-745.0)  # exp(-745) is the smallest float64; -inf would break the fit
    rates = torch.tensor([fit_decay_rate(log_mu[s], valid[s]) for s in range(system.n_samples)],
                         dtype=torch.float64)
    radius = masks.graph_radius(mask)
    epsilon = float(trajectory.attention_min.min())
    return CollapseSummary(radius, epsilon, log_mu.exp(), mu_direct, floor, rates)
