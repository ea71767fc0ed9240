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

Samples are not all independent: samples cut at every sentence start (``overlap="sentence_starts"``) share the
text of their article. ``groups`` gives each sample's article (an index, in order of first appearance;
:func:`article_groups`), so that a bootstrap resamples articles, not samples
(:func:`rankcollapse.core.stats.resampled_medians`). Results stored before it was kept have none.

Stored as ``results/<page>/<key>.samples.npz`` (:func:`to_bytes`), compressed: the natural log of every value
as float32 (:data:`ENCODING` ``"log"``; 4 bytes per value, no underflow for values tracked exactly far below
float32's range, relative error about 6e-8 of the log), the groups as int32, its SHA-256 in the result's
record and verified on every load like the table's. Files written before the encoding hold the values
themselves as float32 (no ``encoding`` entry); both read the same.

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
    [curve, layer + 1, sample] float32 or float64, NaN past a curve's last layer; ``groups`` [sample] int (the
    article of each sample, :func:`article_groups`) or None when not recorded.
    """

    labels: pd.DataFrame
    values: dict[str, np.ndarray]
    groups: np.ndarray | None = None

    def __post_init__(self) -> None:
        if tuple(self.labels.columns) != CURVE_COLUMNS:
            raise ValueError(f"labels must have the columns {', '.join(CURVE_COLUMNS)}; "
                             f"got {list(self.labels.columns)}")
        for name, array in self.values.items():
            if array.ndim != 3 or array.shape[0] != len(self.labels):
                raise ValueError(f"values[{name!r}] must be [curve={len(self.labels)}, layer + 1, sample]; "
                                 f"got {array.shape}")
        if self.groups is not None and np.shape(self.groups) != (self.n_samples,):
            raise ValueError(f"groups must give one article per sample ({self.n_samples}); "
                             f"got shape {np.shape(self.groups)}")

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
ENCODING = "log"  # the values are stored as their natural log (files without this entry: the values)


def article_of(sample_id: str) -> str:
    """The article a sample was cut from: ``"<title>#<sentence>"`` -> the title; a run of joined leads
    (``"<title>+<n>"``, the cut "concatenated" of :data:`rankcollapse.experiments.data.CUT_NAMES`) shares text
    with no other run and is its own group.

    >>> article_of("Ada Lovelace#3"), article_of("Ada Lovelace+2")
    ('Ada Lovelace', 'Ada Lovelace+2')
    """
    return sample_id.rpartition("#")[0] if "#" in sample_id else sample_id


def article_groups(sample_ids: tuple[str, ...]) -> np.ndarray | None:
    """Each sample's article as an index in order of first appearance; None without ids (a device bundle).

    >>> article_groups(("A#0", "B#1", "A#4")).tolist()
    [0, 1, 0]
    """
    if not sample_ids:
        return None
    index: dict[str, int] = {}
    return np.array([index.setdefault(article_of(s), len(index)) for s in sample_ids], dtype=np.int32)


def from_metrics(parts: list[tuple[list[dict], dict]], groups: np.ndarray | None = None) -> SampleValues:
    """The per-sample values of a sweep from its parts' metrics, in the order of the parts and their curves.

    ``parts``: (labels, metrics) pairs, one dict of CURVE_COLUMNS per curve of the part and its metrics, each
    [layer + 1, curve, sample]; parts of fewer layers are padded with NaN. Only SAMPLE_METRICS are kept, as
    float32. ``groups``: each sample's article (:func:`article_groups`), or None.
    Shapes: -> values[metric] [curve, layer + 1, sample].
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
                        {name: _decoded(_encoded(np.concatenate(arrays))) for name, arrays in values.items()},
                        groups)  # rounded as stored: a computed result reads as its stored copy


_STORED_KEYS = ("labels", "groups", "encoding")  # entries of the file that are not metrics


def _encoded(values: np.ndarray) -> np.ndarray:
    """Values as stored: their natural log as float32 (0 -> -inf).  Shapes: any -> same."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(values, dtype=np.float64)).astype(STORED_DTYPE)


def _decoded(logs: np.ndarray) -> np.ndarray:
    """Stored logs back to values, float64.  Shapes: any -> same."""
    return np.exp(logs.astype(np.float64))


def to_bytes(samples: SampleValues) -> bytes:
    """The compressed ``.npz`` bytes of per-sample values: per metric the log of its values as float32
    (:data:`ENCODING`), the groups (when recorded) and the curves' labels as JSON."""
    buffer = io.BytesIO()
    labels = json.dumps(samples.labels.astype(object).where(samples.labels.notna(), None).to_dict("records"))
    groups = {} if samples.groups is None else {"groups": np.asarray(samples.groups, dtype=np.int32)}
    logs = {k: _encoded(v) for k, v in samples.values.items()}
    np.savez_compressed(buffer, labels=np.array(labels), encoding=np.array(ENCODING), **groups, **logs)
    return buffer.getvalue()


def from_bytes(data: bytes) -> SampleValues:
    """Per-sample values from ``.npz`` bytes (:func:`to_bytes`, or a file written before the log encoding);
    ValueError when they are not such a file."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            labels = pd.DataFrame(json.loads(str(archive["labels"])), columns=list(CURVE_COLUMNS))
            encoding = str(archive["encoding"]) if "encoding" in archive.files else None
            groups = archive["groups"] if "groups" in archive.files else None
            values = {name: archive[name] for name in archive.files if name not in _STORED_KEYS}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as err:
        raise ValueError(f"not a per-sample values file ({type(err).__name__})") from None
    if encoding not in (None, ENCODING):
        raise ValueError(f"not a per-sample values file (encoding {encoding!r})")
    if encoding == ENCODING:
        values = {name: _decoded(array) for name, array in values.items()}
    return SampleValues(labels, values, groups)
