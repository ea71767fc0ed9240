"""Where a figure or a result came from: the book root, the git commit, the hardware, one provenance record,
the atomic writer both use, and the file hashes that identify a model folder.

Every exported figure (:func:`rankcollapse.book.plotting.common.export_figure`) and every stored result
(:meth:`rankcollapse.experiments.store.ResultStore.load_or_compute`) carries the same
:func:`provenance_record`: the parameters, the rankcollapse, PyTorch and Python versions, the git commit, the
creation time and the hardware, and a stored result its package's source (:func:`source_sha256`). A long
run's checkpoints are keyed by the code that computes the numbers only (:func:`compute_sha256`). This module
imports neither matplotlib nor pandas, so the results store and the command line need no plotting stack.

Used by: the experiments' ``store``, ``store_upgrade``, ``sweep``, ``checkpoints``, ``models`` and ``bundle``;
the book's ``plotting.common``, ``report``, ``runner``, ``origins`` and ``sphinx_figures``;
``tests/unit/test_provenance.py``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import os
import platform
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from rankcollapse import __version__


class NoBookError(FileNotFoundError):
    """No book root (``_toc.yml``) at or above a folder: where the book's own results store and pages
    would be. Its message is one sentence naming the folder and ``RANKCOLLAPSE_RESULTS_DIR``."""


def book_root(start: Path | None = None) -> Path:
    """The folder holding ``_toc.yml`` at or above ``start`` (default: the working directory); else one
    :class:`NoBookError`."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file():
            return folder
    raise NoBookError(f"no book (_toc.yml) at or above {here}: run from inside the book, or set "
                      f"RANKCOLLAPSE_RESULTS_DIR to a results store")


