"""The results store: small tidy tables of per-layer statistics, each with its full provenance.

A result is identified by its page name and its *complete* parameter set. It lives in two files,
``results/<page>/<key>.csv`` (the tidy table) and ``results/<page>/<key>.json`` (provenance: every
parameter, package versions, git commit, model spec and weight hash, sample hash, dtype, device,
hardware, wall time), where ``key`` is a hash of the canonical JSON of ``{page, parameters}``. A lookup
matches only when the stored parameters are *exactly* the ones asked for (the hash picks the file, the
JSON comparison confirms it), so a stored number can never stand in for a different setting.

Writes are atomic (temporary file in the same folder, then a rename; the CSV first, the JSON last, so a
result without its JSON does not exist). A sweep stores each entry as soon as it is computed, so an
interrupted sweep resumes at the first entry that is missing.

Used by: :mod:`rankcollapse.experiments` (every experiment page) and ``tests/unit/test_results.py``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from rankcollapse import __version__
from rankcollapse.plotting import atomic_write

KEY_LENGTH = 16  # hex digits of the sha256 used as a file name


def canonical_parameters(parameters: dict) -> dict:
    """Parameters as plain JSON values (tuples become lists), so equal settings compare equal.

    >>> canonical_parameters({"b": (1, 2), "a": None})
    {'a': None, 'b': [1, 2]}
    """
    return json.loads(json.dumps(parameters, sort_keys=True, default=_plain))


def _plain(value: object) -> object:
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"parameter values must be JSON-like (numbers, strings, lists, dicts), got {type(value).__name__}")


def result_key(page: str, parameters: dict) -> str:
    """The file stem of a result: a hash of the canonical ``{page, parameters}``.

    >>> result_key("fig2", {"n_samples": 32}) == result_key("fig2", {"n_samples": 32})
    True
    """
    text = json.dumps({"page": page, "parameters": canonical_parameters(parameters)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def hardware() -> str:
    """What the computation ran on, in words (CPU model and core count, GPU name when used)."""
    cpu = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} GPU; CPU {cpu}"
    return f"CPU {cpu}"


@dataclass(frozen=True, eq=False)
class StoredResult:
    """A tidy table and the provenance it was stored with."""

    table: pd.DataFrame  # tidy: one row per layer x configuration x metric (sample statistics in columns)
    provenance: dict  # parameters, versions, commit, model and sample hashes, dtype, device, hardware, wall time
    csv_path: Path  # where the table lives
    loaded: bool  # True when read from the store, False when computed by this call


class ResultStore:
    """Results under ``root`` (default ``$RANKCOLLAPSE_RESULTS_DIR`` or ``<book root>/results``)."""

    def __init__(self, root: Path | str | None = None) -> None:
        if root is None:
            override = os.environ.get("RANKCOLLAPSE_RESULTS_DIR")
            if override:
                root = Path(override)
            else:
                from rankcollapse.plotting import book_root

                root = book_root() / "results"
        self.root = Path(root)

    def paths(self, page: str, parameters: dict) -> tuple[Path, Path]:
        """``(csv, json)`` paths of a result."""
        if not page or "/" in page or page.startswith("."):
            raise ValueError(f"page must be a plain page name such as 'fig2', got {page!r}")
        key = result_key(page, parameters)
        return self.root / page / f"{key}.csv", self.root / page / f"{key}.json"

    def load(self, page: str, parameters: dict) -> StoredResult | None:
        """The stored result whose parameters equal ``parameters`` exactly, else None."""
        csv_path, json_path = self.paths(page, parameters)
        if not (csv_path.is_file() and json_path.is_file()):
            return None
        provenance = json.loads(json_path.read_text())
        if provenance.get("page") != page or provenance.get("parameters") != canonical_parameters(parameters):
            return None
        return StoredResult(pd.read_csv(csv_path, keep_default_na=False, na_values=[""]), provenance, csv_path, True)

    def save(self, page: str, parameters: dict, table: pd.DataFrame, provenance: dict) -> StoredResult:
        """Store a table atomically (CSV, then the JSON that makes it visible)."""
        csv_path, json_path = self.paths(page, parameters)
        record = {**provenance, "page": page, "parameters": canonical_parameters(parameters), "key": csv_path.stem}
        text = json.dumps(record, indent=1, sort_keys=True, default=str) + "\n"
        atomic_write(csv_path, lambda tmp: table.to_csv(tmp, index=False, float_format="%.17g"))
        atomic_write(json_path, lambda tmp: Path(tmp).write_text(text))
        return StoredResult(table, record, csv_path, False)

    def load_or_compute(self, page: str, parameters: dict,
                        compute: Callable[[], tuple[pd.DataFrame, dict]]) -> StoredResult:
        """The stored result for exactly these parameters, or ``compute()`` stored with its provenance.

        ``compute`` returns ``(table, extra provenance)``; versions, commit, hardware and wall time are
        added here.
        """
        stored = self.load(page, parameters)
        if stored is not None:
            return stored
        start = time.perf_counter()
        table, extra = compute()
        provenance = {**base_provenance(), **extra, "wall_time_s": round(time.perf_counter() - start, 3)}
        return self.save(page, parameters, table, provenance)

    def sweep(self, page: str, entries: Iterable[dict],
              compute: Callable[[dict], tuple[pd.DataFrame, dict]]) -> list[StoredResult]:
        """Every entry's result; entries already stored are loaded, so an interrupted sweep resumes."""
        return [self.load_or_compute(page, entry, lambda entry=entry: compute(entry)) for entry in entries]

    def entries(self, page: str) -> list[dict]:
        """Provenance records of every stored result of ``page`` (for the drift test and the book)."""
        folder = self.root / page
        records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
        return [r for r in records if (folder / f"{r.get('key')}.csv").is_file()]


def base_provenance() -> dict:
    """Versions, commit, time and hardware of the current process."""
    from rankcollapse.plotting import book_root, git_commit

    try:
        commit = git_commit(book_root())
    except FileNotFoundError:
        commit = "unknown"
    return {
        "rankcollapse_version": __version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "git_commit": commit,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hardware(),
    }


def summary_table(store: ResultStore | None = None) -> pd.DataFrame:
    """One row per stored result: page, scale, model, the settings that tell it apart, where and how long it ran.

    ``settings`` lists the parameters (other than scale and model) whose values differ between the stored
    results of the same page, so two runs of one page at one scale never show as identical rows. Columns:
    page, result (the key), scale (samples×tokens×layers), model, settings, ran on (hardware and
    dtype), wall time (s), commit. Used by book/reproduce.md.
    """
    store = store or ResultStore()
    pages = sorted(p.name for p in store.root.iterdir() if p.is_dir()) if store.root.is_dir() else []
    shown = {"n_samples", "n_tokens", "n_layers", "model"}
    rows = []
    for page in pages:
        entries = store.entries(page)
        names = sorted({name for r in entries for name in r["parameters"]} - shown)
        differ = [n for n in names if len({json.dumps(r["parameters"].get(n)) for r in entries}) > 1]
        for r in entries:
            p = r["parameters"]
            settings = "; ".join(
                f"{n}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for n in differ for v in [p.get(n)]
            )
            rows.append({"page": page, "result": r["key"],
                         "scale": f"{p.get('n_samples')}×{p.get('n_tokens')}×{p.get('n_layers')}",
                         "model": p.get("model"), "settings": settings or "–",
                         "ran on": f"{r.get('hardware')}, {r.get('dtype')}",
                         "wall time (s)": r.get("wall_time_s"), "commit": str(r.get("git_commit", ""))[:8]})
    return pd.DataFrame(rows)
