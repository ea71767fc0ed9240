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

Stored as ``results/<page>/<key>.samples.npz`` (:func:`to_bytes`), compressed (:data:`ENCODING`
``"log16_ratio_derived"``): ``mu`` and ``norm`` are stored, ``relative_mu`` is their ratio computed on load
(:func:`with_ratio`, as :mod:`rankcollapse.core.metrics` computes it), so a third of the bytes go; it is
stored too only where the ratio cannot be derived (a stack whose mu and norm overflowed to inf while their
ratio was measured: pretrained decoders' pure attention at depth). Of each stored value the natural log (no
underflow for values tracked exactly far below float32's range), quantized per metric, curve and layer to
65,533 steps across its samples' range (int16 codes written as two byte planes, a float64 centre and step per
curve and layer; NaN and ±inf kept as codes), so the log is off by at most half a step, about ``range /
131064``: 2.5e-4 for the widest spread stored, a relative error of 0.025 % in the value (``relative_mu``: at
most the sum of its two parts' errors). About 1.4-1.7 bytes per stored value on a 256-sample run (the float32
logs stored before: 2.4-2.9); the groups as int32; its SHA-256 in the result's record and verified on every
load like the table's. Files written before hold all three metrics: as quantized logs (``"log16"``, to
2026-12-07), logs as float32 (``"log"``) or the values as float32 (no ``encoding`` entry); all read the same.

