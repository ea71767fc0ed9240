"""The processes of a sweep: torchrun's ranks (rank 0 gathers, summarizes and stores) and whether a
sweep reports its plan and progress.

Used by: :mod:`rankcollapse.experiments.sweep`, :mod:`rankcollapse.book.cli` (``rankcollapse run --nproc K``).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import os
import sys
from collections.abc import Iterator

import torch
import torch.distributed as dist

PROGRESS_ENV = "RANKCOLLAPSE_PROGRESS"  # 1: print the plan and a progress bar; 0: never
_PROGRESS: contextvars.ContextVar[bool | None] = contextvars.ContextVar("rankcollapse_progress", default=None)
# how long a rank that finished its units waits at the gather for the slowest: the process group's default
# (30 min) ended Fig. 4's 3000-sample run on the CPU when one rank's units outlasted another's by that much;
# a rank that fails still ends the run at once (torchrun stops the others)
GATHER_TIMEOUT = datetime.timedelta(days=2)


def reporting() -> bool:
    """Whether to print the plan and a progress bar: never in a Jupyter kernel (the book build); else as
    the command line asked (:func:`progress`), else ``$RANKCOLLAPSE_PROGRESS`` (``1``/``0``), else when
    stderr is a terminal."""
    if type(sys.stderr).__module__.startswith("ipykernel"):
        return False
    asked = _PROGRESS.get()
    if asked is not None:
        return asked
    env = os.environ.get(PROGRESS_ENV)
    return env == "1" if env in ("0", "1") else sys.stderr.isatty()


@contextlib.contextmanager
def progress(on: bool = True) -> Iterator[None]:
    """Turn reporting (plan and progress) on or off for the sweeps run inside the block."""
    token = _PROGRESS.set(on)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def rank_and_world() -> tuple[int, int]:
    """``(rank, world size)``: ``(0, 1)`` without an initialized process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed(device: str) -> bool:
    """Join the process group torchrun describes (``WORLD_SIZE`` > 1 in the environment): NCCL and
    ``cuda:LOCAL_RANK`` for a CUDA device, gloo on CPU; its collectives wait up to :data:`GATHER_TIMEOUT`.
    Returns whether a group was started here."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return False
    cuda = device.split(":")[0] == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend="nccl" if cuda else "gloo", timeout=GATHER_TIMEOUT)
    return True


def broadcast(value: object) -> object:
    """Rank 0's ``value`` on every rank (itself without a process group)."""
    if rank_and_world()[1] == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(value: object) -> list[object] | None:
    """Every rank's ``value``, in rank order, on rank 0; None elsewhere."""
    rank, world = rank_and_world()
    if world == 1:
        return [value]
    out = [None] * world if rank == 0 else None
    dist.gather_object(value, out, dst=0)
    return out
