"""What ``rankcollapse`` lists: the pages (``rankcollapse pages``), one page's parameters with their defaults,
types and ranges (``rankcollapse pages PAGE``), the results store, its unfinished runs and what each page
shows at its defaults (``rankcollapse results``), and where a run's results went (the closing lines of
``rankcollapse run`` and ``rankcollapse compute``).

A parameter's range is the one its page checks: the page's configuration is asked with a value out of every
range (:func:`parameter_range`), and the words of its one-line refusal are shown, so the listing can never
disagree with the check.

Used by: :mod:`rankcollapse.book.cli`, tests/unit/test_cli_listing.py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rankcollapse.book.runner import repo_root

if TYPE_CHECKING:
    from rankcollapse.experiments.store import ResultStore

_PROBES = {int: -(10**12), float: -1e300, str: "\x00", list: [object()]}  # out of every range of their type


def _store():
    """The results store: ``$RANKCOLLAPSE_RESULTS_DIR`` from any folder, else the book's ``results/``."""
    import os

    from rankcollapse.experiments.store import ResultStore

    if os.environ.get("RANKCOLLAPSE_RESULTS_DIR"):
        return ResultStore()
    with contextlib.chdir(repo_root()):
        return ResultStore()


def short_commit(commit: str) -> str:
    """A commit's first 8 digits, with ``-dirty`` kept: a dirty tree's source is not the commit's.

    >>> short_commit("0123456789abcdef-dirty"), short_commit("0123456789abcdef")
    ('01234567-dirty', '01234567')
    """
    return commit[:8] + ("-dirty" if commit.endswith("-dirty") else "")


def _relative(path: Path) -> str:
    """``path`` from the working directory when it lies below it, else in full."""
    with contextlib.suppress(ValueError):
        return str(Path(path).resolve().relative_to(Path.cwd()))
    return str(path)


def parameter_range(page: str, defaults: Mapping[str, object], name: str) -> str:
    """What the page's configuration allows for ``name`` (at the other parameters' defaults), in the words of
    its refusal of a value out of every range, e.g. ``an integer in [1, 31]``; '' where nothing is refused."""
    from rankcollapse.book import registry

    default = defaults[name]
    probe = _PROBES.get(type(default)) if not isinstance(default, bool) else None
    if isinstance(default, list) and default and not isinstance(default[0], (bool, list)):
        probe = [_PROBES.get(type(default[0]), object())]  # a list of values out of every range
    if probe is None:
        return ""
    full = {**defaults, name: probe}
    if "show_largest_stored" in full:
        full["show_largest_stored"] = False
    try:
        registry.configure(page, full)
    except (ValueError, TypeError) as err:
        text = str(err).splitlines()[0]
        heads = {f"{name} must be ": "", f"every entry of {name} must be ": "a list, each entry "}
        head = next((h for h in heads if text.startswith(h)), None)
        if head is None:
            return ""
        words = heads[head] + text[len(head):]
        for tail in ("; got ", ", got "):
            if tail in words:
                words = words[:words.rindex(tail)]
        words = words.replace("tuple", "list")
        return words if not isinstance(default, list) or "list" in words else "a list, each entry " + words
    return ""


def describe_page(page: str) -> str:
    """``rankcollapse pages PAGE``: the page's title and file, each parameter with its default, type, range
    and comment (from the parameters cell), its profiles and the options it takes."""
    from rankcollapse.book import registry
    from rankcollapse.book import runner

    entry = registry.page(page)
    path = entry.path(repo_root())
    defaults = runner.page_parameters(path)
    comments = runner.parameter_comments(path)
    lines = [f"{page}: {entry.title} ({entry.source})",
             "parameters (set with -p NAME VALUE; ranges at the other parameters' defaults):"]
    for name, default in defaults.items():
        kind = runner.type_name(default)
        allowed = parameter_range(page, defaults, name)
        words = allowed if allowed.startswith(kind) or (kind == "a list" and allowed.startswith("a ")) else \
            f"{kind}{'; ' + allowed if allowed else ''}"
        lines.append(f"  {name} = {default!r}  ({words})")
        if comments.get(name):
            lines.append(f"      {comments[name]}")
    for profile, values in entry.profiles.items():
        lines.append(f"profile {profile}: " + ", ".join(f"{k} = {v!r}" for k, v in values.items()))
    if page in registry.EXPERIMENT_PAGES:
        lines.append("options: --profile, --device, --nproc K (samples over K processes), --output, "
                     "--timeout, --add-to-book")
    else:
        lines.append(
            "options: --output, --timeout, --add-to-book (it computes in one process"
            f"{', on the device of its device parameter' if 'device' in defaults else ', on the CPU'})")
    return "\n".join(lines)


