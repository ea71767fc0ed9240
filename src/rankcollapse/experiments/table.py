"""The tidy table of a sweep: per-layer statistics over samples (:func:`summarize`), the check a stored table
passes before it is read (:func:`check_table`), and one number of it (:func:`value`, :func:`held_from`).

The table is tidy: one row per weights x configuration x layer x metric, columns ``mean, std, median,
q10, q90, min, max`` over samples; the metric ``full_rank`` is 1 for a sample at full numerical rank,
so its mean is the fraction at full rank. Each sample's own values, where a sweep keeps them, are
:mod:`rankcollapse.experiments.sample_values`.

Used by: :mod:`rankcollapse.experiments.sweep`, the page modules and ``book/report.py`` (reading numbers), the
results store's checks (``book/origins.py``, ``book/cli_listing.py``, ``results/upgrade_store.py``), the
verdicts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from rankcollapse import engine
from rankcollapse.core import metrics as rc_metrics

STATISTICS = ("mean", "std", "median", "q10", "q90", "min", "max")
# "exact": 1 where mu is tracked below the floor
TABLE_METRICS = ("mu", "relative_mu", "norm", "floor", "relative_floor", "exact", "numerical_rank",
                 "full_rank", "sigma_min", "sigma_min_floor", "mean_abs_cosine",
                 engine.SETTLED_METRIC,  # the share of samples not computed at a layer, settled on the floor
                 *rc_metrics.ATTENTION_METRIC_NAMES)  # only in sweeps with attention_stats


def check_finite(metrics: dict[str, torch.Tensor], labels: list[dict], dtype: str) -> None:
    """One ValueError when a unit's metrics hold inf or NaN: its hidden states left the dtype's range —
    overflowed (e.g. pretrained SmolLM2 without any norm grows about 15x a layer and leaves float32's range
    after 17 layers) or underflowed while μ is tracked exactly (a bias-free stack shrinks ‖X‖_F about
    threefold a layer: float32 holds about 80 such layers), so μ/‖X‖_F is no number. The message names the
    first such configuration and layer and, for float32, the dtype that holds them.

    Shapes: metrics each [layer + 1, config, sample]; labels one dict per config.
    """
    for name, values in metrics.items():
        bad = ~torch.isfinite(values)
        if bad.any():
            layer, config, _ = (int(i) for i in bad.nonzero()[0])
            what = ", ".join(f"{k} {v}" for k, v in labels[config].items() if v is not None)
            advice = "; run it with -p dtype float64" if dtype == "float32" else ""
            raise ValueError(f"{what}: {name} is not finite from layer {layer} on (the hidden states left "
                             f"{dtype}'s range: they overflowed, or underflowed){advice}")


def summarize(metrics: dict[str, torch.Tensor], labels: list[dict], n_tokens: int,
              d_model: int) -> pd.DataFrame:
    """Sample statistics of every metric, tidy.

    Shapes: each metrics[name] [layer + 1, config, sample]; labels has one dict per config.
    """
    values = {k: metrics[k] for k in TABLE_METRICS if k in metrics}
    if "numerical_rank" in metrics:
        values["full_rank"] = (metrics["numerical_rank"] == min(n_tokens, d_model)).to(torch.float64)
    n_layers1, n_configs, n_samples = metrics["mu"].shape  # [layer + 1, config, sample]
    frames = []
    for name in (k for k in TABLE_METRICS if k in values):
        x = values[name].to(torch.float64).numpy()  # [layer + 1, config, sample]
        q10, median, q90 = np.quantile(x, [0.1, 0.5, 0.9], axis=-1)  # each [layer + 1, config]
        stats = {"mean": x.mean(-1), "std": x.std(-1), "median": median, "q10": q10, "q90": q90,
                 "min": x.min(-1), "max": x.max(-1)}  # each [layer + 1, config]
        layer, config = np.meshgrid(np.arange(n_layers1), np.arange(n_configs), indexing="ij")
        frame = pd.DataFrame({"layer": layer.ravel(), "config": config.ravel(), "metric": name,
                              **{k: v.ravel() for k, v in stats.items()}})
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    label_frame = pd.DataFrame(labels).reset_index(names="config")
    table = label_frame.merge(table, on="config").drop(columns="config")
    table["n_samples"] = n_samples
    return table


def config_labels(configs: tuple[engine.SANConfig, ...], weights: str) -> list[dict]:
    return [{"weights": weights, "variant": "SAN", "mask": c.mask, "window": c.window,
             "temperature": c.temperature, "norm": c.norm, "skip": c.skip} for c in configs]


def value(table: pd.DataFrame, metric: str, *, layer: int | str = "last", stat: str = "mean",
          **labels) -> float:
    """One number of a tidy table: ``stat`` of ``metric`` at ``layer`` (an integer or ``"last"``, the
    configuration's deepest layer) for the one configuration matching ``labels`` (column=value).

    Shapes: ``table`` is a tidy experiments table (:func:`summarize`).
    """
    rows = _rows(table, metric, labels)
    rows = rows[rows["layer"] == (rows["layer"].max() if layer == "last" else layer)]
    if len(rows) != 1:
        raise ValueError(f"{len(rows)} rows of {metric!r} at layer {layer} match {labels}; "
                         f"name one configuration")
    return float(rows[stat].iloc[0])


def held_from(table: pd.DataFrame, **labels) -> int | None:
    """The first layer a sweep did not compute for the configurations matching ``labels`` because they had
    settled on their rounding floor (metric ``engine.SETTLED_METRIC`` above 0: some samples held, their last
    computed values repeated); None where every layer was computed (or the sweep never stops).

    Shapes: ``table`` is a tidy experiments table.
    """
    rows = _rows(table, engine.SETTLED_METRIC, labels)
    held = rows.loc[rows["mean"] > 0, "layer"]
    return int(held.min()) if len(held) else None


def _rows(table: pd.DataFrame, metric: str, labels: dict) -> pd.DataFrame:
    """The rows of ``metric`` whose columns equal ``labels`` (column=value)."""
    rows = table[table["metric"] == metric]
    for column, wanted in labels.items():
        rows = rows[rows[column] == wanted]
    return rows


TABLE_COLUMNS = ("weights", "variant", "mask", "window", "temperature", "norm", "skip", "layer", "metric",
                 *STATISTICS, "n_samples")


def check_table(table: pd.DataFrame, parameters: dict) -> None:
    """Raise ValueError unless a stored table has the tidy columns and exactly the configurations
    (weights, variant, mask, temperature, norm, skip) and sample counts its stored ``parameters`` ask for.

    Shapes: ``table`` is a tidy experiments table; ``parameters`` the stored (canonical) parameters.
    """
    if tuple(table.columns) != TABLE_COLUMNS:
        raise ValueError(f"its columns are {', '.join(map(str, table.columns))}; "
                         f"expected {', '.join(TABLE_COLUMNS)}")
    p = parameters
    expected = {(w, "SAN", m, t, n, s) for w in p["weights"] for m in p["masks"] for t in p["temperatures"]
                for n in p["norms"] for s in p["skips"]}
    if p["full_transformer"]:
        expected |= {(w, "full transformer", "model", None, "model", True) for w in p["weights"]}
    present = {(w, v, m, None if pd.isna(t) else float(t), n, str(s) == "True")
               for w, v, m, t, n, s in table[["weights", "variant", "mask", "temperature", "norm",
                                              "skip"]].itertuples(index=False)}
    if present != expected:
        missing, extra = sorted(map(str, expected - present)), sorted(map(str, present - expected))
        raise ValueError(f"{len(missing)} configurations missing"
                         f"{(' (first: ' + missing[0] + ')') if missing else ''}, "
                         f"{len(extra)} not asked for{(' (first: ' + extra[0] + ')') if extra else ''}")
    if set(table["n_samples"]) != {p["n_samples"]}:
        raise ValueError(f"sample counts {sorted(set(table['n_samples']))}, expected {p['n_samples']}")
