"""Killing ``rankcollapse run --nproc 2`` (SIGTERM to the command) ends torchrun and both of its workers too,
and the command says, in one line, that the same command resumes; killing ``rankcollapse compute --nproc 2``
outright (SIGKILL, which runs nothing) ends them too, and they store nothing."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rankcollapse.experiments import ranks, sweep

pytestmark = [pytest.mark.models, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SETUP_LIMIT = 60  # seconds for torchrun and its two workers to appear; longer: skipped


def _kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
def test_sigterm_to_the_command_ends_torchrun_and_its_workers(tmp_path):
    parent = _start(tmp_path, ["run", "fig2", "--output", str(tmp_path / "out")])
    below: list[int] = []
    try:
        below = _running_workers(parent)
        parent.send_signal(signal.SIGTERM)
        out, err = parent.communicate(timeout=60)
        assert parent.returncode == 143, err[-3000:]
        assert err.splitlines()[-1] == ("rankcollapse run: terminated (SIGTERM); run the same command again "
                                        "to resume from its checkpoints")
        assert "Traceback" not in err, err[-3000:]
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in below) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [(p, _cmdline(p)) for p in below if _alive(p)]
        assert not survivors, survivors
    finally:
        _kill_all([parent.pid, *below])


def _start(tmp_path: Path, words: list[str]) -> subprocess.Popen:
    """``rankcollapse <words>`` on a tiny sweep over two torchrun workers (one sample per unit), results in
    ``tmp_path``."""
    env = {**os.environ, "RANKCOLLAPSE_RESULTS_DIR": str(tmp_path / "results"), sweep.BLOCK_ENV: "1",
           ranks.PROGRESS_ENV: "0"}
    command = [sys.executable, "-m", "rankcollapse", *words[:2], "-p", "n_samples", "64", "-p", "n_tokens",
               "16", "-p", "n_layers", "2", "--nproc", "2", *words[2:]]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _running_workers(parent: subprocess.Popen) -> list[int]:
    """Every process below ``parent`` once its two workers run and have had a second to import torch."""
    below = _workers_of(parent)
    time.sleep(1.0)  # the workers importing torch
    return sorted(set(below) | set(_descendants(parent.pid)))


def _workers_of(parent: subprocess.Popen) -> list[int]:
    """torchrun and its two workers below ``parent`` once both workers run (skips when they do not appear)."""
    deadline = time.monotonic() + SETUP_LIMIT
    while parent.poll() is None and time.monotonic() < deadline:
        below = _descendants(parent.pid)
        workers = [p for p in below if "rankcollapse" in _cmdline(p)
                   and "torch.distributed.run" not in _cmdline(p)]
        if len(workers) >= 2:
            return below
        time.sleep(0.1)
    if parent.poll() not in (None, 0):
        pytest.fail(f"the command failed before its workers started: {parent.communicate()[1][-3000:]}")
    pytest.skip(f"torchrun and its workers did not start within {SETUP_LIMIT} s (or finished first)")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
def test_sigkill_of_the_command_ends_torchrun_and_its_workers(tmp_path):
    """Killing the command kills torchrun and its workers too (they used to live on and store results 45 s
    later)."""
    parent = _start(tmp_path, ["compute", "fig4"])
    below: list[int] = []
    try:
        below = _running_workers(parent)
        parent.kill()
        parent.communicate(timeout=60)
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in below) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [(p, _cmdline(p)) for p in below if _alive(p)]
        assert not survivors, survivors
        assert not list((tmp_path / "results").glob("fig4/*.json"))
    finally:
        _kill_all([parent.pid, *below])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from ``ps`` (a reference independent of the /proc walk under test)."""
    table = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for line in table.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    return _descendants_in(children, pid)


def _descendants_in(children: dict[int, list[int]], pid: int) -> list[int]:
    below = children.get(pid, [])
    return [*below, *(grandchild for child in below for grandchild in _descendants_in(children, child))]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
