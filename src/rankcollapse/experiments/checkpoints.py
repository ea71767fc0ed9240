"""The units of a long sweep and their checkpoints: each finished unit of work, written atomically, reusable
only by the same parameters, block, computing code, PyTorch and model files, and only while its metrics hash
to what was written.

Where they wait (:func:`partial_folder`): beside the results of their store, in
``<store root>/partial/<page>/<result key>-<code hash>/`` (for the book: ``results/partial/``, tracked by
git), the code hash being the first 12 digits of :func:`rankcollapse.experiments.provenance.compute_sha256`
(the code that computes the numbers: edits to the book's pages, verdicts or theory keep it). Committed with
the repository, a run's finished units travel with it: the same command resumes them in any clone, on any
machine, with an empty cache. Each folder holds a record of its run (:data:`RUN_RECORD`: page, key,
parameters, the commit and code hash that started it, the number of units), which ``rankcollapse results``
lists (:func:`partial_runs`). Once the result is stored it replaces its units: the folder is deleted
(:func:`superseded`).

A unit's checkpoint ``<unit>.pt`` holds its metrics exactly (float64: about 0.55 MB for 64 samples of Fig.
2's twelve configurations), so a resumed run stores the uninterrupted run's table byte for byte. Too large to
commit for a run of thousands of samples, the finished units can be *packed* first (:func:`pack_units`,
``rankcollapse results --pack``): ``<unit>.npz`` holds each metric's natural log in 2 bytes a value (the
per-sample values' encoding, :func:`rankcollapse.experiments.sample_values.encode_logs`, per layer and
configuration over the unit's samples; metrics holding integers, negative values or one value per layer and
configuration, such as the 0/1 flags, exactly): 13-16 % of the size on Fig. 2's units. A run resumed from
packed units is no longer byte-identical to an uninterrupted one: a resumed value's log is off by at most half
a step, its range over the unit's samples / 131,064 (a relative error of 1.8e-4 for values spread over ten
decades; at most 3e-5 on Fig. 2's units), and the result's record counts them (``units_resumed_packed``).

A checkpoint that cannot be read back (truncated by a full disk or a copy, overwritten, edited) is never fatal
and never used: it is named in one warning line on stderr, moved aside to ``<name>.corrupt`` and its unit
computed again.

Used by: :mod:`rankcollapse.experiments.sweep`, :mod:`rankcollapse.book.cli_listing`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rankcollapse.experiments.provenance import (NoBookError, atomic_write, book_root, compute_sha256,
                                                 git_commit)
from rankcollapse.experiments.sample_values import LOG_PARTS, decode_logs, encode_logs
from rankcollapse.experiments.store import PARTIAL, ResultStore, canonical_parameters, result_key

RUN_RECORD = "run.json"  # in a partial folder: what run its units belong to
EXACT, PACKED = ".pt", ".npz"  # a unit's checkpoint, exact or packed (pack_units)


@dataclass(frozen=True)
class Unit:
    """One weight source x one sample block x the SAN configurations or the full transformer."""

    weights: str  # "initialized" or "pretrained"
    full: bool  # True: the full-transformer reference; False: every SAN configuration
    start: int  # first sample
    stop: int  # one past the last sample

    @property
    def name(self) -> str:
        return f"{self.weights}-{'full' if self.full else 'san'}-{self.start}-{self.stop}"


def partial_folder(store: ResultStore, page: str, parameters: dict) -> Path:
    """Where a result's finished units wait: ``<store root>/partial/<page>/<key>-<code hash>``, keyed by the
    result key and the computing code's hash (:func:`rankcollapse.experiments.provenance.compute_sha256`), so
    a commit that changes no computing code keeps them."""
    return store.root / PARTIAL / page / f"{result_key(page, parameters)}-{compute_sha256()[:12]}"


def warn_orphans(folder: Path, page: str) -> None:
    """Before a run's first unit: one line on stderr per unit folder of the same result left by other
    computing code (:func:`orphaned_units`)."""
    for line in orphaned_units(folder):
        print(f"{page}: {line}", file=sys.stderr)


def _unit_files(folder: Path) -> dict[str, Path]:
    """A partial folder's finished units, name -> checkpoint (the exact one where a unit has both)."""
    found = {path.stem: path for path in folder.glob(f"*{PACKED}")}
    return {**found, **{path.stem: path for path in folder.glob(f"*{EXACT}")}}