def _cell(record: dict, key: str) -> str:
    p = record.get("parameters", {})
    if key == "scale":
        if "n_samples" in p:
            return f"{p['n_samples']} × {p['n_tokens']}"
        return f"{p['n_tokens']} tokens" if "n_tokens" in p else "–"  # "–": an unfinished run's, unrecorded
    if key == "layers":
        return str(p.get("n_layers", "–"))
    if key == "time":
        from rankcollapse.experiments.store import compute_seconds

        seconds = compute_seconds(record)
        return "–" if seconds is None else f"{seconds:.0f} s"
    if key == "commit":
        return short_commit(str(record.get("git_commit", "–")))
    if key == "per-sample":  # whether its per-sample values (the intervals' input) are stored
        if "key" not in record or "n_samples" not in record.get("parameters", {}):
            return "–"  # an unfinished run, or a result that is not a sweep over samples
        return "yes" if "samples_sha256" in record else "no"
    return str(record.get(key, p.get(key, "–")))


_COLUMNS = ("page", "key", "scale", "layers", "model", "dtype", "device", "commit", "time", "per-sample",
            "status")


def results_table(page: str | None = None) -> list[dict[str, str]]:
    """One row per stored result (of ``page``, or every page), each verified (:meth:`ResultStore.verify`):
    page, key, scale (samples × tokens), layers, model, dtype, device, commit, compute time, whether its
    per-sample values are stored (``yes``/``no``: what an effect's interval needs), and ``verified`` or
    ``damaged: <why>``; then one row per unfinished run (:func:`partial_table`'s), its scale and settings
    from its run record, its status ``partial <done>/<all> units`` and whether this code resumes it."""
    from rankcollapse.experiments.store import DamagedResultError

    store = _store()
    rows = []
    for name in [n for n in store.pages() if page in (None, n)]:
        for key in store.keys(name):
            try:
                record, status = store.verify(name, key).provenance, "verified"
            except DamagedResultError as err:
                status = "damaged: " + str(err).splitlines()[0].split(" is damaged: ", 1)[-1].rstrip(".")
                try:
                    record = json.loads((store.root / name / f"{key}.json").read_text())
                    record = (record if isinstance(record, dict)
                              and isinstance(record.get("parameters"), dict) else {})
                except (OSError, ValueError):
                    record = {}
            rows.append({"page": name, "key": key, **{c: _cell(record, c) for c in _COLUMNS[2:-1]},
                         "status": status})
    for run in _partial_runs(store, page):
        record = {"parameters": run["parameters"], "git_commit": run["commit"]}
        rows.append({"page": run["page"], "key": run["key"], **{c: _cell(record, c) for c in _COLUMNS[2:-1]},
                     "status": f"partial {run['done']}/{run['units'] or '?'} units, {_status(run)}"})
    return rows


def shown_table(page: str | None = None) -> list[dict[str, str]]:
    """One row per experiment page (``page``, or every one): what the page shows at its parameters cell's
    defaults, found as the book finds it (:func:`rankcollapse.book.registry.largest_stored`: the largest
    scale stored for every part) without computing anything: its scale (samples × tokens), model and dtype,
    its number of parts and those of them stored without per-sample values (an effect read from them has no
    interval); scale ``–`` where a part at the defaults is not stored (the page computes it when built),
    ``damaged`` where one is damaged (:func:`results_table` says why). No rows outside a book (a store listed
    with ``RANKCOLLAPSE_RESULTS_DIR`` from anywhere): the pages' defaults are in their parameters cells."""
    from rankcollapse.book import registry, runner
    from rankcollapse.book.shown import anchor
    from rankcollapse.experiments.provenance import NoBookError
    from rankcollapse.experiments.store import DamagedResultError

    try:
        root = repo_root()
    except NoBookError:
        return []
    store, rows = _store(), []
    for name in [n for n in registry.EXPERIMENT_PAGES if page in (None, n)]:
        defaults = runner.page_parameters(registry.page(name).path(root))
        row = {"page": name, "scale": "–", "model": "–", "dtype": "–", "parts": "", "without per-sample": "–"}
        try:
            found = stored_parts(name, defaults)  # every part, None where not stored
            row["parts"] = str(len(found))
        except DamagedResultError:
            found = {}
            row.update(scale="damaged", parts=str(len(registry.runs_at(name, defaults))))
        if found and all(r is not None for r in found.values()):
            shown = registry.largest_stored(found, store) if defaults.get("show_largest_stored") else found
            p = anchor(shown).provenance["parameters"]
            lacking = [part for part, r in shown.items() if r.samples is None]
            row.update(scale=f"{p['n_samples']} × {p['n_tokens']}", model=str(p["model"]),
                       dtype=str(p["dtype"]), **{"without per-sample": ", ".join(lacking) or "none"})
        rows.append(row)
    return rows


def _partial_runs(store: ResultStore, page: str | None) -> list[dict]:
    """The unfinished runs of ``store`` (:func:`rankcollapse.experiments.checkpoints.partial_runs`), of
    ``page`` or every page."""
    from rankcollapse.experiments.checkpoints import partial_runs

    return [r for r in partial_runs(store) if page in (None, r["page"])]


