"""The curves of a tidy experiments table (:func:`rankcollapse.experiments.table.summarize`) as the rules read
them: one configuration's per-layer statistic and its rounding floor (:func:`curve_and_floor`), and one curve
verdict per configuration (:func:`table_verdicts`) from the **median over samples** per layer: the median
commutes with the log and with scaling (so the median floor over the median norm is exactly eps) and is not
pulled by the few samples that collapse differently.

Used by: :mod:`rankcollapse.verdicts.effects` (a side's curve), :mod:`rankcollapse.verdicts.limits`, the
pages' rate tables (:mod:`rankcollapse.book.pages._common`, the mask-design and reviewers' pages);
tests/unit/test_verdicts.py.
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.core.metrics import FLOOR_OF
from rankcollapse.engine.exact import EXACT_METRIC
from rankcollapse.verdicts.rules import DEFAULTS, Thresholds, curve_verdict

LABEL_COLUMNS = ("weights", "variant", "mask", "window", "temperature", "norm", "skip", "n_samples")


def table_curve(table: pd.DataFrame, metric: str, statistic: str) -> pd.Series:
    """The per-layer ``statistic`` of ``metric`` in the rows of one configuration, indexed by layer."""
    rows = table[table["metric"] == metric].sort_values("layer")
    return pd.Series(rows[statistic].to_numpy(), index=rows["layer"].to_numpy())


def _check_choice(metric: str, statistic: str) -> None:
    if metric not in FLOOR_OF:
        raise ValueError(f"metric must be one of {', '.join(FLOOR_OF)}; got {metric!r}")
    if statistic not in ("median", "mean", "q10", "q90"):
        raise ValueError(f"statistic must be one of median, mean, q10, q90; got {statistic!r}")


def curve_and_floor(group: pd.DataFrame, metric: str = "relative_mu",
                    statistic: str = "median") -> tuple[pd.Series, pd.Series]:
    """One configuration's per-layer ``statistic`` of ``metric`` and of its floor (``FLOOR_OF``); a table
    without ``relative_floor`` (stored before it existed) gets eps as median ``floor`` / median ``norm``,
    which is exact. A configuration of pure attention tracked exactly below the floor (the engine's
    ``exact`` metric 1 at every layer, :mod:`rankcollapse.engine.exact`) has floor 0: its μ is exact down
    to float64's smallest number.

    Shapes: group the tidy rows of one configuration -> ([layer + 1], [layer + 1]) indexed by layer.
    """
    _check_choice(metric, statistic)
    values = table_curve(group, metric, statistic)
    floor_metric = FLOOR_OF[metric]
    if (group["metric"] == floor_metric).any():
        floor = table_curve(group, floor_metric, statistic)
    elif metric == "relative_mu":
        floor = table_curve(group, "floor", statistic) / table_curve(group, "norm", statistic)
    else:
        raise ValueError(f"the table has no {floor_metric!r} rows, the floor of {metric!r}")
    exact = group.loc[group["metric"] == EXACT_METRIC, "median"]
    if metric in ("mu", "relative_mu") and len(exact) and (exact == 1.0).all():
        floor = 0 * floor
    return values, floor.reindex(values.index)


def table_verdicts(table: pd.DataFrame, metric: str = "relative_mu", statistic: str = "median",
                   thresholds: Thresholds = DEFAULTS) -> pd.DataFrame:
    """One curve verdict per configuration of a tidy experiments table, from the per-layer ``statistic``
    (:func:`curve_and_floor`) under ``thresholds``, without intervals (the effects' sides carry them:
    :mod:`rankcollapse.verdicts.effects`). Returns the label columns and ``verdict, rate, ratio,
    floor_layer, words, curve`` (the :class:`CurveVerdict`), ``values, floor`` (the curve and its floor per
    layer, to decide it again under other thresholds).
    """
    _check_choice(metric, statistic)
    labels = [c for c in LABEL_COLUMNS if c in table.columns]
    rows = []
    for key, group in table.groupby(labels, dropna=False, sort=False):
        if not (group["metric"] == metric).any():
            continue
        values, floor = curve_and_floor(group, metric, statistic)
        curve = curve_verdict(values.to_numpy(), floor.to_numpy(), thresholds)
        rows.append({**dict(zip(labels, key)), "verdict": curve.verdict, "rate": curve.rate,
                     "ratio": curve.ratio, "floor_layer": curve.floor_layer, "words": curve.words,
                     "curve": curve, "values": values.to_numpy(), "floor": floor.to_numpy()})
    out = pd.DataFrame(rows)
    if not out.empty:
        # missing where the curve never reaches the floor
        out["floor_layer"] = out["floor_layer"].astype("Int64")
    return out