A sweep that computes the token geometry (Fig. 4: ``geometry``) with the full transformer also keeps
:data:`GEOMETRY_METRICS` (σ_min and mean |cos|) per sample, encoded alike, for its full-transformer curves
only (what Fig. 4's claims read; NaN for the SAN curves, which then cost a few bytes).

Used by: the results store (written beside a result, hashed like its table), the verdicts' effect sizes.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass

import numpy as np
import pandas as pd

# the metrics kept per sample (what the verdicts' effects read); the first is the ratio of the other two,
# computed on load (STORED_METRICS are always written, the ratio only where it cannot be derived)
SAMPLE_METRICS = ("relative_mu", "mu", "norm")
STORED_METRICS = ("mu", "norm")
# kept per sample too, for the full-transformer curves of a sweep that computes them (NaN for other curves)
GEOMETRY_METRICS = ("sigma_min", "mean_abs_cosine")
FULL_TRANSFORMER = "full transformer"  # the variant label of a sweep's full-transformer curves
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
# mu and norm stored as their natural log quantized to int16 codes ("log16": all three metrics so, to
# 2026-12-07; "log": their logs as float32, 2026-12-04 to -07; files without this entry: the values as
# float32)
ENCODING = "log16_ratio_derived"
_STEPS = 32766  # finite codes -32766 .. 32766 around a curve-layer's centre
_NAN, _MINUS_INF, _PLUS_INF = -32768, -32767, 32767  # the codes of the other values


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
    [layer + 1, curve, sample]; parts of fewer layers are padded with NaN. Only SAMPLE_METRICS are kept, and
    GEOMETRY_METRICS of the full-transformer parts that computed them (NaN for every other curve), as
    float64 (the store rounds them, :data:`ENCODING`, and a saved result holds them as stored).
    ``groups``: each sample's article (:func:`article_groups`), or None.
    Shapes: -> values[metric] [curve, layer + 1, sample].
    """
    depth = max(next(iter(m.values())).shape[0] for _, m in parts)

    def full(part_labels: list[dict], metrics: dict) -> bool:  # a full-transformer part with its geometry
        return (all(row.get("variant") == FULL_TRANSFORMER for row in part_labels)
                and set(GEOMETRY_METRICS) <= metrics.keys())

    names = SAMPLE_METRICS + (GEOMETRY_METRICS if any(full(*part) for part in parts) else ())
    labels, values = [], {name: [] for name in names}
    for part_labels, metrics in parts:
        labels += [{c: row.get(c) for c in CURVE_COLUMNS} for row in part_labels]
        for name in names:
            # [curve, layer + 1, sample]
            if name in GEOMETRY_METRICS and not full(part_labels, metrics):  # not kept: NaN, not converted
                x = np.full(np.asarray(metrics["mu"].shape)[[1, 0, 2]], np.nan)
            else:
                x = np.asarray(metrics[name].detach().cpu(), dtype=np.float64).transpose(1, 0, 2)
            pad = np.full((x.shape[0], depth - x.shape[1], x.shape[2]), np.nan)
            values[name].append(np.concatenate([x, pad], axis=1))
    return SampleValues(pd.DataFrame(labels, columns=list(CURVE_COLUMNS)),
                        {name: np.concatenate(arrays) for name, arrays in values.items()}, groups)


def with_ratio(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``values`` with ``relative_mu = mu / norm`` (norm clamped at float64's smallest normal number, as
    :func:`rankcollapse.core.metrics.norm_metrics` divides; NaN past a curve's last layer stays NaN) where
    they hold mu and norm but not the ratio.  Shapes: each [curve, layer + 1, sample]."""
    if "relative_mu" in values or not {"mu", "norm"} <= values.keys():
        return values
    # inf / inf (overflowed) gives NaN: the ratio is then stored (derives_ratio)
    with np.errstate(invalid="ignore"):
        ratio = values["mu"] / np.maximum(values["norm"], np.finfo(np.float64).tiny)
    return {"relative_mu": ratio, **values}


def derives_ratio(values: dict[str, np.ndarray]) -> bool:
    """Whether mu over norm gives ``values``' relative_mu wherever it is finite, and nowhere else (not where
    mu and norm overflowed to inf with the ratio measured; true without a ratio). Shapes: each [curve, layer +
    1, sample]."""
    if "relative_mu" not in values:
        return True
    derived = with_ratio({"mu": values["mu"], "norm": values["norm"]})["relative_mu"]
    return bool(np.array_equal(np.isfinite(derived), np.isfinite(values["relative_mu"])))


_STORED_KEYS = ("labels", "groups", "encoding")  # entries of the file that are not metrics
_CENTRE, _STEP = ".centre", ".step"  # a metric's entries beside its codes: "<metric>.centre", "<metric>.step"
LOG_PARTS = ("", _CENTRE, _STEP)  # the entries of one array encoded by encode_logs, as suffixes of its name


def encode_logs(values: np.ndarray) -> dict[str, np.ndarray]:
    """Values (not negative) as stored: their natural log as int16 codes around a float64 centre in float64
    steps, per curve and layer (the midpoint and 1/65532 of the finite logs' range over samples); NaN, -inf
    (a value 0) and +inf as codes of their own; entries named by :data:`LOG_PARTS`.  Shapes: [curve,
    layer + 1, sample] (or any [..., sample]) -> codes [2, curve, layer + 1, sample] (uint8: high and low
    bytes), centre and step [curve, layer + 1]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(np.asarray(values, dtype=np.float64))
        finite = np.isfinite(logs)
        low = np.where(finite, logs, np.inf).min(axis=-1)
        high = np.where(finite, logs, -np.inf).max(axis=-1)
        seen = np.isfinite(low)
        centre = np.where(seen, (low + high) / 2, 0.0)
        step = np.where(seen, (high - low) / (2 * _STEPS), 0.0)
        scaled = (logs - centre[..., None]) / np.where(step > 0, step, 1.0)[..., None]
        codes = np.clip(np.rint(np.where(finite, scaled, 0.0)), -_STEPS, _STEPS)
    codes = np.where(np.isnan(logs), _NAN, np.where(logs == -np.inf, _MINUS_INF,
                                                    np.where(logs == np.inf, _PLUS_INF, codes)))
    # the codes' high and low bytes as two planes: zlib compresses them a third better than int16
    planes = codes.astype(np.int16).view(np.uint16)
    return {"": np.stack([planes >> 8, planes & 0xFF]).astype(np.uint8), _CENTRE: centre, _STEP: step}


def decode_logs(stored: dict[str, np.ndarray]) -> np.ndarray:
    """Stored codes back to values, float64 (:func:`encode_logs`).  Shapes: -> [curve, layer + 1, sample]."""
    high, low = stored[""].astype(np.uint16)  # [2, curve, layer + 1, sample]: the codes' byte planes
    codes = ((high << 8) | low).view(np.int16)
    logs = stored[_CENTRE][..., None] + codes.astype(np.float64) * stored[_STEP][..., None]
    logs = np.where(codes == _NAN, np.nan, np.where(codes == _MINUS_INF, -np.inf,
                                                    np.where(codes == _PLUS_INF, np.inf, logs)))
    return np.exp(logs)


def to_bytes(samples: SampleValues) -> bytes:
    """The compressed ``.npz`` bytes of per-sample values: per metric of STORED_METRICS (and of
    GEOMETRY_METRICS, when held) the quantized log of its values (:data:`ENCODING`; entries ``<metric>``,
    ``<metric>.centre``, ``<metric>.step``), the groups (when recorded) and the curves' labels as JSON;
    ``relative_mu`` is written only where mu over norm does not give it (:func:`derives_ratio`)."""
    missing = [name for name in STORED_METRICS if name not in samples.values]
    if missing:
        raise ValueError(f"samples must hold the metrics {', '.join(STORED_METRICS)}; missing {missing}")
    buffer = io.BytesIO()
    labels = json.dumps(samples.labels.astype(object).where(samples.labels.notna(), None).to_dict("records"))
    groups = {} if samples.groups is None else {"groups": np.asarray(samples.groups, dtype=np.int32)}
    names = (*(() if derives_ratio(samples.values) else ("relative_mu",)), *STORED_METRICS,
             *(name for name in GEOMETRY_METRICS if name in samples.values))
    stored = {name + part: array for name in names
              for part, array in encode_logs(samples.values[name]).items()}
    np.savez_compressed(buffer, labels=np.array(labels), encoding=np.array(ENCODING), **groups, **stored)
    return buffer.getvalue()


def stored_encoding(data: bytes) -> str | None:
    """The encoding of a per-sample values file's bytes (:data:`ENCODING` or an earlier one; None: the
    values themselves, written before the log encoding)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return str(archive["encoding"]) if "encoding" in archive.files else None


def from_bytes(data: bytes) -> SampleValues:
    """Per-sample values from ``.npz`` bytes (:func:`to_bytes`, or a file of an earlier encoding);
    ValueError when they are not such a file."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            labels = pd.DataFrame(json.loads(str(archive["labels"])), columns=list(CURVE_COLUMNS))
            encoding = str(archive["encoding"]) if "encoding" in archive.files else None
            groups = archive["groups"] if "groups" in archive.files else None
            arrays = {name: archive[name] for name in archive.files if name not in _STORED_KEYS}
        if encoding in (ENCODING, "log16"):
            names = [n for n in arrays if not n.endswith((_CENTRE, _STEP))]
            values = {n: decode_logs({part: arrays[n + part] for part in LOG_PARTS}) for n in names}
        elif encoding == "log":
            values = {name: np.exp(array.astype(np.float64)) for name, array in arrays.items()}
        elif encoding is None:
            values = arrays
        else:
            raise ValueError(f"encoding {encoding!r}")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as err:
        raise ValueError(f"not a per-sample values file ({type(err).__name__})") from None
    return SampleValues(labels, with_ratio(values), groups)
