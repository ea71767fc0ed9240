"""The units of a long sweep and their checkpoints: each finished unit of work, written atomically, reusable only by the
same parameters, block, package source and PyTorch.

Used by: :mod:`rankcollapse.experiments.sweep`.
"""

from __future__ import annotations

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


class Checkpoints:
    """Finished units in ``folder`` (None: none kept), each file carrying the parameters it belongs to and
    the seconds its computation took."""

    def __init__(self, folder: Path | None, identity: dict) -> None:
        self.folder, self.identity = folder, canonical_parameters(identity)

    def load(self, unit: Unit) -> tuple[dict[str, torch.Tensor], float] | None:
        """The unit's metrics and compute seconds, or None when it has no checkpoint of this identity."""
        path = None if self.folder is None else self.folder / f"{unit.name}.pt"
        if path is None or not path.is_file():
            return None
        record = torch.load(path, weights_only=True)
        if record.get("identity") != self.identity or record.get("unit") != unit.name:
            return None
        return record["metrics"], record["seconds"]

    def save(self, unit: Unit, metrics: dict[str, torch.Tensor], seconds: float) -> None:
        if self.folder is not None:
            record = {"identity": self.identity, "unit": unit.name, "metrics": metrics, "seconds": seconds}
            atomic_write(self.folder / f"{unit.name}.pt", lambda tmp: torch.save(record, tmp))
