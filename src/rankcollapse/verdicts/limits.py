"""Where a collapsing curve goes: to zero, or to a common nonzero vector (the reviewers' question Q1:
"does μ → 0 mean X → 0, or tokens aligned at a nonzero point?").

:func:`limit_verdict` classifies one configuration from the per-layer trends of ‖X‖_F and μ/‖X‖_F (and,
when the run recorded it, the mean |cosine| between tokens), each read with the curve rules of
:mod:`rankcollapse.verdicts.rules` (:func:`~rankcollapse.verdicts.rules.curve_verdict`, the same thresholds):

* **collapse to zero** — ‖X‖_F itself *collapses* (its per-layer factor below ``exp(-COLLAPSE_RATE)``: these
  are median curves without an interval; or it reaches its floor, the dtype's smallest normal number):
  μ ≤ ‖X‖_F goes to 0 with it, whether or not the tokens align — the reviewer's "trivial case".
* **collapse to a common nonzero vector** — ‖X‖_F does not collapse while μ/‖X‖_F *collapses*: the tokens
  become equal at a point of nonzero norm (their cosines go to 1).
* **no collapse** — neither collapses: no collapse of μ/‖X‖_F is resolved at this depth.
* **cannot tell: on the rounding floor** — μ/‖X‖_F is on its rounding floor from X(0) on.

:func:`table_limits` applies it to every configuration of a tidy experiments table (median over samples
per layer, as :func:`~rankcollapse.verdicts.tables.table_verdicts` does).

Used by: :mod:`rankcollapse.book.pages.reviewers`; tests/unit/test_limits.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from rankcollapse.verdicts import rules, tables

TO_ZERO, TO_VECTOR, NO_COLLAPSE, ON_FLOOR = ("collapse to zero", "collapse to a common nonzero vector",
                                             "no collapse", "cannot tell: on the rounding floor")
LIMITS = (TO_ZERO, TO_VECTOR, NO_COLLAPSE, ON_FLOOR)
NORM_FLOOR = {"float64": float(torch.finfo(torch.float64).tiny),
              "float32": float(torch.finfo(torch.float32).tiny)}


@dataclass(frozen=True)
class LimitVerdict:
    """One configuration's limit and the curve verdicts that decide it."""

    limit: str  # one of LIMITS
    norm: rules.CurveVerdict  # the verdict on ||X||_F
    relative: rules.CurveVerdict  # the verdict on mu / ||X||_F
    cosine_last: float | None  # mean |cos| between tokens at the last layer, where recorded

    @property
    def words(self) -> str:
        """The limit with its deciding numbers, e.g. ``"collapse to zero (‖X‖_F: collapses (rate 0.55/layer);
        ...)"``; a norm that grows past ``STABLE_FACTOR`` reads "grows" (the curve rules, made for decay, call
        it not resolved)."""
        cosine = "" if self.cosine_last is None else f"; mean |cos| {self.cosine_last:.3g} at the last layer"
        grows = self.norm.ratio > rules.STABLE_FACTOR
        norm = (f"grows (x{self.norm.ratio:.2g} of layer 1 after {self.norm.n_layers} layers)" if grows
                else self.norm.words)
        return f"{self.limit} (‖X‖_F: {norm}; μ/‖X‖_F: {self.relative.words}{cosine})"


def limit_verdict(norm, relative_mu, relative_floor, cosine=None, norm_floor: float = NORM_FLOOR["float64"]
                  ) -> LimitVerdict:
    """Classify one configuration (rules in the module docstring).

    ``norm``: ‖X‖_F per layer (layer 0 = X(0)); ``relative_mu``: μ/‖X‖_F with its floor ``relative_floor``
    (one number or per layer); ``cosine``: the mean |cos| per layer, or None; ``norm_floor``: the smallest
    ‖X‖_F the dtype resolves. Shapes: every curve [layer + 1].

    >>> t = np.arange(13)
    >>> limit_verdict(0.5 ** t, np.full(13, 0.3), 2.2e-16).limit
    'collapse to zero'
    >>> limit_verdict(np.full(13, 4.0), 0.3 * 0.5 ** t, 2.2e-16).limit
    'collapse to a common nonzero vector'
    """
    norm = np.asarray(norm, dtype=np.float64)
    if not (np.isfinite(norm).all() and (norm >= 0).all()):
        raise ValueError("norm must be finite and >= 0 at every layer")
    norm_curve = rules.curve_verdict(norm, norm_floor)
    relative = rules.curve_verdict(relative_mu, relative_floor)
    if relative.verdict == "on the floor":
        limit = ON_FLOOR
    elif norm_curve.collapses:
        limit = TO_ZERO
    elif relative.collapses:
        limit = TO_VECTOR
    else:
        limit = NO_COLLAPSE
    last = None if cosine is None else float(np.asarray(cosine, dtype=np.float64)[-1])
    return LimitVerdict(limit, norm_curve, relative, last)


def _curve(group: pd.DataFrame, metric: str) -> np.ndarray | None:
    rows = group[group["metric"] == metric].sort_values("layer")
    return None if rows.empty else rows["median"].to_numpy(dtype=np.float64)


def table_limits(table: pd.DataFrame, dtype: str = "float64") -> pd.DataFrame:
    """One :class:`LimitVerdict` per configuration of a tidy experiments table, from the per-layer medians
    of ``norm``, ``relative_mu`` (floor ``relative_floor``, or median ``floor`` / median ``norm`` in tables
    stored before it existed) and ``mean_abs_cosine`` where the run recorded it.

    Returns the label columns and ``limit, words, norm ratio`` (‖X‖_F at the last layer over layer 1),
    ``relative ratio`` (the same for μ/‖X‖_F), ``cosine`` (last layer, NaN where not recorded), ``verdict``.
    """
    if dtype not in NORM_FLOOR:
        raise ValueError(f"dtype must be one of {', '.join(NORM_FLOOR)}; got {dtype!r}")
    labels = [c for c in tables.LABEL_COLUMNS if c in table.columns and c != "n_samples"]
    rows = []
    for key, group in table.groupby(labels, dropna=False, sort=False):
        norm, relative = _curve(group, "norm"), _curve(group, "relative_mu")
        if norm is None or relative is None:
            raise ValueError(f"the table has no 'norm' or 'relative_mu' rows for {dict(zip(labels, key))}")
        floor = _curve(group, "relative_floor")
        floor = floor if floor is not None else _curve(group, "floor") / norm
        verdict = limit_verdict(norm, relative, floor, _curve(group, "mean_abs_cosine"), NORM_FLOOR[dtype])
        rows.append({**dict(zip(labels, key)), "limit": verdict.limit, "words": verdict.words,
                     "norm ratio": float(norm[-1] / norm[rules.EARLY_LAYER]),
                     "relative ratio": float(relative[-1] / relative[rules.EARLY_LAYER]),
                     "cosine": np.nan if verdict.cosine_last is None else verdict.cosine_last,
                     "verdict": verdict})
    return pd.DataFrame(rows)