def package_sha256(package: Path, only: Iterable[str] | None = None) -> str:
    """sha256 of every ``.py`` file under ``package`` (under its subfolders ``only``, when given), by path
    relative to ``package`` (nothing else counts)."""
    digest = hashlib.sha256()
    folders = [package] if only is None else [package / name for name in only]
    for path in sorted(p for folder in folders for p in folder.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def source_sha256() -> str:
    """:func:`package_sha256` of :mod:`rankcollapse`, the whole package: what a stored result records of the
    code that made it. Hashed once per process, when :mod:`rankcollapse.experiments.sweep` is imported, so it
    names the code the process loaded even when the files are edited during a long run."""
    return package_sha256(Path(__file__).resolve().parents[1])


COMPUTE_PACKAGES = ("core", "engine", "hf", "experiments")  # the subpackages that compute a sweep's numbers


@functools.cache
def compute_sha256() -> str:
    """:func:`package_sha256` of the subpackages of :mod:`rankcollapse` that compute a sweep's numbers
    (:data:`COMPUTE_PACKAGES`): what the checkpoints of a long run share with the code that resumes it. Edits
    to the book's pages, the verdicts or the theory keep it, so they never orphan a run's finished units.
    Hashed once per process, as :func:`source_sha256` is."""
    return package_sha256(Path(__file__).resolve().parents[1], COMPUTE_PACKAGES)


def git_commit(root: Path) -> str:
    """``HEAD``'s hash, with ``-dirty`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty.strip() else "")


def hardware() -> str:
    """What the computation ran on, in words (CPU model and core count, GPU name when used)."""
    cpu = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} GPU; CPU {cpu}"
    return f"CPU {cpu}"


def provenance_record(parameters: dict) -> dict:
    """What a figure or a result carries about its origin: ``parameters``, versions, commit, time, hardware.

    The commit is that of the book the working directory is in (``unknown`` outside a book or git).
    """
    try:
        commit = git_commit(book_root())
    except FileNotFoundError:
        commit = "unknown"
    return {
        "parameters": parameters,
        "rankcollapse_version": __version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "git_commit": commit,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hardware(),
    }


class WriteError(OSError, ValueError):
    """A file that could not be written (a full disk, a read-only folder): one sentence naming it, its
    ``filename`` and ``strerror`` set (the command line names the option or variable that chose the folder).
    Also a ValueError; :func:`atomic_write` leaves nothing half-written."""

    def __str__(self) -> str:  # the sentence, not OSError's "[Errno n] reason: file"
        return str(self.args[0])


def _why(err: BaseException) -> str:
    """An error in a few words: the OS's reason (``No space left on device``), else its first line."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def unwritable(folder: Path) -> str | None:
    """Why new files cannot be made in ``folder`` (one not there yet: in the nearest folder above that is),
    in a few words starting with that folder (``/x is read-only (mode 555)``, ``/x is not a folder``), or
    None when they can. Creates nothing (a trial file is removed at once); a folder without write permission
    counts as read-only even for root, who could write it."""
    there = Path(folder).absolute()
    while not there.exists() and there != there.parent:
        there = there.parent
    if not there.is_dir():
        return f"{there} is not a folder"
    if not there.stat().st_mode & 0o222:
        return f"{there} is read-only (mode {there.stat().st_mode & 0o777:o})"
    try:
        fd, trial = tempfile.mkstemp(dir=there, prefix=".write-check-")
        os.close(fd)
        os.unlink(trial)
    except OSError as err:
        return f"{there} is not writable ({err.strerror or err})"
    return None


def _write_error(path: Path, err: BaseException, left: str) -> WriteError:
    """The :class:`WriteError` of ``path`` failing with ``err``; ``left``: what was left behind, in words."""
    failure = WriteError(f"could not write {path} ({_why(err)}); {left}")
    failure.filename, failure.strerror, failure.errno = str(path), _why(err), getattr(err, "errno", None)
    return failure


def atomic_write(path: Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp)`` on a temporary file in the same folder, then rename it to ``path`` (never a
    half-written file; readable by all, as the figures and results are shared).

    A write that fails with an OSError (a full disk, a read-only folder) raises one :class:`WriteError`
    naming ``path``; any failure removes the temporary file and leaves ``path`` as it was.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    except OSError as err:
        raise _write_error(path, err, "nothing was written") from err
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files
        os.replace(tmp, path)
    except OSError as err:
        raise _write_error(path, err, "nothing was left half-written") from err
    finally:
        with contextlib.suppress(OSError):
            if os.path.exists(tmp):
                os.unlink(tmp)


# an archive larger than this is written in parts (a device job returns <= 16 MiB a file)
ARCHIVE_PART_BYTES = 15 * 2**20


def write_archive(files: dict[str, Path], path: Path, part_bytes: int = ARCHIVE_PART_BYTES) -> list[Path]:
    """A .tar.gz of ``files`` (name in the archive -> file) at ``path``, or, when it is larger than
    ``part_bytes``, in parts ``<path>.part-00``, ``-01``, ... (``cat <path>.part-* | tar xz`` unpacks them);
    each file written atomically, the other form's files removed. Returns the files written."""
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        whole = Path(scratch) / path.name
        with tarfile.open(whole, "w:gz") as tar:
            for name, source in files.items():
                tar.add(source, arcname=name)
        data = whole.read_bytes()
    parts = ([data] if len(data) <= part_bytes
             else [data[i:i + part_bytes] for i in range(0, len(data), part_bytes)])
    targets = ([path] if len(parts) == 1
               else [path.with_name(f"{path.name}.part-{k:02d}") for k in range(len(parts))])
    for stale in [path, *path.parent.glob(f"{path.name}.part-*")]:
        if stale not in targets:
            stale.unlink(missing_ok=True)
    for target, part in zip(targets, parts):
        atomic_write(target, lambda tmp, part=part: Path(tmp).write_bytes(part))
    return targets


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, hashed once per process for each (path, inode, size, mtime, ctime)."""
    stat = path.stat()
    return _file_sha256(str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


@functools.lru_cache(maxsize=512)
def _file_sha256(path: str, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(2**22), b""):
            digest.update(block)
    return digest.hexdigest()


# what a Hugging Face tokenizer is read from
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model", "merges.txt", "tokenizer_config.json",
                   "special_tokens_map.json", "added_tokens.json")
MODEL_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack")  # weights


def folder_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """The files of a model folder that make the model: (its config and weights, its tokenizer files)."""
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    weights = [p for p in files if p.name == "config.json" or p.suffix in MODEL_SUFFIXES
               or p.name.endswith(".index.json")]
    return weights, [p for p in files if p.name in TOKENIZER_FILES]


def files_sha256(paths: Iterable[Path]) -> str:
    """sha256 over files, by name (each file's :func:`file_sha256`): what a model folder's weights or
    tokenizer files are, compared before a stored result of that folder is reused."""
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.name):
        digest.update(f"{path.name}\0{file_sha256(path)}\0".encode())
    return digest.hexdigest()
