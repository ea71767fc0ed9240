"""Rank-collapse measures of a set of tokens, batched over any leading axes and computed in float64.

Every function takes token states ``X`` of shape ``[..., token, d_model]`` (rows are tokens, any float
dtype) and an optional ``token_mask`` of shape ``[..., token]`` (``False`` marks a padding row, which is
left out of the mean token, the norms and every pairwise statistic). Results have shape ``[...]``.

The definitions (μ is the paper's measure of rank collapse, defined in its problem setup; the book states
it on its setup page, ``book/setup.md``):

* ``mu(X) = ||X - 1 gamma_X||_F`` with ``gamma_X`` the mean of the valid tokens; 0 iff all tokens agree.
* ``relative_mu = mu / ||X||_F``, scale-free.
* Dong et al. (2021) divide the same residual by ``||X||`` in a composite l1-l_inf norm; the book reports
  ``mu`` and ``relative_mu`` instead (``book/setup.md``), so that ratio is not computed here.
* ``numerical_rank``: singular values above ``rtol * sigma_max``; by default
  ``rtol = max(n_tokens, d_model) * eps(dtype)`` of the dtype the states were computed in (NumPy's
  ``matrix_rank`` rule), because rounding in float32 states looks like extra rank in a float64 SVD.
* ``rounding_floor = eps(dtype) * ||X||_F``: a ``mu`` at or below it cannot be told apart from rounding.

Every metric on a log axis has its own floor, recorded per layer and sample next to it (``FLOOR_OF`` maps a
metric to the metric holding its floor): ``floor = eps * ||X||_F`` for ``mu``; ``relative_floor = eps`` for
``relative_mu`` (not ``eps * ||X||_F``: the ratio is scale-free); ``sigma_min_floor = rtol * sigma_max``
for ``sigma_min``, the rank tolerance itself, below which a singular value counts as zero. A value within
``FLOOR_BAND`` of its floor is rounding noise (:func:`below_floor`).

For states computed in float32, singular values (rank, ``sigma_min``) come from the eigenvalues of the
float64 Gram matrix (``X X^T`` or ``X^T X``, the smaller): 25 ms of CPU for 21 x 128 x 768 states against
140 ms for their SVDs. Its error: forming the Gram matrix and the symmetric eigensolver move each eigenvalue
by at most ``delta = (k + n) * eps64 * ||X||_F^2`` (Weyl's theorem with the standard bounds ``|dG| <= k eps
|X||X|^T`` and backward error ``n eps ||G||``; k is the inner dimension, n the Gram size), so ``sigma =
sqrt(lambda)`` is good to relative ``delta / (2 sigma^2)``: exact only well above ``sqrt(delta)``, about
``4.5e-7 ||X||_F`` at N = 128, d = 768. Per sample the Gram values are kept when they are resolved:
``sigma_min`` to relative ``GRAM_RESOLUTION`` (1e-4, a worst-case bound: sigma_min above ``3.2e-5 ||X||_F``
at BERT-base size, ``2.4e-5 ||X||_F`` at MiniLM's d = 384), or certified below its floor (there it is
rounding noise either way, and the Gram value is within ``sqrt(delta)`` of the SVD's), and no eigenvalue
within ``delta`` of the rank threshold, so the rank is the SVD's exactly. Every other sample gets the SVD:
float32 states with sigma_min between the two bounds. States computed in float64 always get the SVD: there
the Gram error would exceed the states' own rounding (``eps64 ||X||_F``), and the engine's float64 agreement
tests would see it. See :func:`_singular_spectrum`.

Used by: every page that measures collapse; the engine calls ``all_metrics`` (or ``norm_metrics``) after
every layer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch

METRIC_NAMES = ("mu", "relative_mu", "norm", "numerical_rank", "sigma_min", "mean_abs_cosine", "floor",
                "relative_floor", "sigma_min_floor")
# norm_metrics: no SVD, no cosines
NORM_METRIC_NAMES = ("mu", "relative_mu", "norm", "floor", "relative_floor")
# metric -> its floor
FLOOR_OF = {"mu": "floor", "relative_mu": "relative_floor", "sigma_min": "sigma_min_floor"}
FLOOR_BAND = 10.0  # a value within this factor of its floor is rounding noise: flagged, never interpreted
# largest relative error (worst-case bound) allowed on a sigma taken from Gram eigenvalues
GRAM_RESOLUTION = 1e-4
DTYPES = {"float64": torch.float64, "float32": torch.float32}  # the dtype names of page parameters
# One layer's change of mu, mu(X') = mu(X) * value_gain * attention_contraction * norm_factor, and the
# statistics of its attention matrices (Theorem 1's epsilon, the sharpest row, the diagonal, |lambda_2|); the
# engine records them when asked (engine.run_san(attention_stats=True)), see attention_statistics and
# mu_factor.
ATTENTION_METRIC_NAMES = ("value_gain", "attention_contraction", "norm_factor", "attention_epsilon",
                          "attention_max_weight", "attention_diagonal", "attention_lambda2")


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``"float64"``/``"float32"`` (page parameters are strings) or a torch dtype -> torch dtype.

    >>> resolve_dtype("float32")
    torch.float32
    """
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")


