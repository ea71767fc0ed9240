"""The ``rankcollapse`` command under faults: an ``OSError`` (a full disk, a read-only folder, a file where a
folder should be, no book) as one line naming the path and the option or environment variable that put
it there (:func:`os_error_line`); ``--output`` checked before anything runs (:func:`check_output`);
``--timeout`` as a bound on the whole run, in seconds, fractions allowed (:func:`timeout_seconds`,
:func:`time_limit`).

Used by: :mod:`rankcollapse.book.cli`, tests/unit/test_cli_faults.py.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from rankcollapse.book import cli_processes
from rankcollapse.experiments.provenance import NoBookError, book_root, unwritable

_CACHE_WORDS = "the cache of packaged models"


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both absolute, links resolved where they exist)."""
    path, folder = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return path == folder or folder in path.parents


def _results_root() -> Path | None:
    """The results store the command uses: ``$RANKCOLLAPSE_RESULTS_DIR``, else the book's ``results/``."""
    override = os.environ.get("RANKCOLLAPSE_RESULTS_DIR")
    if override:
        return Path(override)
    with contextlib.suppress(NoBookError):
        return book_root() / "results"
    from rankcollapse.book.runner import repo_root

    with contextlib.suppress(NoBookError):
        return repo_root() / "results"
    return None


def _sources(output: Path | None) -> list[tuple[Path, str, str]]:
    """``(folder, what sets it, the other folder to choose)`` of every folder the command writes to."""
    from rankcollapse.hf.load import cache_root

    cache_set = "RANKCOLLAPSE_CACHE" in os.environ
    found = [(cache_root(), f"RANKCOLLAPSE_CACHE{'' if cache_set else ' (unset: its default)'}, "
                            f"{_CACHE_WORDS}",
              "set RANKCOLLAPSE_CACHE to another folder")]
    results = _results_root()
    if results is not None:
        words = "RANKCOLLAPSE_RESULTS_DIR" if os.environ.get("RANKCOLLAPSE_RESULTS_DIR") else \
            "RANKCOLLAPSE_RESULTS_DIR (unset: the book's results/)"
        found.append((results, f"{words}, the results store",
                      "set RANKCOLLAPSE_RESULTS_DIR to another folder"))
    figures = os.environ.get("RANKCOLLAPSE_FIGURE_DIR")
    if figures:
        found.append((Path(figures), "RANKCOLLAPSE_FIGURE_DIR, where figures are exported",
                      "set RANKCOLLAPSE_FIGURE_DIR to another folder"))
    if output is not None:
        found.append((output, "--output", "give --output another folder"))
    else:
        found.append((Path("runs"), "the default of --output (runs/ in the working directory)",
                      "give --output another folder"))
    with contextlib.suppress(NoBookError):
        from rankcollapse.book.runner import repo_root

        found.append((repo_root() / "book" / "runs", "--add-to-book (the book's book/runs/)",
                      "leave out --add-to-book"))
    return found


def _first_os_error(err: BaseException) -> OSError | None:
    """``err`` when it is an OSError, else the first OSError it was raised from or while handling."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, OSError):
            return err
        seen.add(id(err))
        err = err.__cause__ or (None if err.__suppress_context__ else err.__context__)  # not past from None
    return None


def os_error_line(err: BaseException, output: Path | None = None) -> str | None:
    """One line for an OSError (or an error raised from one): the path, the system's reason, and the option or
    environment variable that chose the folder it is in (the most specific one), with what to do; None when
    no OSError is in ``err``'s chain."""
    found = _first_os_error(err)
    if found is None:
        return None
    if isinstance(found, NoBookError):
        return str(found)
    path = found.filename if found.filename not in (None, "") else None
    why = found.strerror or " ".join(str(found).split()) or type(found).__name__
    if path is None:
        return f"{why} (no file named); check the free space and permissions of the folders it writes"
    path = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
    matches = [source for source in _sources(output) if _inside(Path(path), source[0])]
    if not matches:
        return (f"{path}: {why}; it is in none of the folders an option or variable sets (--output, "
                f"RANKCOLLAPSE_RESULTS_DIR, RANKCOLLAPSE_CACHE, RANKCOLLAPSE_FIGURE_DIR)")
    folder, name, fix = max(matches, key=lambda m: len(Path(os.path.realpath(m[0])).parts))
    first = "free space there" if found.errno in (errno.ENOSPC, errno.EDQUOT) else "make it writable"
    return f"{path}: {why}; it is in {folder}, set by {name}: {first}, or {fix}"


def check_output(text: str | None, overwrite: bool) -> Path | None:
    """``--output`` as a folder that may be written, before anything runs; one ValueError naming it for
    ``""``, a file, a folder inside the results store, a folder that cannot be written, or a folder that is
    not empty (unless ``overwrite``)."""
    if text is None:
        return None
    if not text.strip():
        raise ValueError(f"--output must name a folder, got {text!r}")
    output = Path(text).expanduser()
    if output.exists() and not output.is_dir():
        raise ValueError(f"--output must be a folder, and {output} is a file")
    store = _results_root()
    if store is not None and (_inside(output, store) or _inside(store, output)):
        raise ValueError(f"--output {output} must lie outside the results store ({store}); give another "
                         f"folder")
    problem = unwritable(output)
    if problem:
        raise ValueError(f"--output cannot be written: {problem}; give a writable folder")
    if output.is_dir() and any(output.iterdir()) and not overwrite:
        raise ValueError(f"--output {output} is a folder that is not empty; give a new or empty folder, or "
                         f"add "
                         f"--overwrite to write the notebook and figures into it")
    return output


def timeout_seconds(text: str | None) -> float | None:
    """``--timeout`` in seconds: a positive finite number (``0.5`` allowed); None when not given."""
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"--timeout must be a positive number of seconds (fractions allowed), got {text}")
    return seconds


class TimedOut(BaseException):
    """The run outlived ``--timeout`` (raised in the main thread, so ``finally`` blocks end its processes)."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Within it (in the main thread), :class:`TimedOut` is raised ``seconds`` after it began (None:
    never)."""
    if seconds is None:
        yield
        return
    with cli_processes.signal_raises(signal.SIGALRM, TimedOut) as armed:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            if armed:
                signal.setitimer(signal.ITIMER_REAL, 0)
