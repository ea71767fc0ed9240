"""The units of a long sweep and their checkpoints: each finished unit of work, written atomically, reusable only by the
same parameters, block, package source, PyTorch and model files, and only while its metrics hash to what was written.

A checkpoint that cannot be read back (truncated by a full disk or a copy, overwritten, edited) is never fatal
and never used: it is named in one warning line on stderr, moved aside to ``<name>.pt.corrupt`` and its unit
computed again.

Used by: :mod:`rankcollapse.experiments.sweep`.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from rankcollapse.experiments.provenance import atomic_write, source_sha256
from rankcollapse.experiments.store import ResultStore, canonical_parameters, result_key


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
    """Where a result's finished units wait: keyed by the result key and the package's source hash
    (:func:`rankcollapse.experiments.provenance.source_sha256`), so a commit that changes no code keeps them."""
    return store.root / ".partial" / page / f"{result_key(page, parameters)}-{source_sha256()[:12]}"


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


class Checkpoints:
    """Finished units in ``folder`` (None: none kept), each file carrying the parameters it belongs to,
    the seconds its computation took and the hash of both."""

    def __init__(self, folder: Path | None, identity: dict) -> None:
        self.folder, self.identity = folder, canonical_parameters(identity)

    def load(self, unit: Unit) -> tuple[dict[str, torch.Tensor], float] | None:
        """The unit's metrics and compute seconds, or None when it has no checkpoint of this identity, or one
        that is corrupt (then moved aside, with one warning line)."""
        path = None if self.folder is None else self.folder / f"{unit.name}.pt"
        if path is None or not path.is_file():
            return None
        try:
            record = torch.load(path, weights_only=True)
        except Exception as err:  # noqa: BLE001 -- truncated zip, bad pickle, EOF, ...: whatever the damage
            return self._corrupt(path, " ".join(str(err).split()).split(". ")[0][:160] or type(err).__name__)
        if not isinstance(record, dict) or record.get("identity") != self.identity or record.get("unit") != unit.name:
            return None  # another run's (its parameters, block or code): computed again and overwritten
        metrics, seconds = record.get("metrics"), record.get("seconds")
        ok = isinstance(metrics, dict) and metrics and isinstance(seconds, float) and all(
            isinstance(v, torch.Tensor) and v.dim() == 3 and v.shape[-1] == unit.stop - unit.start
            for v in metrics.values())
        if not ok or record.get("digest") != metrics_digest(metrics, seconds):
            return self._corrupt(path, "its metrics are not those it was written with")
        return metrics, seconds

    @staticmethod
    def _corrupt(path: Path, why: str) -> None:
        aside = path.with_name(path.name + ".corrupt")
        with contextlib.suppress(OSError):
            path.replace(aside)
        print(f"warning: checkpoint {path} is corrupt ({why}); moved it to {aside.name} and computing its unit "
              f"again", file=sys.stderr, flush=True)

    def save(self, unit: Unit, metrics: dict[str, torch.Tensor], seconds: float) -> None:
        if self.folder is not None:
            seconds = float(seconds)
            record = {"identity": self.identity, "unit": unit.name, "metrics": metrics, "seconds": seconds,
                      "digest": metrics_digest(metrics, seconds)}
            atomic_write(self.folder / f"{unit.name}.pt", lambda tmp: _save(record, tmp))


def _save(record: dict, path: str) -> None:
    """torch.save, with its failure to write (a full disk: ``unexpected pos ...``) as the OSError it is."""
    try:
        torch.save(record, path)
    except RuntimeError as err:
        raise OSError(f"torch.save failed: {' '.join(str(err).split())[:120]}; is the disk full?") from err