def _prepare(X: torch.Tensor, token_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Float64 states with padding rows zeroed, and the float64 weights (1 valid / 0 pad; None: all valid).

    Shapes: X [..., token, d_model], token_mask [..., token] -> ([..., token, d_model], [..., token, 1] or
    None).
    """
    if X.ndim < 2:
        raise ValueError(f"X must have shape [..., token, d_model], got shape {tuple(X.shape)}")
    if not X.is_floating_point():
        raise ValueError(f"X must be a floating-point tensor, got dtype {X.dtype}")
    X = X.to(torch.float64)
    if token_mask is None:
        return X, None
    if token_mask.dtype != torch.bool or token_mask.shape != X.shape[:-1]:
        raise ValueError(f"token_mask must be a bool tensor of shape {tuple(X.shape[:-1])}, "
                         f"got {token_mask.dtype} {tuple(token_mask.shape)}")
    valid = token_mask.to(torch.float64).unsqueeze(-1)  # [..., token, 1]
    return X * valid, valid


def _centred(X: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """``X - 1 gamma_X`` on the valid rows, zero on padding.  Shapes: -> [..., token, d_model]."""
    if valid is None:
        return X - X.mean(-2, keepdim=True)
    gamma = X.sum(-2, keepdim=True) / valid.sum(-2, keepdim=True).clamp_min(1.0)  # [..., 1, d_model]
    return (X - gamma) * valid


def mu(X: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``||X - 1 gamma_X||_F``.  Shapes: [..., token, d_model] -> [...].

    >>> mu(torch.tensor([[1.0, 2.0], [1.0, 2.0]])).item()
    0.0
    >>> mu(torch.tensor([[0.0, 0.0], [2.0, 0.0]])).item()
    1.4142135623730951
    """
    X, valid = _prepare(X, token_mask)
    return torch.linalg.vector_norm(_centred(X, valid), dim=(-2, -1))


def frobenius_norm(X: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``||X||_F`` over the valid tokens.  Shapes: [..., token, d_model] -> [...]."""
    X, _ = _prepare(X, token_mask)
    return torch.linalg.vector_norm(X, dim=(-2, -1))


def relative_mu(X: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``mu(X) / ||X||_F`` (0 when X = 0).  Shapes: [..., token, d_model] -> [...]."""
    return norm_metrics(X, token_mask)["relative_mu"]


@contextlib.contextmanager
def _one_cpu_thread(device: torch.device) -> Iterator[None]:
    """One intra-op thread on CPU for the batched small LAPACK problems (eigenvalues, singular values of
    128 x 128 matrices): as fast as two threads on an idle machine (16 Gram matrices: 8 ms against 9 ms),
    and 5-8x faster when another process shares the cores (8 against 65-85 ms), where two threads wait on
    each other. Other devices are left alone."""
    if device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _singular_values(X: torch.Tensor) -> torch.Tensor:
    """Descending singular values by SVD, of the tall orientation (2-3x faster on CPU than the wide one).

    Shapes: [..., token, d_model] -> [..., min(token, d_model)].
    """
    with _one_cpu_thread(X.device):
        return torch.linalg.svdvals(X.mT if X.shape[-2] < X.shape[-1] else X)


def _token_gram(Xp: torch.Tensor) -> torch.Tensor:
    """``X X^T`` (the tokens' inner products).  Shapes: [..., token, d_model] -> [..., token, token]."""
    return Xp @ Xp.mT


def _singular_spectrum(Xp: torch.Tensor, valid: torch.Tensor | None, rtol: float, dtype: torch.dtype,
                      token_gram: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Descending singular values and the numerical rank of states computed in ``dtype`` (held in float64),
    from the Gram eigenvalues where they are resolved and by SVD elsewhere (rule and error bound in the
    module docstring). States computed in float64 always get the SVD: the Gram bound ``delta / (2 sigma)``
    never falls below their own rounding ``eps64 ||X||_F``.

    ``token_gram`` (``X X^T``, reused by the cosines) saves a product when ``token <= d_model``.
    Shapes: Xp [..., token, d_model] (padding zeroed), valid [..., token, 1] or None, token_gram
    [..., token, token] -> ([..., min(token, d_model)], [...] int64).
    """
    n_tokens, d_model = Xp.shape[-2:]
    if (n_tokens + d_model) * _eps(torch.float64) / 2 > _eps(dtype):
        exact = _singular_values(Xp)
        return exact, _rank_from_sv(exact, rtol)
    if n_tokens <= d_model:
        gram = _token_gram(Xp) if token_gram is None else token_gram
    else:
        gram = Xp.mT @ Xp  # [..., d_model, d_model]
    with _one_cpu_thread(gram.device):
        lam = torch.linalg.eigvalsh(gram).flip(-1)  # [..., k] descending
    # [..., 1] error bound
    delta = (n_tokens + d_model) * _eps(torch.float64) * lam.clamp_min(0).sum(-1, keepdim=True)
    sv = lam.clamp_min(0).sqrt()  # [..., k]
    threshold = rtol**2 * lam[..., :1]  # [..., 1]: sigma > rtol sigma_max  <=>  lambda > rtol^2 lambda_max
    rank = (lam > threshold).sum(-1)  # [...]
    rank_decided = ((lam - threshold).abs() > delta * (1 + rtol**2)).all(-1)  # [...]
    lam_min = _sigma_min_from_sv(lam, valid)  # [...]
    resolved = lam_min >= delta[..., 0] / (2 * GRAM_RESOLUTION)
    certified_below = lam_min + delta[..., 0] < threshold[..., 0]  # sigma_min below its floor, for sure
    use_svd = ~(rank_decided & (resolved | certified_below))  # [...]
    if use_svd.any():
        exact = _singular_values(Xp[use_svd])  # [n, k]
        sv = sv.masked_scatter(use_svd.unsqueeze(-1), exact)
        rank = rank.masked_scatter(use_svd, _rank_from_sv(exact, rtol))
    return sv, rank


def _rank_from_sv(sv: torch.Tensor, rtol: float) -> torch.Tensor:
    """Count of singular values above ``rtol * sigma_max``.  Shapes: [..., k] -> [...] int64."""
    return (sv > rtol * sv[..., :1]).sum(-1)


def _sigma_min_from_sv(sv: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """The ``min(n_valid, d_model)``-th singular value (zero rows only append zeros).

    Shapes: sv [..., k], valid [..., token, 1] or None (all valid) -> [...].
    """
    if valid is None:
        return sv[..., -1]
    n_valid = valid.squeeze(-1).sum(-1).long()  # [...]
    index = (n_valid.clamp(max=sv.shape[-1]) - 1).clamp_min(0)  # [...]
    return sv.gather(-1, index.unsqueeze(-1)).squeeze(-1)


def rank_tolerance(n_tokens: int, d_model: int, dtype: torch.dtype) -> float:
    """The default ``rtol = max(n_tokens, d_model) * eps(dtype)``: rank panels state it, ``sigma_min_floor``
    is ``rtol * sigma_max``.

    >>> rank_tolerance(128, 768, torch.float32)
    9.1552734375e-05
    """
    return max(n_tokens, d_model) * _eps(dtype)


def _default_rtol(X: torch.Tensor, dtype: torch.dtype) -> float:
    return rank_tolerance(X.shape[-2], X.shape[-1], dtype)


def _eps(dtype: torch.dtype) -> float:
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype, got {dtype}")
    return torch.finfo(dtype).eps


def numerical_rank(X: torch.Tensor, token_mask: torch.Tensor | None = None,
                   rtol: float | None = None) -> torch.Tensor:
    """Number of singular values above ``rtol * sigma_max`` (default rule in the module docstring).

    Shapes: [..., token, d_model] -> [...] int64.

    >>> numerical_rank(torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64)).item()
    1
    """
    rtol = _default_rtol(X, X.dtype) if rtol is None else rtol
    Xp, valid = _prepare(X, token_mask)
    return _singular_spectrum(Xp, valid, rtol, X.dtype)[1]


def _mean_abs_cosine(gram: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """From the tokens' Gram matrix.  Shapes: gram [..., token, token] (padding zeroed), valid [..., token, 1]
    or None (all valid) -> [...]."""
    # [..., token]
    inv = 1 / gram.diagonal(dim1=-2, dim2=-1).sqrt().clamp_min(torch.finfo(torch.float64).tiny)
    cos = (gram * inv.unsqueeze(-1) * inv.unsqueeze(-2)).abs()  # [..., token, token]
    pair = 1 - torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)  # [token, token] pairs i != j
    if valid is not None:
        pair = pair * valid * valid.transpose(-1, -2)  # [..., token, token]
    return (cos * pair).sum((-2, -1)) / pair.sum((-2, -1)).clamp_min(1.0)


def mean_abs_cosine(X: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over ordered pairs i != j of valid tokens of ``|cos(x_i, x_j)|`` (zero tokens count as 0).

    Shapes: [..., token, d_model] -> [...].
    """
    Xp, valid = _prepare(X, token_mask)
    return _mean_abs_cosine(_token_gram(Xp), valid)


def rounding_floor(x_norm: torch.Tensor | float, dtype: torch.dtype) -> torch.Tensor:
    """``eps(dtype) * ||X||_F``: the smallest ``mu`` that rounding in ``dtype`` lets us resolve.

    Shapes: [...] -> [...].

    >>> float(rounding_floor(1.0, torch.float32))
    1.1920928955078125e-07
    """
    return torch.as_tensor(x_norm, dtype=torch.float64) * _eps(dtype)


def _norm_values(Xp: torch.Tensor, centred: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """mu, relative_mu, norm and their floors of prepared float64 states.  Shapes: [..., token, d_model]
    -> [...]."""
    norm = torch.linalg.vector_norm(Xp, dim=(-2, -1))
    mu_value = torch.linalg.vector_norm(centred, dim=(-2, -1))
    return {"mu": mu_value, "relative_mu": mu_value / norm.clamp_min(torch.finfo(torch.float64).tiny),
            "norm": norm, "floor": rounding_floor(norm, dtype),
            "relative_floor": torch.full_like(norm, _eps(dtype))}


def mu_factor(after: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
    """``after / before`` of two mu-like values, 1 where ``before`` is 0 (nothing left to change).

    Shapes: [...] and [...] -> [...].

    >>> mu_factor(torch.tensor([1.0, 0.0]), torch.tensor([4.0, 0.0])).tolist()
    [0.25, 1.0]
    """
    after, before = after.to(torch.float64), before.to(torch.float64)
    return torch.where(before > 0, after / torch.where(before > 0, before, 1.0), 1.0)


def second_eigenvalue_modulus(A: torch.Tensor) -> torch.Tensor:
    """``|lambda_2|``: the second-largest eigenvalue modulus of square matrices (of a row-stochastic A the
    largest is 1, and ``|lambda_2|`` is the asymptotic contraction per application of A off the consensus).
    A batch on which torch's ``eigvals`` fails to converge (it can on the nearly rank-one A of collapsed
    tokens) goes to NumPy's. Not computed through the deflated ``P A``: that breaks the triangular form of
    causal attention, whose repeated eigenvalues (a uniform causal window's 1/2, fifteen times at N = 16)
    rounding would then spread by eps^(1/15).

    Shapes: [..., token, token] -> [...].

    >>> round(second_eigenvalue_modulus(torch.tensor([[1.0, 0.0], [0.5, 0.5]])).item(), 6)
    0.5
    """
    A = A.to(torch.float64)
    try:
        with _one_cpu_thread(A.device):
            moduli = torch.linalg.eigvals(A).abs()  # [..., token]
    except torch.linalg.LinAlgError:
        moduli = torch.from_numpy(abs(np.linalg.eigvals(A.cpu().numpy()))).to(A.device)
    return moduli.sort(dim=-1, descending=True).values[..., 1]


def attention_statistics(A: torch.Tensor, allowed: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Statistics of one layer's attention matrices, per sample (every token counted, padding included):

    * ``attention_epsilon``: the smallest weight on an allowed entry, over heads, queries and keys
      (Theorem 1's epsilon; 0 when a weight underflowed);
    * ``attention_max_weight``: the largest weight of each row, averaged over heads and queries;
    * ``attention_diagonal``: the weight of each token on itself, averaged over heads and queries;
    * ``attention_lambda2``: ``|lambda_2|`` (:func:`second_eigenvalue_modulus`) of the sample's head-mean
      attention matrix ``mean_h A_h``.

    ``allowed`` (broadcast against A) marks the entries the mask and any model window allow; None: all.
    Shapes: A [..., head, token, token] (rows sum to 1), allowed [token, token] or [..., head, token, token]
    bool -> each [...].

    >>> {k: round(v.item(), 4) for k, v in attention_statistics(torch.tensor([[[1.0, 0.0], [0.5, 0.5]]]),
    ...  torch.tensor([[True, False], [True, True]])).items()}  # doctest: +NORMALIZE_WHITESPACE
    {'attention_epsilon': 0.5, 'attention_max_weight': 0.75, 'attention_diagonal': 0.75,
     'attention_lambda2': 0.5}
    """
    A = A.to(torch.float64)
    if A.ndim < 3 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must have shape [..., head, token, token], got shape {tuple(A.shape)}")
    used = A if allowed is None else torch.where(allowed, A, torch.inf)  # [..., head, token, token]
    return {"attention_epsilon": used.amin((-3, -2, -1)),
            "attention_max_weight": A.amax(-1).mean((-2, -1)),
            "attention_diagonal": A.diagonal(dim1=-2, dim2=-1).mean((-2, -1)),
            "attention_lambda2": second_eigenvalue_modulus(A.mean(-3))}


def below_floor(values: torch.Tensor | float, floors: torch.Tensor | float,
                band: float = FLOOR_BAND) -> torch.Tensor:
    """True where a value lies within ``band`` of its floor (rounding noise, to be flagged, never read).

    Shapes: values [...], floors [...] (broadcast) -> [...] bool.

    >>> below_floor(torch.tensor([1e-300, 1e-3]), torch.tensor([1e-13, 1e-13])).tolist()
    [True, False]
    """
    return torch.as_tensor(values, dtype=torch.float64) <= band * torch.as_tensor(floors, dtype=torch.float64)


def norm_metrics(
    X: torch.Tensor, token_mask: torch.Tensor | None = None, dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """The metrics of ``NORM_METRIC_NAMES`` from one float64 copy of X: no SVD, no pairwise cosines.

    ``dtype`` as in :func:`all_metrics`.  Shapes: [..., token, d_model] -> each value [...].

    >>> {k: round(v.item(), 4) for k, v in norm_metrics(torch.tensor([[0.0, 0.0], [2.0, 0.0]])).items()}
    {'mu': 1.4142, 'relative_mu': 0.7071, 'norm': 2.0, 'floor': 0.0, 'relative_floor': 0.0}
    """
    Xp, valid = _prepare(X, token_mask)
    return _norm_values(Xp, _centred(Xp, valid), X.dtype if dtype is None else dtype)


def all_metrics(
    X: torch.Tensor, token_mask: torch.Tensor | None = None, dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """Every metric of ``METRIC_NAMES`` at once (one Gram matrix, one centring; SVD only where the Gram
    eigenvalues are not resolved, see :func:`_singular_spectrum`).

    ``dtype`` is the dtype the states were computed in (default ``X.dtype``); it sets the floor and the
    rank tolerance.  Shapes: [..., token, d_model] -> each value [...].
    """
    dtype = X.dtype if dtype is None else dtype
    Xp, valid = _prepare(X, token_mask)
    centred = _centred(Xp, valid)
    gram = _token_gram(Xp)  # [..., token, token]
    rtol = _default_rtol(X, dtype)
    sv, rank = _singular_spectrum(Xp, valid, rtol, dtype, token_gram=gram)  # [..., k], [...]
    values = _norm_values(Xp, centred, dtype)
    values.update({
        "numerical_rank": rank,
        "sigma_min": _sigma_min_from_sv(sv, valid),
        "sigma_min_floor": rtol * sv[..., 0],
        "mean_abs_cosine": _mean_abs_cosine(gram, valid),
    })
    return {k: values[k] for k in METRIC_NAMES}
