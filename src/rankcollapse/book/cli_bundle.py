"""``rankcollapse bundle PAGE[:PART] ... [-p NAME VALUE ...] [--profile paper] --output DIR [--samples N ...]
[--code] [--fit-mib M]``: a device bundle (:mod:`rankcollapse.experiments.bundle`) of pages' initialized
sweeps.

Each ``PAGE`` gives its sweeps with initialized weights only (``PAGE:PART`` one of them; a part with
pretrained weights is refused, since the model's layers do not travel), in the page's parameters as
``rankcollapse compute`` would run them; the device script sets ``n_samples`` (one of ``--samples``),
``dtype`` and ``device``. ``--code`` copies the package's sources into ``DIR/src`` (for a machine without this
branch). ``--fit-mib M`` drops the largest sample counts until the bundle and the working tree that travels
with it (the tracked and untracked, not ignored files of the git repository holding ``DIR``) fit ``M`` MiB;
with ``--extra DIR2`` it keeps them and moves the token ids and embedding rows only they need to ``DIR2``, to
travel in an earlier call to the same machine (scripts/device_run.sh).

On the device, ``python -m rankcollapse.book.cli_bundle FOLDER --store DIR ...`` runs the bundle
(:func:`device_main`, scripts/device_run.sh).

Used by: :mod:`rankcollapse.book.cli` (the ``bundle`` verb), scripts/device_bundle.sh, scripts/device_run.sh.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import rankcollapse


def bundled_runs(targets: list[str], pairs: list[tuple[str, str]], profile: str, plan_run: Callable) -> list:
    """The initialized sweeps of ``PAGE`` or ``PAGE:PART`` targets, in the pages' parameters; one ValueError
    for an unknown part or a named part with pretrained weights. ``plan_run``: the CLI's
    :func:`rankcollapse.book.cli.plan_run` (passed in: the CLI imports this module)."""
    from rankcollapse.book import registry
    from rankcollapse.experiments.bundle import BundledRun
    from rankcollapse.experiments.config import stored_parameters

    runs = []
    for target in targets:
        page, _, wanted = target.partition(":")
        _, parameters = plan_run(page, pairs, profile)
        configured = registry.runs_at(page, parameters)
        if wanted and wanted not in configured:
            raise ValueError(f"page {page} has no part {wanted!r}; its parts: {', '.join(configured)}")
        for part, run in configured.items():
            if wanted not in ("", part):
                continue
            if run.config.weights != ("initialized",):
                if wanted:
                    raise ValueError(f"{page}:{part} uses weights {', '.join(run.config.weights)}; a bundle "
                                     "holds only initialized sweeps")
                continue
            runs.append(BundledRun(run.page or page, part, stored_parameters(run.config)))
    if not runs:
        raise ValueError(f"{', '.join(targets)} have no sweep with initialized weights only")
    return runs


def tree_bytes(folder: Path) -> int:
    """Bytes of the files that travel with the git working tree holding ``folder`` (which need not exist yet):
    tracked, and untracked but not ignored, outside ``folder`` (0 outside git)."""
    there = next(p for p in (folder, *folder.parents) if p.is_dir())
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=there, capture_output=True,
                             text=True, check=True).stdout.strip()
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=top, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return 0
    paths = {(Path(top) / n.decode()).resolve() for n in listed.split(b"\0") if n}
    inside = folder.resolve()
    return sum(p.stat().st_size for p in paths if p.is_file() and inside not in p.parents)


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def write(targets: list[str], pairs: list[tuple[str, str]], profile: str, output: Path, samples: list[int],
          code: bool, fit_mib: float | None, extra: Path | None, plan_run: Callable) -> list[str]:
    """Write the bundle; returns the lines saying what it holds and its sizes. Over ``fit_mib``, the largest
    sample counts are dropped, or with ``extra`` moved to that folder (the first call's, see the module)."""
    from rankcollapse.experiments.bundle import EXTRA_FILE, write_bundle

    runs = bundled_runs(targets, pairs, profile, plan_run)
    counts = sorted(set(samples or [r.parameters["n_samples"] for r in runs]), reverse=True)
    output.mkdir(parents=True, exist_ok=True)
    if code:
        shutil.rmtree(output / "src", ignore_errors=True)
        shutil.copytree(Path(rankcollapse.__file__).parent, output / "src" / "rankcollapse",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    held = counts  # the sample counts the bundle itself holds (the others: in extra)
    while True:
        split = None if held == counts else held[0]
        sizes = write_bundle(output, runs, tuple(counts), split=split, extra=None if split is None else extra)
        size, tree = folder_bytes(output), tree_bytes(output)
        if fit_mib is None or size + tree <= fit_mib * 2**20 or len(held) == 1:
            break
        held = held[1:]
        counts = counts if extra is not None else held
    lines = [f"{r.page} {r.part}: {r.parameters['n_layers']} layers x {r.parameters['n_tokens']} tokens"
             for r in runs]
    lines.append(f"sample counts {', '.join(map(str, counts))}; bundle {size / 2**20:.2f} MiB in {output} "
                 f"(up to {held[0]} samples), working tree {tree / 2**20:.2f} MiB, together "
                 f"{(size + tree) / 2**20:.2f} MiB")
    if split is not None:
        lines.append(f"the other samples' rows and ids: {sizes[str(extra / EXTRA_FILE)] / 2**20:.2f} MiB in "
                     f"{extra}")
    if fit_mib is not None and size + tree > fit_mib * 2**20:
        raise ValueError(f"{lines[1]}: over {fit_mib} MiB even at {held[0]} samples; bundle fewer samples")
    return lines


def device_main(argv: list[str] | None = None) -> int:
    """``python -m rankcollapse.book.cli_bundle FOLDER --store DIR [--samples N ...] [--dtypes float32 ...]
    [--device cuda] [--budget-s S] [--archive FILE] [--report FILE]``: run a bundle on the device
    (:func:`rankcollapse.experiments.bundle.run_bundle`; the entry point of scripts/device_run.sh); prints its
    report as JSON lines as it goes."""
    import argparse
    import json

    from rankcollapse.experiments.bundle import EXTRA_FILE, open_bundle, run_bundle
    from rankcollapse.experiments.store import ResultStore

    parser = argparse.ArgumentParser(prog="python -m rankcollapse.book.cli_bundle",
                                     description="Run a device bundle")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--store", type=Path, required=True, help="results store root to write")
    parser.add_argument("--extra", type=Path, default=None,
                        help="folder that may hold the bundle's extra rows")
    parser.add_argument("--samples", type=int, nargs="+", default=None, help="sample counts to choose from "
                        "(default: every count the bundle holds)")
    parser.add_argument("--dtypes", nargs="+", default=["float32"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--budget-s", type=float, default=float("inf"), help="seconds for the whole run")
    parser.add_argument("--stand-in", action="store_true", help="only try the device: random tokens and "
                        "embeddings (bundle.json alone) and the probes, nothing stored")
    parser.add_argument("--probe", type=int, nargs=2, default=[64, 4], metavar=("SAMPLES", "LAYERS"))
    parser.add_argument("--archive", type=Path, default=None,
                        help=".tar.gz of the results, rewritten after each")
    parser.add_argument("--report", type=Path, default=None, help="JSON report of the runs' timings")
    args = parser.parse_args(argv)
    bundle = open_bundle(args.folder, args.extra, stand_in=args.stand_in)
    samples = tuple(k for k in args.samples or bundle.sample_counts if k in bundle.sample_counts)
    found = args.extra is not None and (args.extra / EXTRA_FILE).is_file()
    print(f"bundle: sample counts {bundle.sample_counts} (extra rows {'found' if found else 'not found'}); "
          f"running {samples}", flush=True)
    report = run_bundle(bundle, ResultStore(args.store), samples=samples, dtypes=tuple(args.dtypes),
                        device=args.device, budget_s=0.0 if args.stand_in else args.budget_s,
                        probe=tuple(args.probe), archive=args.archive,
                        log=lambda line: print(line, flush=True))
    text = json.dumps(report, indent=1)
    print(text, flush=True)
    if args.report is not None:
        args.report.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(device_main())
