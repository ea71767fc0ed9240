"""The processes ``rankcollapse`` starts end with it: torchrun (``--nproc K``) runs in a session of its own,
and :func:`end_group` ends it and every worker below it (each in a session of its own too) when the command
ends, is interrupted (Ctrl-C) or is sent SIGTERM (:func:`sigterm_ends_cleanly` makes SIGTERM an exception, so
``finally`` blocks run). When the command is killed outright (SIGKILL, which runs nothing), torchrun dies with
it (Linux's parent-death signal, :func:`start_owned`) and each worker watches torchrun and the command and
ends itself when either is gone (:func:`watch_owner`).

Used by: :mod:`rankcollapse.book.cli`, tests/unit/test_cli_processes.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

OWNER_ENV = "RANKCOLLAPSE_OWNER_PID"  # the command that started torchrun: its workers end when it is gone
_PR_SET_PDEATHSIG = 1  # prctl(2)


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
    """End a process started in a session of its own and every process below it (torchrun starts each worker
    in a session of its own too). Where /proc lists them: the process is stopped (no new workers), then it and
    every process below it are killed at once (quietly: torchrun's own SIGTERM handling prints a traceback;
    the sweep's checkpoints are written atomically, so a killed unit is only recomputed). Elsewhere: SIGTERM
    (torchrun ends its workers), SIGKILL after ``grace`` seconds."""
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


def _parent_death_kills():
    """A ``preexec_fn`` that has the child killed (SIGKILL) when the process that started it dies; None where
    there is no ``prctl`` (not Linux). Looked up here, not between fork and exec."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def start_owned(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """Start ``command`` in a session of its own (for :func:`end_group`), killed when this process dies
    (even by SIGKILL) and telling its workers this process's id (``$RANKCOLLAPSE_OWNER_PID``,
    :func:`watch_owner`)."""
    return subprocess.Popen(command, env={**os.environ, **env, OWNER_ENV: str(os.getpid())}, cwd=cwd,
                            start_new_session=True, preexec_fn=_parent_death_kills())


def watch_owner(interval: float = 0.5) -> bool:
    """In a torchrun worker (``$WORLD_SIZE`` > 1): a daemon thread that kills this process once its parent
    (torchrun) or the command that started torchrun (``$RANKCOLLAPSE_OWNER_PID``) is gone. Returns whether it
    watches."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or not Path("/proc/self/stat").exists():
        return False
    parent, owner = os.getppid(), int(os.environ.get(OWNER_ENV, "0") or 0)

    def watch() -> None:
        while os.getppid() == parent and (not owner or alive(owner)):
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGKILL)  # nothing to save: finished units are checkpointed atomically

    threading.Thread(target=watch, name="rankcollapse-owner", daemon=True).start()
    return True


class Terminated(BaseException):
    """SIGTERM, raised where the process is, so that its ``finally`` blocks end the processes it started."""


@contextlib.contextmanager
def signal_raises(signum: int, error: type[BaseException]) -> Iterator[bool]:
    """Within it (in the main thread), signal ``signum`` raises ``error`` where the process is; the previous
    handler after it. Yields whether the handler was set (not outside the main thread)."""
    def handler(signum, frame):
        raise error
    try:
        previous = signal.signal(signum, handler)
    except ValueError:  # not the main thread
        yield False
        return
    try:
        yield True
    finally:
        signal.signal(signum, previous)


def sigterm_ends_cleanly() -> contextlib.AbstractContextManager[bool]:
    """Within it (in the main thread), SIGTERM raises :class:`Terminated`; the previous handler after it."""
    return signal_raises(signal.SIGTERM, Terminated)