def pack_partial(page: str | None = None) -> list[str]:
    """Pack the finished units of every unfinished run of the store (of ``page``, or every page;
    :func:`rankcollapse.experiments.checkpoints.pack_units`); one line per run folder that had exact units."""
    from rankcollapse.experiments.checkpoints import pack_units

    lines = []
    for run in _partial_runs(_store(), page):
        if packed := pack_units(run["folder"]):
            before, after = sum(b for _, b, _ in packed), sum(a for *_, a in packed)
            lines.append(f"packed {len(packed)} units of {_relative(run['folder'])}: "
                         f"{before / 1e6:.2f} MB -> {after / 1e6:.2f} MB")
    return lines


def _status(run: dict) -> str:
    """An unfinished run in a few words: resumable by this code, or superseded, or not resumable here."""
    if run.get("stored"):
        return "superseded"
    return "resumable" if run["resumable"] else "not resumable by this code"


def partial_table(page: str | None = None) -> list[dict[str, str]]:
    """One row per unfinished run of the store (of ``page``, or every page;
    :func:`rankcollapse.experiments.checkpoints.partial_runs`): page, key, its finished units of all, the
    commit that started it, and whether this checkout resumes it (else the commit to resume it in), its
    folder."""
    return [{"page": r["page"], "key": r["key"], "units done": f"{r['done']} of {r['units'] or '?'}",
             "commit": short_commit(str(r["commit"])), "started": r["started"], "resume": _resume(r),
             "folder": _relative(r["folder"])}
            for r in _partial_runs(_store(), page)]


def _resume(run: dict) -> str:
    """Where an unfinished run resumes: here, in its commit, nowhere (its code was an uncommitted tree), or
    nowhere since its result is stored (superseded: delete the folder)."""
    from rankcollapse.experiments.checkpoints import from_uncommitted

    if run.get("stored"):
        return "superseded: its result is stored (delete the folder)"
    if run["resumable"]:
        return "here (same computing code)"
    commit = str(run["commit"])
    if from_uncommitted(commit):
        return "nowhere: started from uncommitted code (delete the folder)"
    return f"in commit {short_commit(commit)} without local changes (computing code changed)"


def format_table(rows: list[dict[str, str]]) -> str:
    """Rows as aligned columns under a header line (the columns of the first row)."""
    if not rows:
        return ""
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    return "\n".join("  ".join(str(r[c]).ljust(widths[c]) for c in columns).rstrip()
                     for r in [{c: c for c in columns}, *rows])


def _parts(page: str, parameters: Mapping[str, object]):
    """``(part, run, stored result or None)`` of every sweep the page computes for ``parameters`` (over its
    defaults); a damaged stored result raises its DamagedResultError (a ValueError)."""
    from rankcollapse.book import registry
    from rankcollapse.experiments.config import stored_parameters
    from rankcollapse.experiments.table import check_table

    store = _store()
    with contextlib.chdir(repo_root()):
        return [(part, run, store.load(run.page or page, stored_parameters(run.config),
                                       check_table))
                for part, run in registry.runs_at(page, parameters).items()]


def stored_parts(page: str, parameters: Mapping[str, object]) -> dict[str, object]:
    """The stored result of every sweep the page computes for ``parameters`` (over its defaults), or None
    for a part not stored yet; {} for a page that computes in its own module. A damaged one raises its
    DamagedResultError (a ValueError)."""
    from rankcollapse.book import registry

    if page not in registry.EXPERIMENT_PAGES:
        return {}
    return {part: found for part, _, found in _parts(page, parameters)}


def units_to_compute(page: str, parameters: Mapping[str, object]) -> int:
    """The most units of work (:func:`rankcollapse.experiments.sweep.units`) any one sweep of the page still
    has to compute for ``parameters``: 0 when every result is stored for the model files as they are now."""
    from rankcollapse.experiments import sweep
    from rankcollapse.experiments.models import identity_mismatch

    most = 0
    for _, run, found in _parts(page, parameters):
        if found is None or identity_mismatch(run.config.model, found.provenance):
            most = max(most, len(sweep.units(run.config, sweep.block_samples(run.config))))
    return most


def stored_lines(before: Mapping[str, object], after: Mapping[str, object]) -> list[str]:
    """Where each part's result is: ``stored: <file>`` when this run computed it (also over a stale result of
    the same key, e.g. of a model folder whose weights changed), ``already stored: <file>`` when it was there
    before, unchanged."""
    lines = []
    for part, result in after.items():
        if result is not None:
            earlier = before.get(part)
            same = earlier is not None and earlier.provenance == result.provenance
            lines.append(f"{'already stored' if same else 'stored'}: {_relative(result.table_path)}")
    return list(dict.fromkeys(lines))


def shown_line(page: str, own: Mapping[str, object], shown: Mapping[str, object]) -> str | None:
    """The plain sentence for a page showing the largest stored run instead of its parameters cell's, or
    None."""
    if not shown or all(shown[p] is own.get(p) or shown[p].table_path == own[p].table_path for p in shown):
        return None
    first = next(iter(shown.values()))
    p = first.provenance["parameters"]
    return (f"note: {page} shows the largest stored run of this experiment ({p['n_samples']} samples × "
            f"{p['n_tokens']} tokens, {p['model']}, {p['dtype']}: {_relative(first.table_path)}), not its "
            f"parameters cell's defaults; add -p show_largest_stored False to see exactly the defaults")
