"""``rankcollapse run PAGE [-p NAME VALUE ...] [--profile paper] [--device cuda] [--output DIR]
[--add-to-book] [--nproc K] [--timeout S]``, ``rankcollapse compute PAGE ...`` (the same, without rendering),
``rankcollapse pages [PAGE] [--profile paper]`` (the registry's pages, or one page's parameters:
:mod:`rankcollapse.book.cli_listing`), ``rankcollapse results [PAGE]`` (the results store and the unfinished
runs' progress and checkpoints, from any folder with ``RANKCOLLAPSE_RESULTS_DIR``), ``rankcollapse bundle
PAGE[:PART] ...`` (a device bundle of initialized sweeps: :mod:`rankcollapse.book.cli_bundle`) and
``rankcollapse --version``.

Re-runs one book page with new parameters through papermill: the executed notebook goes to
``DIR/<page>.ipynb`` and its exported figures (PNG, SVG, PDF and JSON provenance) to ``DIR/figures/``
(``DIR`` defaults to a folder of its own, ``runs/<page>-<UTC time>[-k]/``; a given ``--output`` must be new or
empty unless ``--overwrite``, and outside the results store: :mod:`rankcollapse.book.cli_faults`);
results land in the results store (``results/``), so a later book build shows them, and the closing lines say
where. Everything is checked before anything runs (:mod:`rankcollapse.book.cli_plan`): the page name, the
parameter names, types and ranges, the device, ``--nproc`` and that each option applies to the page.
``--add-to-book`` copies the executed notebook to ``book/runs/`` with its labels made unique. A page's results
are computed before the notebook runs (:func:`compute_page`: plan, progress bar, resume;
:mod:`rankcollapse.experiments.sweep`), in one process or in the ranks of ``torchrun --nproc-per-node K -m
rankcollapse compute ...`` (its own process group, ended with this process, even by SIGKILL; started only when
a result is missing, with no more processes than units to compute); the notebook then loads them.
``--timeout S`` bounds the whole run.

Every failure is one sentence on stderr, never a traceback: a refused input, a damaged stored result (also in
``rankcollapse results``) or an OSError (a full disk, a read-only folder: the line names the path and the
option or variable that chose it) exits 2, a page that fails or runs past ``--timeout`` exits 1 (the
executed notebook keeps the traceback), Ctrl-C exits 130 saying whether the same command resumes from
checkpoints, SIGTERM 143.

Used by: readers re-running a page, book/reproduce.md, tests/unit/test_cli.py, tests/unit/test_cli_errors.py.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path

from rankcollapse.book import cli_faults, cli_processes
from rankcollapse.book.cli_plan import parse_value, plan_run, shorten  # noqa: F401 -- the CLI's names
from rankcollapse.book.runner import repo_root

def compute_page(page: str, parameters: dict, nproc: int = 1, show: bool = True) -> bool:
    """Compute and store every result ``page`` shows for ``parameters`` (its defaults and the reader's;
    nothing for pages that compute in their own module), in ``nproc`` processes (torchrun, in a process
    group of its own that ends with this process, even when this process is killed; never more processes than
    the most units a sweep still has to compute, and none when every result is stored) or in the processes
    torchrun started this one in; ``show``: print the plan and a progress bar. Returns whether this process
    should render the page (rank 0, or no process group)."""
    import torch

    from rankcollapse.core import checks
    from rankcollapse.book import cli_listing, registry
    from rankcollapse.book import runner
    from rankcollapse.experiments import ranks

    checks.check_int("nproc", nproc, 1, 4096)
    if page not in registry.EXPERIMENT_PAGES:
        return True
    if nproc > 1:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ValueError("nproc must be 1 inside torchrun (torchrun already started the processes)")
        # the store looked up before any process starts
        needed = cli_listing.units_to_compute(page, parameters)
        if needed < nproc and show:
            print(f"{page}: {needed} unit{'s' * (needed != 1)} of work to compute, so {max(needed, 1)} "
                  f"process{'es' * (needed > 1)}, not {nproc}", file=sys.stderr, flush=True)
        nproc = min(nproc, max(needed, 1))
    if nproc > 1:
        return _torchrun(page, parameters, nproc, show)
    cli_processes.watch_owner()  # a torchrun worker dies with torchrun and with the command that started it
    started = ranks.init_distributed(str(parameters.get("device", "cpu")))
    rank, _ = ranks.rank_and_world()
    try:  # in the book's root, as the page's own kernel: the same store, commit and provenance
        with ranks.progress(show), contextlib.chdir(repo_root()):
            cell = runner.page_parameters(registry.page(page).path(repo_root()))
            registry.compute(page, **{**cell, **parameters})
    finally:
        if started:
            torch.distributed.destroy_process_group()
    return rank == 0


def _torchrun(page: str, parameters: dict, nproc: int, show: bool) -> bool:
    """``torchrun --nproc-per-node nproc -m rankcollapse compute page ...``, in a session of its own that dies
    with this process (:func:`rankcollapse.book.cli_processes.start_owned`); RuntimeError when it fails."""
    from rankcollapse.experiments import ranks

    pairs = [a for name, value in parameters.items() for a in ("-p", name, repr(value))]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "-m", "rankcollapse", "compute", page, *pairs]
    process = cli_processes.start_owned(command, {ranks.PROGRESS_ENV: "1" if show else "0"}, repo_root())
    try:
        status = process.wait()
    finally:
        cli_processes.end_group(process)
    if status:
        raise RuntimeError(f"the {nproc} processes computing {page} failed (exit status {status})")
    return True


def add_to_book(ipynb: Path, page: str, runs_dir: Path, name: str) -> Path:
    """Copy an executed page into ``runs_dir`` as ``<page>-<name>.ipynb`` with unique labels."""
    from rankcollapse.book.runner import rename_labels

    target = runs_dir / f"{page}-{name}.ipynb"
    runs_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ipynb, target)
    rename_labels(target, name)
    return target


def new_run_folder(runs: Path, page: str, stamp: str) -> Path:
    """A folder of this run's own, ``runs/<page>-<stamp>``, or with ``-2``, ``-3`` ... when another run took
    the name in the same second (created here, atomically)."""
    runs.mkdir(parents=True, exist_ok=True)
    for k in range(1, 10_000):
        folder = runs / (f"{page}-{stamp}" if k == 1 else f"{page}-{stamp}-{k}")
        with contextlib.suppress(FileExistsError):
            folder.mkdir()
            return folder
    raise ValueError(f"no free run folder for {page}-{stamp} under {runs}")


def _parser() -> argparse.ArgumentParser:
    from rankcollapse import __version__
    from rankcollapse.book.registry import PAGES, PROFILE_NAMES

    parser = argparse.ArgumentParser(prog="rankcollapse",
                                     description="Re-run a page of the rank-collapse companion book.")
    parser.add_argument("--version", action="version", version=f"rankcollapse {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="execute a book page with new parameters (papermill)")
    compute = commands.add_parser("compute", help="compute and store a page's results without rendering it "
                                  "(every rank under torchrun)")
    for sub in (run, compute):
        sub.add_argument("page", help=f"one of: {', '.join(PAGES)}")
        sub.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                         help="set a parameter of the page's parameters cell (once each; rankcollapse pages "
                              "PAGE lists them)")
        sub.add_argument("--profile", default="default",
                         help=f"parameter profile: {', '.join(PROFILE_NAMES)}")
        sub.add_argument("--device", default=None,
                         help="'cpu', 'cuda' or 'cuda:K' (the experiment pages' device "
                         "parameter)")
        sub.add_argument("--nproc", type=int, default=1, help="compute an experiment page's samples in K "
                         "processes (torchrun: NCCL on GPUs, gloo on CPU)")
    run.add_argument("--output", default=None, help="output folder, new or empty (default: a new "
                     "runs/<page>-<UTC time>)")
    run.add_argument("--overwrite", action="store_true",
                     help="write into a --output folder that is not empty")
    run.add_argument("--add-to-book", action="store_true",
                     help="also copy the executed notebook to book/runs/")
    run.add_argument("--timeout", default=None, help="seconds the whole run may take, computing and the "
                     "notebook (fractions allowed; default: none)")
    listing = commands.add_parser("pages", help="list the book's pages, or one page's parameters")
    listing.add_argument("page", nargs="?", default=None,
                         help="a page: list its parameters, defaults and ranges")
    listing.add_argument("--profile", default=None, help="only the pages this profile changes")
    bundle = commands.add_parser("bundle",
                                 help="write a device bundle of pages' initialized sweeps (cli_bundle)")
    bundle.add_argument("targets", nargs="+", metavar="PAGE[:PART]")
    bundle.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[])
    bundle.add_argument("--profile", default="default")
    bundle.add_argument("--output", type=Path, required=True)
    bundle.add_argument("--samples", type=int, nargs="+", default=[],
                        help="sample counts (default: the pages')")
    bundle.add_argument("--code", action="store_true", help="copy the package's sources into OUTPUT/src")
    bundle.add_argument("--fit-mib", type=float, default=None,
                        help="drop sample counts until it fits with the tree")
    bundle.add_argument("--extra", type=Path, default=None, help="with --fit-mib: move them here instead")
    results = commands.add_parser("results",
                                  help="list the stored results (verified or damaged) and unfinished runs")
    results.add_argument("page", nargs="?", default=None, help="only this page's results")
    results.add_argument("--pack", action="store_true",
                         help="first pack the unfinished runs' finished units into their compact form, to "
                              "commit them (a run resumed from them is within about 1e-4, not "
                              "byte-identical)")
    return parser


def _listing(args: argparse.Namespace) -> int:
    from rankcollapse.book import cli_listing
    from rankcollapse.book import registry

    if args.command == "results":
        if args.page is not None:
            registry.page(args.page)
        for line in cli_listing.pack_partial(args.page) if args.pack else []:
            print(line)
        rows, partial = cli_listing.results_table(args.page), cli_listing.partial_table(args.page)
        print(cli_listing.format_table(rows) if rows else "no stored results")
        if partial:
            print(f"\nunfinished runs (their finished units, in the store's partial/; the same command "
                  f"resumes them, also in a clone with them committed):\n{cli_listing.format_table(partial)}")
        if shown := cli_listing.shown_table(args.page):
            print(f"\nwhat each page shows at its defaults (the largest scale stored for every part):\n"
                  f"{cli_listing.format_table(shown)}")
        stored = [r for r in rows if not r["status"].startswith("partial ")]  # not unfinished runs' rows
        damaged = sum(r["status"] != "verified" for r in stored)
        if damaged:  # exit 2, as everywhere a stored result is damaged
            print(f"rankcollapse results: error: {damaged} of {len(stored)} stored results damaged (their "
                  f"status says why)", file=sys.stderr)
        return 2 if damaged else 0
    if args.page is not None:
        if args.profile is not None:
            raise ValueError("give a page or --profile, not both")
        print(cli_listing.describe_page(args.page))
        return 0
    print("\n".join(registry.pages_with_profile(args.profile) if args.profile else tuple(registry.PAGES)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rankcollapse`` command; returns the exit status. An OSError anywhere (a full disk,
    a read-only folder, no book) is one line naming the path and the option or variable at fault, exit 2."""
    # no weight-loading bar above a one-line refusal
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    args = _parser().parse_args(argv)
    prog = f"rankcollapse {args.command}"
    try:
        return _main(args, prog)
    except Exception as err:  # noqa: BLE001 -- only those raised from an OSError are answered here
        output = getattr(args, "output", None)
        line = cli_faults.os_error_line(err, Path(output) if output else None)
        if line is None:
            raise
        print(f"{prog}: error: {line}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace, prog: str) -> int:
    if args.command in ("pages", "results", "bundle"):
        try:
            if args.command == "bundle":
                from rankcollapse.book import cli_bundle

                print("\n".join(cli_bundle.write(args.targets, args.parameter, args.profile, args.output,
                                                 args.samples, args.code, args.fit_mib, args.extra,
                                                 plan_run)))
                return 0
            return _listing(args)
        except OSError:
            raise
        except ValueError as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
    resumes = _resume_words(args.page)
    try:
        with cli_processes.sigterm_ends_cleanly():
            return _run(args, prog)
    except KeyboardInterrupt:
        _quiet_abandoned_tasks()
        print(f"\n{prog}: interrupted; {resumes}", file=sys.stderr)
        return 130
    except cli_processes.Terminated:
        _quiet_abandoned_tasks()
        print(f"{prog}: terminated (SIGTERM); {resumes}", file=sys.stderr)
        return 143
    except cli_faults.TimedOut:
        _quiet_abandoned_tasks()
        print(f"{prog}: error: {_timed_out(args)}", file=sys.stderr)
        return 1


def _resume_words(page: str) -> str:
    """What Ctrl-C or SIGTERM leaves: an experiment page's finished units resume; other pages start over."""
    from rankcollapse.book import registry

    try:
        keeps = any(isinstance(run, registry.Run) for run in registry.runs_at(page, {}).values())
    except (ValueError, TypeError, OSError):
        keeps = True
    if keeps:
        return "run the same command again to resume from its checkpoints"
    return f"{page} keeps no checkpoints, so nothing was kept; the same command starts it again"


def _timed_out(args: argparse.Namespace) -> str:
    return (f"{args.page} ran longer than --timeout {args.timeout} s (computing and the notebook together); "
            f"give a larger --timeout, or none")


def _quiet_abandoned_tasks() -> None:
    """After an interrupt, papermill's kernel client can leave an asyncio task whose exception nobody
    retrieves; asyncio logs it ("Task exception was never retrieved" and a traceback) when the task is
    collected at exit, under the one-line message. The run is over, so that log is silenced."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)


def _shows_largest(path: Path, parameters: dict) -> bool:
    """Whether the page shows the largest stored run of its experiment (its ``show_largest_stored``)."""
    from rankcollapse.book.runner import page_parameters

    return bool({**page_parameters(path), **parameters}.get("show_largest_stored", False))


def _run(args: argparse.Namespace, prog: str) -> int:
    from rankcollapse.book import cli_listing
    from rankcollapse.experiments import ranks

    show = os.environ.get(ranks.PROGRESS_ENV) != "0"
    try:
        limit = cli_faults.timeout_seconds(getattr(args, "timeout", None))
        output = cli_faults.check_output(args.output, args.overwrite) if args.command == "run" else None
        path, parameters = plan_run(args.page, args.parameter, args.profile, args.device, args.nproc)
        before = cli_listing.stored_parts(args.page, parameters)
        with cli_faults.time_limit(limit):
            deadline = None if limit is None else time.monotonic() + limit
            if not compute_page(args.page, parameters, args.nproc, show=show):
                # a torchrun rank other than 0: rank 0 renders the page and says where the results are
                return 0
            after = cli_listing.stored_parts(args.page, parameters)
            shown = None
            if args.command == "run" and after and _shows_largest(path, parameters):
                from rankcollapse.book import report  # a damaged larger result is found here, in one line

                shown = cli_listing.shown_line(args.page, after, report.largest_stored(after))
            stored = cli_listing.stored_lines(before, after)
            if args.command == "compute":
                print("\n".join(stored) if stored else f"{args.page} computes nothing to store (it computes "
                      f"as it renders)")
                return 0
            return _render(args, prog, path, parameters, shown, stored, output, deadline)
    except (ValueError, RuntimeError) as err:
        if isinstance(err, OSError) or (isinstance(err, RuntimeError) and cli_faults.os_error_line(err)):
            raise  # a file that could not be written: main names the option or variable that chose its folder
        print(f"{prog}: error: {str(err) or type(err).__name__}", file=sys.stderr)
        return 2 if isinstance(err, ValueError) else 1


def _render(args: argparse.Namespace, prog: str, path: Path, parameters: dict, shown: str | None,
            stored: list[str], output: Path | None, deadline: float | None) -> int:
    """Execute the page into ``output`` (else a new run folder) by ``deadline`` (``time.monotonic()``;
    None: no limit), and say where the notebook, figures and results are."""
    import logging

    import papermill
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from rankcollapse.book.runner import check_notes, execute_page

    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    given = output
    output = output.resolve() if output else new_run_folder(Path("runs").resolve(), args.page, stamp)
    os.environ["RANKCOLLAPSE_FIGURE_DIR"] = str(output / "figures")  # inherited by the papermill kernel
    if shown:
        print(shown, flush=True)
    print(f"running {args.page} with {parameters or 'its defaults'} -> {output}", flush=True)
    ipynb = output / f"{args.page}.ipynb"
    quiet = logging.getLogger("papermill")
    level, quiet.level = quiet.level, logging.CRITICAL  # its log repeats what the sentence below says
    try:
        cell_limit = -1 if deadline is None else max(1, math.ceil(deadline - time.monotonic()))
        execute_page(path, parameters, ipynb, timeout=cell_limit)
    except papermill.PapermillExecutionError as err:
        if err.ename == "KeyboardInterrupt":
            raise KeyboardInterrupt from None
        evalue = (err.evalue or "").strip().splitlines()
        if err.ename == "DamagedResultError":
            print(f"{prog}: error: {chr(10).join(evalue)}", file=sys.stderr)
            return 2
        print(f"{prog}: error: {args.page} failed in cell [{err.exec_count}]: {err.ename}"
              f"{': ' + evalue[0] if evalue else ''} (the traceback is in {ipynb})", file=sys.stderr)
        return 1
    except CellTimeoutError:
        print(f"{prog}: error: {_timed_out(args)}", file=sys.stderr)
        return 1
    except DeadKernelError as err:
        print(f"{prog}: error: the kernel running {args.page} died ({str(err).splitlines()[0]})",
              file=sys.stderr)
        return 1
    finally:
        quiet.level = level
    for note in check_notes(ipynb):
        print(f"note: {note}")
    print(f"executed notebook: {ipynb}\nfigures: {output / 'figures'}")
    if args.add_to_book:
        label = stamp if given else output.name.removeprefix(f"{args.page}-")  # the run folder's own suffix
        target = add_to_book(ipynb, args.page, repo_root() / "book" / "runs", label.lower())
        print(f"added to the book: {target} (list book/runs/{target.stem} in _toc.yml under Reproduce)")
    if stored:
        print("\n".join(stored))
    return 0


if __name__ == "__main__":
    sys.exit(main())
