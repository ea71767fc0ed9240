"""Per-sample values of a sweep: what a bootstrap over samples needs, beside the tidy table
of sample statistics.

The tidy table (:func:`rankcollapse.experiments.table.summarize`) keeps only statistics over samples (mean,
median, quantiles). An effect size with an interval (a ratio of two configurations' late rates or last-layer
values, bootstrapped over samples) needs each sample's own curve, so a sweep can also keep, for a few metrics,
every sample's value at every layer: :class:`SampleValues`.

One curve is one row of ``labels`` (the label columns of the tidy table: weights, variant, mask, window,
temperature, norm, skip), and ``values[metric][curve]`` is that curve's [layer + 1, sample] array. Curves of a
stack shallower than the deepest one (pretrained stacks keep ``min(n_layers, model depth)``) are padded with
NaN after their last layer. Samples are in the order of the sweep, the same for every curve, so two curves of
one result are *paired* (sample i of both saw the same X(0)).

Stored as ``results/<page>/<key>.samples.npz`` (:func:`to_bytes`): float32, 12 bytes per sample x layer x
curve for the three metrics (a 3000-sample, 13-layer sweep of 24 curves is 11 MB), its SHA-256 in the result's
record and verified on every load like the table's. Results stored before have none.

Used by: the results store (written beside a result, hashed like its table), the verdicts' effect sizes.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass

import numpy as np
import pandas as pd

# the metrics kept per sample (what the verdicts' effects read)
SAMPLE_METRICS = ("relative_mu", "mu", "norm")
CURVE_COLUMNS = ("weights", "variant", "mask", "window", "temperature", "norm", "skip")


@dataclass(frozen=True, eq=False)
class SampleValues:
    """Every sample's value of a few metrics, per curve and layer.

    Shapes: ``labels`` has one row per curve (columns CURVE_COLUMNS); ``values[metric]`` is
    [curve, layer + 1, sample] float32 or float64, NaN past a curve's last layer.
    """

    labels: pd.DataFrame
    values: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        if tuple(self.labels.columns) != CURVE_COLUMNS:
            raise ValueError(f"labels must have the columns {', '.join(CURVE_COLUMNS)}; "
                             f"got {list(self.labels.columns)}")
        for name, array in self.values.items():
            if array.ndim != 3 or array.shape[0] != len(self.labels):
                raise ValueError(f"values[{name!r}] must be [curve={len(self.labels)}, layer + 1, sample]; "
                                 f"got {array.shape}")

    @property
    def n_samples(self) -> int:
        return next(iter(self.values.values())).shape[-1]

    def curve(self, metric: str, **labels) -> np.ndarray:
        """The one curve matching ``labels`` (column=value; a missing window or temperature matches None),
        cut after its last layer.  Shapes: -> [layer + 1, sample]."""
        if metric not in self.values:
            raise ValueError(f"metric must be one of {', '.join(self.values)}; got {metric!r}")
        rows = np.ones(len(self.labels), dtype=bool)
        for column, wanted in labels.items():
            if column not in CURVE_COLUMNS:
                raise ValueError(f"label {column!r} is not one of {', '.join(CURVE_COLUMNS)}")
            col = self.labels[column]
            rows &= col.isna().to_numpy() if wanted is None else (col == wanted).to_numpy()
        if rows.sum() != 1:
            raise ValueError(f"{int(rows.sum())} curves match {labels}; name one configuration")
        array = self.values[metric][int(np.flatnonzero(rows)[0])]  # [layer + 1, sample]
        depth = int((~np.isnan(array).all(axis=1)).sum())
        return array[:depth]


SAMPLES_SUFFIX = ".samples.npz"  # beside a result's <key>.csv.gz: results/<page>/<key>.samples.npz
STORED_DTYPE = np.float32  # 4 bytes per value: 12 bytes per sample x layer x curve for the three metrics


def from_metrics(parts: list[tuple[list[dict], dict]]) -> SampleValues:
    """The per-sample values of a sweep from its parts' metrics, in the order of the parts and their curves.

    ``parts``: (labels, metrics) pairs, one dict of CURVE_COLUMNS per curve of the part and its metrics, each
    [layer + 1, curve, sample]; parts of fewer layers are padded with NaN. Only SAMPLE_METRICS are kept, as
    float32.  Shapes: -> values[metric] [curve, layer + 1, sample].
    """
    depth = max(next(iter(m.values())).shape[0] for _, m in parts)
    labels, values = [], {name: [] for name in SAMPLE_METRICS}
    for part_labels, metrics in parts:
        labels += [{c: row.get(c) for c in CURVE_COLUMNS} for row in part_labels]
        for name in SAMPLE_METRICS:
            # [curve, layer + 1, sample]
            x = np.asarray(metrics[name].detach().cpu(), dtype=np.float64).transpose(1, 0, 2)
            pad = np.full((x.shape[0], depth - x.shape[1], x.shape[2]), np.nan)
            values[name].append(np.concatenate([x, pad], axis=1))
    return SampleValues(pd.DataFrame(labels, columns=list(CURVE_COLUMNS)),
                        {name: np.concatenate(arrays).astype(STORED_DTYPE)
                         for name, arrays in values.items()})


def to_bytes(samples: SampleValues) -> bytes:
    """The ``.npz`` bytes of per-sample values: one float32 array per metric and the curves'
    labels as JSON."""
    buffer = io.BytesIO()
    labels = json.dumps(samples.labels.astype(object).where(samples.labels.notna(), None).to_dict("records"))
    np.savez(buffer, labels=np.array(labels),
             **{k: v.astype(STORED_DTYPE) for k, v in samples.values.items()})
    return buffer.getvalue()


def from_bytes(data: bytes) -> SampleValues:
    """Per-sample values from ``.npz`` bytes (:func:`to_bytes`); ValueError when they are not such a file."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            labels = pd.DataFrame(json.loads(str(archive["labels"])), columns=list(CURVE_COLUMNS))
            values = {name: archive[name] for name in archive.files if name != "labels"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as err:
        raise ValueError(f"not a per-sample values file ({type(err).__name__})") from None
    return SampleValues(labels, values)
