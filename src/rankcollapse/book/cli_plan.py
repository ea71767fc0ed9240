"""What ``rankcollapse run``/``compute`` check before anything runs (:func:`plan_run`): the page name, the
parameter names (against the page's ``parameters`` cell, each once), their values (literals as typed: a number
beyond a float's range is refused as typed, not as ``inf``; a list is called a list, not a tuple), their types
(against the defaults) and ranges (by the page's configuration in the page registry), the device, ``--nproc``
(the experiment pages, at most this machine's CPU cores or GPUs), and that each option applies to the page.

Used by: :mod:`rankcollapse.book.cli`, :mod:`rankcollapse.book.cli_bundle`, tests/unit/test_cli.py.
"""

from __future__ import annotations

import ast
import contextlib
import math
import os
from pathlib import Path

from rankcollapse.book.runner import repo_root

_SHORT = 80  # longest value echoed in a message


def parse_value(text: str) -> object:
    """A command-line value: a Python literal when it parses as one (``12``, ``0.5``, ``[1, 2]``,
    ``None``), else the string itself.

    >>> parse_value("12"), parse_value("pkg:mpnet"), parse_value("1/64")
    (12, 'pkg:mpnet', '1/64')
    """
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):  # TypeError: ``{[1]: 2}``
        return text


def shorten(message: str, texts: list[str]) -> str:
    """``message`` with every long value of ``texts`` (as given, as parsed, as quoted) cut to _SHORT
    characters.

    >>> shorten("got " + "9" * 100, ["9" * 100]) == "got " + "9" * 80 + "… (100 characters)"
    True
    """
    for text in texts:
        value = parse_value(text)
        for form in sorted({text, repr(text), str(value), repr(value)}, key=len, reverse=True):
            if len(form) > _SHORT and form in message:
                message = message.replace(form, f"{form[:_SHORT]}… ({len(form)} characters)")
    return message


def _check_device(device: object) -> None:
    """``cpu``, ``cuda`` or ``cuda:k`` of a GPU this machine has; one ValueError naming the device
    otherwise."""
    from rankcollapse import engine

    try:
        dev = engine.resolve_device(device)
    except ValueError as err:
        if "CUDA is not available" in str(err):
            raise ValueError(f"device {device!r} was asked for but CUDA is not available here; "
                             "use --device cpu") from None
        raise
    import torch

    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise ValueError(f"device {device!r} was asked for but this machine has {count} CUDA device(s) "
                         f"(cuda:0 to cuda:{count - 1})")


def plan_run(page: str, pairs: list[tuple[str, str]] | None = None, profile: str = "default",
             device: str | None = None, nproc: int = 1) -> tuple[Path, dict[str, object]]:
    """Check everything and return (page file, the parameters to inject); raises one ValueError in one line
    on bad input (a long value cut short)."""
    pairs = list(pairs or [])
    try:
        return _plan(page, pairs, profile, device, nproc)
    except ValueError as err:
        texts = [page, profile, *(x for pair in pairs for x in pair),
                 *([device] if isinstance(device, str) else [])]
        message = _as_typed(str(err).splitlines()[0] if str(err) else repr(err), pairs)
        raise ValueError(shorten(message, texts)) from None


def _tuples(value: object) -> object:
    """``value`` with its lists made tuples, as a page's configuration holds them."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _as_typed(message: str, pairs: list[tuple[str, str]]) -> str:
    """A refusal in the words of the command line: a list the reader typed is a list (the configuration holds
    it as a tuple), so ``tuple`` reads ``list`` and a value printed as a tuple is printed as typed."""
    for _, text in pairs:
        value = parse_value(text)
        if isinstance(value, list):
            message = message.replace(f"got {_tuples(value)!r}", f"got {text.strip()}")
    return message.replace("tuple", "list")


def _check_finite_as_typed(name: str, text: str, value: object) -> None:
    """One ValueError for a number typed finite that does not fit a float (``1e400`` reads as ``inf``)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(v, float) and math.isinf(v) for v in values) and "inf" not in text.lower():
        raise ValueError(f"parameter {name!r}: {text} holds a number beyond a float's range (at most about "
                         f"1.8e308 in size)")


def check_nproc(nproc: object, device: str) -> None:
    """``--nproc``: an integer from 1 to this machine's CPU cores (on ``cpu``) or GPUs (on ``cuda``)."""
    import torch

    from rankcollapse.core import checks

    checks.check_int("nproc", nproc, 1, 4096)
    if device.split(":")[0] == "cuda":
        most, what = torch.cuda.device_count(), "GPUs"
    else:
        cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        most, what = len(cores), "CPU cores"
    if nproc > max(most, 1):
        raise ValueError(f"--nproc {nproc} is more processes than this machine's {most} {what}; give --nproc "
                         f"{max(most, 1)} or less")


def _plan(page: str, pairs: list[tuple[str, str]], profile: str, device: str | None,
          nproc: int) -> tuple[Path, dict[str, object]]:
    from rankcollapse.book import registry
    from rankcollapse.book import runner

    entry = registry.page(page)
    path = entry.path(repo_root())
    defaults = runner.page_parameters(path)
    parameters = registry.profile_parameters(page, profile)
    if profile != "default" and profile not in entry.profiles:
        raise ValueError(f"page {page!r} has no {profile!r} profile; the pages with one: "
                         f"{', '.join(registry.pages_with_profile(profile))}")
    seen: dict[str, str] = {}
    for name, text in pairs:
        if name in seen:
            raise ValueError(f"parameter {name!r} is given twice (-p {name} {seen[name]} and -p {name} "
                             f"{text}); give it once")
        seen[name] = text
        parameters[name] = parse_value(text)
        _check_finite_as_typed(name, text, parameters[name])
    if device is not None:
        if "device" not in defaults:
            raise ValueError(f"--device applies to the pages with a device parameter ("
                             f"{', '.join(n for n in registry.EXPERIMENT_PAGES)}); {page} runs on the CPU")
        parameters["device"] = device
    if nproc != 1 and page not in registry.EXPERIMENT_PAGES:
        raise ValueError(f"--nproc applies to the experiment pages ({', '.join(registry.EXPERIMENT_PAGES)}); "
                         f"{page} computes in one process")
    if parameters and "show_largest_stored" in defaults:
        # a re-run shows its own result, not a stored larger one
        parameters.setdefault("show_largest_stored", False)
    runner.check_parameter_types(defaults, parameters)
    model = parameters.get("model")
    if isinstance(model, str) and not model.startswith("pkg:"):
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            if Path(model).expanduser().is_dir():  # relative to the working directory, not to the book root
                parameters["model"] = str(Path(model).expanduser().resolve())
    registry.configure(page, {**defaults, **parameters})
    if "device" in parameters:
        _check_device(parameters["device"])
    if nproc != 1:
        check_nproc(nproc, str({**defaults, **parameters}.get("device", "cpu")))
    return path, parameters
