"""PLACEHOLDER (branch ``theory`` only): the lead's ``rankcollapse.report`` replaces this file on merge.

Only :func:`rerun_block`, with the lead's signature, so the theory pages can be executed and tested.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass

from rankcollapse.plotting import book_root
from rankcollapse.runner import page_parameters

_PATHS = {"setup": "book/setup.md", "data": "book/data.md", "theorem1": "book/theory/theorem1.md",
          "theorem2": "book/theory/theorem2.md", "counterexample": "book/theory/counterexample.md",
          "equilibria": "book/theory/equilibria.md"}


def _lists(value: object) -> object:
    """A config's tuples as the parameters cell's lists (nested too)."""
    return [_lists(v) for v in value] if isinstance(value, (tuple, list)) else value


def rerun_block(name: str, parameters: Mapping[str, object] | object, seconds: float | None = None,
                hardware: str | None = None) -> str:
    """Markdown: the command that re-runs this page with its non-default parameters, and its time."""
    values = asdict(parameters) if is_dataclass(parameters) else dict(parameters)
    defaults = page_parameters(book_root() / _PATHS[name])
    changed = {k: v for k, v in values.items() if k in defaults and defaults[k] != _lists(v)}
    command = " ".join(["rankcollapse run", name, *(f"-p {k} {shlex.quote(repr(v))}" for k, v in changed.items())])
    lines = ["**Re-run this page**", "", "```bash", command, "```", ""]
    if seconds is not None:
        lines.append(f"Its computation took {seconds:.0f} s on {hardware or 'the build machine'}.")
    return "\n".join(lines)
