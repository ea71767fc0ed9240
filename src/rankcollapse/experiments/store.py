"""The results store: small tidy tables of per-layer statistics, each with its full provenance, verified
on every read.

A result is identified by its page name and its *complete* parameter set. It lives in two files,
``results/<page>/<key>.csv.gz`` (the tidy table as gzip-compressed CSV, a quarter of its bytes, so the tree
travels to a GPU machine beside a device bundle) and ``results/<page>/<key>.json`` (provenance: every
parameter, package versions, git commit, model spec and weight hash, sample hash, dtype, device, hardware,
wall time, and the SHA-256 and row count of the CSV text), and, for results stored since per-sample values
are kept, a third, ``results/<page>/<key>.samples.npz`` (:mod:`~rankcollapse.experiments.sample_values`, its
SHA-256 in the JSON as ``samples_sha256``, verified like the table's), where ``key`` is a hash of the
canonical JSON of ``{page, parameters}``. A lookup matches only when the stored parameters are *exactly* the
ones asked for, so a stored number can never stand in for a different setting.

A stored result is never read or listed without checking it: both files present, the JSON readable and
for this key, the table decompressing, the CSV's SHA-256 and row count equal to the recorded ones, and (when
the caller passes a ``check``: a sweep passes :func:`rankcollapse.experiments.table.check_table`) the table's
columns and configurations those the parameters ask for. Anything else raises one :class:`DamagedResultError`
naming the file and the command that recomputes it -- never a silent partial figure.

Writes are atomic (temporary file in the same folder, then a rename; the CSV first, the JSON last); a write
that fails (a full disk) raises one :class:`rankcollapse.experiments.provenance.WriteError` naming the file
and leaves neither half of the result, and a sweep refuses a store it cannot write before it computes anything
(:meth:`ResultStore.check_writable`). A sweep stores each entry as soon as it is computed, so an interrupted
sweep resumes at the first entry that is missing. An experiment's result is reused only while its model's
files are those it recorded (:func:`rankcollapse.experiments.models.identity_mismatch`, checked by
:func:`rankcollapse.experiments.sweep.run_experiment`).

Beside the page folders, ``<root>/partial/`` holds the finished units of unfinished runs
(:mod:`rankcollapse.experiments.checkpoints`); it is no page.

A store of an earlier version (``<key>.csv`` tables, records without hashes) is refused naming
``results/upgrade_store.py`` (:mod:`rankcollapse.experiments.store_upgrade`), which upgrades it in place.

Used by: the experiments' ``sweep`` (every experiment page's results), ``checkpoints``, ``bundle``,
``store_upgrade``, ``store_summary``; the book's registry, report, origins, CLI listing and pages.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import gzip
import hashlib
import io
import json
import os
import shlex
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from rankcollapse.experiments import sample_values
from rankcollapse.experiments.provenance import (WriteError, atomic_write, book_root, provenance_record,
                                                 unwritable)
from rankcollapse.experiments.sample_values import SampleValues

KEY_LENGTH = 16  # hex digits of the sha256 used as a file name
TABLE_SUFFIX = ".csv.gz"  # a result's table: results/<page>/<key>.csv.gz
PLAIN_SUFFIX = ".csv"  # a table stored before tables were compressed (results/upgrade_store.py compresses it)
UPGRADE = "python results/upgrade_store.py"  # the command that upgrades a store written by an earlier version
PARTIAL = "partial"  # <root>/partial/: unfinished runs' units (rankcollapse.experiments.checkpoints), no page


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
    raise TypeError(f"parameter values must be JSON-like (numbers, strings, lists, dicts), "
                    f"got {type(value).__name__}")


def result_key(page: str, parameters: dict) -> str:
    """The file stem of a result: a hash of the canonical ``{page, parameters}``.

    >>> result_key("fig2", {"n_samples": 32}) == result_key("fig2", {"n_samples": 32})
    True
    """
    text = json.dumps({"page": page, "parameters": canonical_parameters(parameters)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


# (table, stored parameters) -> None, or ValueError saying why
TableCheck = Callable[[pd.DataFrame, dict], None]


class DamagedResultError(ValueError):
    """A stored result that cannot be trusted (missing half, unreadable record, changed or wrong table).

    The message names the file and the command that recomputes it.
    """


def run_command(page: str, pairs: Iterable[tuple[str, str]] = (), options: Iterable[str] = ()) -> str:
    """The ``rankcollapse run`` line of ``page``: ``-p NAME VALUE`` for each pair (the value's text,
    shell-quoted), then ``options``. The one builder of the command: the store's recompute hint and every
    page's re-run block (:mod:`rankcollapse.book.report`) use it.

    >>> run_command("fig2", [("n_samples", "64"), ("temperatures", "[0.5, 2.0]")])
    "rankcollapse run fig2 -p n_samples 64 -p temperatures '[0.5, 2.0]'"
    >>> run_command("fig2", options=("--profile paper", "--device cuda"))
    'rankcollapse run fig2 --profile paper --device cuda'
    """
    return " ".join(["rankcollapse run", page, *(f"-p {name} {shlex.quote(text)}" for name, text in pairs),
                     *options])


def value_text(value: object) -> str:
    """A value as ``-p`` takes it back (the command line's ``parse_value``): a string as itself when it does
    not read as a literal, everything else as its ``repr``.

    >>> value_text("pkg:mpnet"), value_text("12"), value_text([1, 2]), value_text(None)
    ('pkg:mpnet', "'12'", '[1, 2]', 'None')
    """
    if isinstance(value, str):
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return value
    return repr(value)


def recompute_command(page: str, record: dict | None) -> str:
    """The ``rankcollapse run`` line that recomputes a stored result: the page and the parameters it was
    computed with, as its record says (``computed_by``: ``{"page": ..., "parameters": {...}}``, the page's
    parameters as the reader gave them, written by the book when it computed the result); a record without
    them (unreadable, or from a run outside a page) gets the page and its stored sweep parameters in words.

    >>> recompute_command("fig2", {"computed_by": {"page": "fig2", "parameters": {"model": "pkg:mpnet",
    ...                                                                         "n_samples": 32}}})
    'rankcollapse run fig2 -p model pkg:mpnet -p n_samples 32'
    >>> recompute_command("fig2", None)
    'rankcollapse run fig2 with the parameters it was computed for'
    """
    computed_by = (record or {}).get("computed_by")
    if isinstance(computed_by, dict) and isinstance(computed_by.get("parameters"), dict):
        pairs = [(name, value_text(value)) for name, value in computed_by["parameters"].items()]
        return run_command(str(computed_by.get("page", page)), pairs)
    stored = (record or {}).get("parameters")
    return f"{run_command(page)} with the parameters it was computed for" + (
        f" (its sweep's: {json.dumps(stored, sort_keys=True)})" if isinstance(stored, dict) else "")


# significant digits of a stored table's floats: float32 holds about 7, and every claim reads its statistics
# at 3; 9 digits make the tables a third smaller than 17 (bit-exact float64), which keeps the tree that
# travels to a GPU machine under its budget (tests/unit/test_bundle.py)
TABLE_DIGITS = 9


def table_text(table: pd.DataFrame) -> bytes:
    """The CSV bytes of a table as stored (floats at :data:`TABLE_DIGITS` significant digits; reading them
    back and writing again gives the same bytes). A column of numbers held as objects (a label column built
    with ``None`` in it) is written as the numbers it holds, as it is read back: "4", not ``str``'s "4.0"."""
    return table.infer_objects().to_csv(index=False, float_format=f"%.{TABLE_DIGITS}g").encode()


def pack_table(data: bytes) -> bytes:
    """CSV bytes as stored: gzip at level 9 with no file name or time in its header, so equal tables give
    equal files (and the same bytes on every machine)."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def _unpacked(data: bytes) -> bytes | None:
    """The CSV bytes of a stored table file, or None when it is not a complete gzip stream."""
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error):  # gzip.BadGzipFile is an OSError; a truncated stream an EOFError
        return None


def read_table(data: bytes) -> pd.DataFrame | None:
    """The table of CSV bytes, or None when they do not parse (any bytes: a damaged file is
    refused, not raised)."""
    try:
        return pd.read_csv(io.BytesIO(data), keep_default_na=False, na_values=[""])
    # pandas' ParserError and EmptyDataError are ValueErrors
    except (ValueError, UnicodeDecodeError, csv.Error):
        return None


@dataclass(frozen=True, eq=False)
class StoredResult:
    """A tidy table and the provenance it was stored with."""

    table: pd.DataFrame  # tidy: one row per layer x configuration x metric (sample statistics in columns)
    # parameters, versions, commit, model and sample hashes, dtype, device, hardware, wall time
    provenance: dict
    table_path: Path  # where the table lives: <root>/<page>/<key>.csv.gz
    loaded: bool  # True when read from the store, False when computed by this call
    # per-sample values (<key>.samples.npz); None for results stored before
    samples: SampleValues | None = None

    @property
    def key(self) -> str:  # the result's key: its files' stem
        return self.provenance["key"]


class ResultStore:
    """Results under ``root`` (default ``$RANKCOLLAPSE_RESULTS_DIR`` or ``<book root>/results``)."""

    def __init__(self, root: Path | str | None = None) -> None:
        if root is None:
            override = os.environ.get("RANKCOLLAPSE_RESULTS_DIR")
            root = Path(override) if override else book_root() / "results"
        self.root = Path(root)

    def paths(self, page: str, parameters: dict) -> tuple[Path, Path]:
        """``(table, json)`` paths of a result."""
        if not page or "/" in page or page.startswith(".") or page == PARTIAL:
            raise ValueError(f"page must be a plain page name such as 'fig2' (not {PARTIAL!r}, the folder of "
                             f"unfinished runs), got {page!r}")
        return self.files(page, result_key(page, parameters))

    def files(self, page: str, key: str) -> tuple[Path, Path]:  # (table, json) paths of <page>/<key>
        return self.root / page / f"{key}{TABLE_SUFFIX}", self.root / page / f"{key}.json"

    def load(self, page: str, parameters: dict, check: TableCheck | None = None) -> StoredResult | None:
        """The stored result whose parameters equal ``parameters`` exactly; None when neither file exists.

        Raises :class:`DamagedResultError` when the result is damaged (see :meth:`verify`).
        """
        table_path, json_path = self.paths(page, parameters)
        if not (table_path.exists() or json_path.exists()):
            return None
        return self.verify(page, result_key(page, parameters), canonical_parameters(parameters), check)

    def verify(self, page: str, key: str, parameters: dict | None = None,
               check: TableCheck | None = None) -> StoredResult:
        """Read ``<page>/<key>`` and check it, or raise one :class:`DamagedResultError`.

        Checked: both files exist; the JSON parses and is the record of this page and key (and of
        ``parameters`` when given); the table decompresses; the CSV's SHA-256 and row count equal the recorded
        ones; the CSV parses; ``check(table, stored parameters)`` passes.
        """
        table_path, json_path = self.files(page, key)

        def damaged(reason: str, known: dict | None = None) -> DamagedResultError:
            return DamagedResultError(
                f"stored result {table_path} is damaged: {reason}.\n"
                f"Recompute it: delete {self.root / page / key}.* and run: {recompute_command(page, known)}")

        if not json_path.is_file():
            raise damaged(f"its record {json_path.name} is missing")
        try:
            record = json.loads(json_path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise damaged(f"its record {json_path.name} is not readable JSON "
                          f"({type(err).__name__})") from None
        if not isinstance(record, dict) or not isinstance(record.get("parameters"), dict):
            raise damaged(f"its record {json_path.name} has no parameters")
        stored = record["parameters"]
        if record.get("page") != page or record.get("key") != key or result_key(page, stored) != key:
            raise damaged(f"its record {json_path.name} is not the record of {page}/{key} (edited or moved)")
        if parameters is not None and stored != parameters:
            raise damaged(f"its record {json_path.name} holds other parameters than asked for")
        if not table_path.is_file():
            plain = (f" (its uncompressed {key}{PLAIN_SUFFIX} is there, stored by an earlier version: "
                     f"{UPGRADE})")
            raise damaged(f"its table {table_path.name} is missing"
                          + (plain if table_path.with_name(key + PLAIN_SUFFIX).is_file() else ""), record)
        if "table_sha256" not in record or "table_rows" not in record:
            raise damaged(f"its record {json_path.name} has no table_sha256 / table_rows "
                          f"(stored by an earlier version: {UPGRADE})", record)
        data = _unpacked(table_path.read_bytes())
        if data is None:
            raise damaged(f"the table is not the one recorded (it does not decompress): truncated or "
                          f"replaced", record)
        table = read_table(data)
        if hashlib.sha256(data).hexdigest() != record["table_sha256"] or table is None \
                or len(table) != record["table_rows"]:
            rows = "it does not parse" if table is None else f"{len(table)} rows"
            raise damaged(f"the table is not the one recorded (SHA-256 differs; {rows}, "
                          f"recorded {record['table_rows']} rows): edited, truncated or replaced", record)
        if check is not None:
            try:
                check(table, stored)
            except ValueError as err:
                raise damaged(f"the table does not match its parameters: {err}", record) from None
        samples = None
        if "samples_sha256" in record:  # results stored before per-sample values were kept have none
            samples_path = self.root / page / f"{key}{sample_values.SAMPLES_SUFFIX}"
            if not samples_path.is_file():
                raise damaged(f"its per-sample values {samples_path.name} are missing", record)
            data = samples_path.read_bytes()
            if hashlib.sha256(data).hexdigest() != record["samples_sha256"]:
                raise damaged(f"its per-sample values {samples_path.name} are not the ones recorded (SHA-256 "
                              f"differs): edited, truncated or replaced", record)
            try:
                samples = sample_values.from_bytes(data)
            except ValueError as err:
                raise damaged(f"its per-sample values {samples_path.name} do not parse: {err}",
                              record) from None
        return StoredResult(table, record, table_path, True, samples)

    def save(self, page: str, parameters: dict, table: pd.DataFrame, provenance: dict,
             samples: SampleValues | None = None) -> StoredResult:
        """Store a table atomically (the compressed CSV, then the per-sample values when given, then the JSON
        with the SHA-256 and row count of the CSV and the SHA-256 of the per-sample values); the result holds
        the table as stored (:func:`table_text`), as a later load reads it."""
        table_path, json_path = self.paths(page, parameters)
        key = result_key(page, parameters)
        samples_path = table_path.with_name(key + sample_values.SAMPLES_SUFFIX)
        data = table_text(table)
        packed = None if samples is None else sample_values.to_bytes(samples)
        record = {**provenance, "page": page, "parameters": canonical_parameters(parameters), "key": key,
                  "table_sha256": hashlib.sha256(data).hexdigest(), "table_rows": len(table)}
        if packed is not None:
            record["samples_sha256"] = hashlib.sha256(packed).hexdigest()
        text = json.dumps(record, indent=1, sort_keys=True, default=str) + "\n"
        atomic_write(table_path, lambda tmp: Path(tmp).write_bytes(pack_table(data)))
        try:
            if packed is not None:
                atomic_write(samples_path, lambda tmp: Path(tmp).write_bytes(packed))
            atomic_write(json_path, lambda tmp: Path(tmp).write_text(text))
        # e.g. the disk filled up: no new table beside an old record (or none), no half result
        except WriteError:
            for path in (table_path, samples_path, json_path):
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        # the table and per-sample values as stored (floats at TABLE_DIGITS, logs quantized), so a result
        # computed now reads as it will load
        stored = None if packed is None else sample_values.from_bytes(packed)
        return StoredResult(read_table(data), record, table_path, False, stored)

    def check_writable(self, page: str, *folders: Path) -> None:
        """One ValueError, a sentence naming the folder and ``RANKCOLLAPSE_RESULTS_DIR``, unless new files can
        be made in ``<root>/<page>`` and each of ``folders``
        (:func:`rankcollapse.experiments.provenance.unwritable`). Creates nothing."""
        for folder in (self.root / page, *folders):
            problem = unwritable(folder)
            if problem:
                raise ValueError(f"the results store cannot be written: {problem}, so nothing was computed; "
                                 f"make it writable, or set RANKCOLLAPSE_RESULTS_DIR to a writable folder")

    def load_or_compute(self, page: str, parameters: dict, compute: Callable[[], tuple[pd.DataFrame, dict]],
                        check: TableCheck | None = None) -> StoredResult:
        """The stored result for exactly these parameters (verified, see :meth:`verify`), or ``compute()``
        stored with its provenance.

        ``compute`` returns ``(table, extra provenance)``; the provenance record
        (:func:`rankcollapse.experiments.provenance.provenance_record`) and the wall time are added here.
        """
        stored = self.load(page, parameters, check)
        if stored is not None:
            return stored
        start = time.perf_counter()
        table, extra = compute()
        provenance = {**provenance_record(canonical_parameters(parameters)), **extra,
                      "wall_time_s": round(time.perf_counter() - start, 3)}
        return self.save(page, parameters, table, provenance)

    def sweep(self, page: str, entries: Iterable[dict],
              compute: Callable[[dict], tuple[pd.DataFrame, dict]]) -> list[StoredResult]:
        """Every entry's result; entries already stored are loaded, so an interrupted sweep resumes."""
        return [self.load_or_compute(page, entry, lambda entry=entry: compute(entry)) for entry in entries]

    def pages(self) -> list[str]:
        """The page folders of the store, sorted (not :data:`PARTIAL`, not hidden folders)."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and p.name != PARTIAL
                      and not p.name.startswith(".")) if self.root.is_dir() else []

    def keys(self, page: str) -> list[str]:
        """Keys of every result of ``page`` with at least one of its two files, or an uncompressed table of an
        earlier version (temporary files aside)."""
        folder = self.root / page
        names = [p.name for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []
        return sorted({name.removesuffix(suffix) for name in names
                       for suffix in (TABLE_SUFFIX, PLAIN_SUFFIX, ".json") if name.endswith(suffix)})

    def entries(self, page: str) -> list[dict]:
        """Provenance records of every stored result of ``page`` (for the drift test and the book).

        Every result is verified first: a damaged one raises :class:`DamagedResultError` rather than
        being listed or skipped silently.
        """
        return [self.verify(page, key).provenance for key in self.keys(page)]


def compute_seconds(provenance: dict) -> float | None:
    """What a stored result cost: ``compute_time_s`` (its units' seconds summed over every session of a
    resumed run) where recorded, else ``wall_time_s`` (results stored before resumes were counted).

    >>> compute_seconds({"wall_time_s": 10.0, "compute_time_s": 250.0})
    250.0
    """
    return provenance.get("compute_time_s", provenance.get("wall_time_s"))
