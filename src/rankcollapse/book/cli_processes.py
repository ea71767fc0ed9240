"""The processes ``rankcollapse`` starts end with it: torchrun (``--nproc K``) runs in a session of its own, and
:func:`end_group` ends it and every worker below it (each in a session of its own too) when the command
ends, is interrupted (Ctrl-C) or is sent SIGTERM (:func:`sigterm_ends_cleanly` makes SIGTERM an exception, so
``finally`` blocks run).

Used by: :mod:`rankcollapse.book.cli`, tests/unit/test_cli_processes.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc; [] where there is none)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        group = os.getpgid(pid)
        if group != os.getpgrp():  # never this command's own group
            os.killpg(group, sig)


def end_group(process: subprocess.Popen, grace: float = 10.0) -> None:
    """End a process started in a session of its own and every process below it (torchrun starts each
    worker in a session of its own too). Where /proc lists them: the process is stopped (no new workers),
    then it and every process below it are killed at once (quietly: torchrun's own SIGTERM handling prints a
    traceback; the sweep's checkpoints are written atomically, so a killed unit is only recomputed). Elsewhere:
    SIGTERM (torchrun ends its workers), SIGKILL after ``grace`` seconds."""
    if process.poll() is not None:
        return
    if Path("/proc/self/stat").exists():
        _signal_group(process.pid, signal.SIGSTOP)
        pids = [process.pid, *descendants(process.pid)]
        for pid in pids:
            _signal_group(pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + grace
        while any(alive(pid) for pid in pids[1:]) and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()


class Terminated(BaseException):
    """SIGTERM, raised where the process is, so that its ``finally`` blocks end the processes it started."""


@contextlib.contextmanager
def sigterm_ends_cleanly():
    """Within it (in the main thread), SIGTERM raises :class:`Terminated`; the previous handler after it."""
    def terminate(signum, frame):
        raise Terminated
    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