def _finished(folder: Path) -> int:
    """How many finished units a partial folder holds."""
    return len(_unit_files(folder))


def _read_record(folder: Path) -> dict:
    """A partial folder's run record, or {} where it has none (folders written before records were kept)."""
    try:
        return json.loads((folder / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return {}


def partial_runs(store: ResultStore) -> list[dict]:
    """Every unfinished run of ``store``: page, key, folder, finished and total units, the parameters, commit
    and start time its run record names, whether this code can resume it (``resumable``: its code hash is
    this package's :func:`compute_sha256`) and whether its result is stored already (``stored``).

    Shapes: -> one dict per partial folder, sorted by page and key.
    """
    here, runs = compute_sha256()[:12], []
    for folder in sorted((store.root / PARTIAL).glob("*/*-*")):
        if folder.is_dir():
            record = _read_record(folder)
            key, _, code = folder.name.rpartition("-")
            parameters = record.get("parameters")
            runs.append({"page": folder.parent.name, "key": key, "folder": folder,
                         "resumable": code == here, "done": _finished(folder), "units": record.get("units"),
                         "parameters": parameters if isinstance(parameters, dict) else {},
                         "commit": record.get("git_commit", "unknown"),
                         "started": record.get("started_utc", ""),
                         "stored": store.files(folder.parent.name, key)[1].is_file()})
    return runs


def orphaned_units(folder: Path) -> list[str]:
    """One line per partial folder of the same result left by other computing code (it cannot resume here),
    naming its finished units and what would resume it: its commit, or that commit without this tree's local
    changes, or nothing (it was started from uncommitted source)."""
    lines = []
    key = folder.name.rpartition("-")[0]
    for other in sorted(folder.parent.glob(f"{key}-*")):
        if other != folder and other.is_dir() and (done := _finished(other)):
            commit = str(_read_record(other).get("git_commit", "unknown"))
            if from_uncommitted(commit):
                how = (f"they were computed by uncommitted source, so nothing resumes them; this run "
                       f"computes them again and deletes {other.name} once its result is stored")
            elif git_commit(folder_root()).removesuffix("-dirty") == commit:  # asked only when needed
                how = (f"this tree is commit {commit} with local changes to the package's computing code; "
                       f"undo them (git stash) to resume them, or this run computes them again and deletes "
                       f"{other.name}")
            else:
                how = (f"check out {commit} to resume them, or this run computes them again and deletes "
                       f"{other.name}")
            lines.append(f"{done} finished units of this result wait in {other}, from other computing code "
                         f"(commit {commit}); they cannot resume here: {how}")
    return lines


def from_uncommitted(commit: str) -> bool:
    """Whether a run's recorded commit is no commit at all: a tree with local changes, or none known (its
    units resume nowhere else).

    >>> from_uncommitted("1fa87a2-dirty"), from_uncommitted("unknown"), from_uncommitted("1fa87a2")
    (True, True, False)
    """
    return commit.endswith("-dirty") or commit == "unknown"


def folder_root() -> Path:
    """The book root whose commit names this run (the package's own checkout outside a book)."""
    try:
        return book_root()
    except NoBookError:
        return Path(__file__).resolve().parent


def superseded(folder: Path) -> None:
    """Once a result is stored: remove its partial ``folder`` and every folder of the same result left by
    other computing code (they could only compute what is stored now), and the page folder and
    ``<store root>/partial`` when left empty."""
    key = folder.name.rpartition("-")[0]
    for other in folder.parent.glob(f"{key}-*"):  # ``folder`` among them
        shutil.rmtree(other, ignore_errors=True)
    with contextlib.suppress(OSError):  # only when empty
        folder.parent.rmdir()
        folder.parent.parent.rmdir()


def other_block(folder: Path | None, plan: list[Unit], block: int) -> str | None:
    """One line when ``folder`` holds finished units that are not units of ``plan`` (cut at another block
    size: other sample ranges, which this run cannot reuse), saying how to resume them; None otherwise."""
    names = {unit.name for unit in plan}
    sizes = []
    for name in _unit_files(folder) if folder is not None and folder.is_dir() else []:
        with contextlib.suppress(ValueError):
            start, stop = map(int, name.rsplit("-", 2)[1:])
            if name not in names:
                sizes.append(stop - start)
    if not sizes:
        return None
    return (f"{len(sizes)} finished units in {folder} were cut at {max(sizes)} samples per unit; this run "
            f"cuts {block} (RANKCOLLAPSE_BLOCK_SAMPLES), so it cannot reuse them and computes their samples "
            f"again; to resume them instead, stop it and run with RANKCOLLAPSE_BLOCK_SAMPLES={max(sizes)}")


def metrics_digest(metrics: dict[str, torch.Tensor], seconds: float) -> str:
    """sha256 of a unit's metrics (names, dtypes, shapes, bytes) and compute seconds, kept in its checkpoint.

    Shapes: metrics each [layer + 1, config, sample].
    """
    digest = hashlib.sha256(repr(float(seconds)).encode())
    for name in sorted(metrics):
        tensor = metrics[name].detach().cpu().contiguous()
        digest.update(f"\0{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _read(path: Path) -> dict:
    """A checkpoint's record (identity, unit, metrics, seconds, digest), exact or packed; raises whatever
    reading a damaged file raises."""
    if path.suffix == EXACT:
        return torch.load(path, weights_only=True)
    with np.load(path, allow_pickle=False) as archive:
        record = json.loads(str(archive["record"]))
        record["metrics"] = _unpacked(archive, record.pop("stored"))
    return record


def _unpacked(arrays: Mapping[str, np.ndarray], stored: dict[str, list[str]]) -> dict[str, torch.Tensor]:
    """A packed checkpoint's metrics from its arrays, ``stored`` saying per metric how (``exact`` or
    ``log16``) and its dtype.  Shapes: -> each [layer + 1, config, sample]."""
    return {name: torch.from_numpy(np.asarray(arrays[name]) if how == "exact" else
                                   decode_logs({part: arrays[name + part] for part in LOG_PARTS}))
            .to(getattr(torch, dtype)) for name, (how, dtype) in stored.items()}


def _packed(record: dict) -> bytes:
    """A checkpoint's record (:func:`_read`) packed: the ``.npz`` bytes of its metrics' encoded logs, or the
    values themselves for metrics holding integers, negative values or one value across samples, and its other
    entries as JSON with the digest of the metrics as they read back."""
    arrays, stored = {}, {}
    for name, tensor in record["metrics"].items():
        values = tensor.detach().cpu().double().numpy()
        finite = values[np.isfinite(values)]
        same = ((values == values[..., :1]) | np.isnan(values)).all()  # one value across samples: e.g. eps
        exact = bool((finite < 0).any() or (finite == np.round(finite)).all() or same)  # flags, a rank, ...
        arrays.update({name: values} if exact else
                      {name + part: array for part, array in encode_logs(values).items()})
        stored[name] = ["exact" if exact else "log16", str(tensor.dtype).removeprefix("torch.")]
    digest = metrics_digest(_unpacked(arrays, stored), record["seconds"])
    meta = {"identity": record["identity"], "unit": record["unit"], "seconds": record["seconds"],
            "stored": stored, "digest": digest}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, record=np.array(json.dumps(meta)), **arrays)
    return buffer.getvalue()


def pack_units(folder: Path) -> list[tuple[Path, int, int]]:
    """Pack every exact checkpoint of a partial ``folder`` (``<unit>.pt`` -> ``<unit>.npz``, written
    atomically, then the exact one deleted); checkpoints that cannot be read are left as they are (a run
    moves them aside and computes their units again). Returns each packed file with its bytes before and
    after."""
    packed = []
    for path in sorted(folder.glob(f"*{EXACT}")):
        try:
            record = _read(path)
            data = _packed(record)
        except Exception:  # noqa: BLE001 -- a damaged checkpoint: not packed, the run deals with it
            continue
        target = path.with_suffix(PACKED)
        atomic_write(target, lambda tmp: Path(tmp).write_bytes(data))
        packed.append((target, path.stat().st_size, len(data)))
        path.unlink()
    return packed


class Checkpoints:
    """Finished units in ``folder`` (None: none kept), each file carrying the parameters it belongs to,
    the seconds its computation took and the hash of both; ``run``: the run's record (:data:`RUN_RECORD`),
    written beside the first unit. ``packed``: the units :meth:`load` read from packed checkpoints."""

    def __init__(self, folder: Path | None, identity: dict, run: dict | None = None) -> None:
        self.folder, self.identity, self.run = folder, canonical_parameters(identity), run
        self.packed: set[str] = set()

    def load(self, unit: Unit) -> tuple[dict[str, torch.Tensor], float] | None:
        """The unit's metrics and compute seconds, or None when it has no checkpoint of this identity, or one
        that is corrupt (then moved aside, with one warning line). An exact checkpoint is read before a
        packed one."""
        candidates = () if self.folder is None else (self.folder / f"{unit.name}{s}" for s in (EXACT, PACKED))
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            return None
        try:
            record = _read(path)
        except Exception as err:  # noqa: BLE001 -- truncated zip, bad pickle, EOF, ...: whatever the damage
            return self._corrupt(path, " ".join(str(err).split()).split(". ")[0][:160] or type(err).__name__)
        if not isinstance(record, dict) or record.get("identity") != self.identity \
                or record.get("unit") != unit.name:
            return None  # another run's (its parameters, block or code): computed again and overwritten
        metrics, seconds = record.get("metrics"), record.get("seconds")
        ok = isinstance(metrics, dict) and metrics and isinstance(seconds, float) and all(
            isinstance(v, torch.Tensor) and v.dim() == 3 and v.shape[-1] == unit.stop - unit.start
            for v in metrics.values())
        if not ok or record.get("digest") != metrics_digest(metrics, seconds):
            return self._corrupt(path, "its metrics are not those it was written with")
        if path.suffix == PACKED:
            self.packed.add(unit.name)
        return metrics, seconds

    @staticmethod
    def _corrupt(path: Path, why: str) -> None:
        aside = path.with_name(path.name + ".corrupt")
        with contextlib.suppress(OSError):
            path.replace(aside)
        print(f"warning: checkpoint {path} is corrupt ({why}); moved it to {aside.name} and computing its "
              f"unit again", file=sys.stderr, flush=True)

    def save(self, unit: Unit, metrics: dict[str, torch.Tensor], seconds: float) -> None:
        if self.folder is not None:
            seconds = float(seconds)
            record = {"identity": self.identity, "unit": unit.name, "metrics": metrics, "seconds": seconds,
                      "digest": metrics_digest(metrics, seconds)}
            atomic_write(self.folder / f"{unit.name}.pt", lambda tmp: _save(record, tmp))
            # with the first unit, not before
            if self.run is not None and not (self.folder / RUN_RECORD).is_file():
                run = {**self.run, "key": self.folder.name.rpartition("-")[0],
                       "compute_sha256": compute_sha256()}
                text = json.dumps(run, indent=1, sort_keys=True, default=str) + "\n"
                atomic_write(self.folder / RUN_RECORD, lambda tmp: Path(tmp).write_text(text))


def _save(record: dict, path: str) -> None:
    """torch.save, with its failure to write (a full disk: ``unexpected pos ...``) as the OSError it is."""
    try:
        torch.save(record, path)
    except RuntimeError as err:
        raise OSError(f"torch.save failed: {' '.join(str(err).split())[:120]}; is the disk full?") from err
