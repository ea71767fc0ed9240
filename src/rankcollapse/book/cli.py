"""``rankcollapse run PAGE [-p NAME VALUE ...] [--profile paper] [--device cuda] [--output DIR] [--add-to-book]
[--nproc K] [--timeout S]``, ``rankcollapse compute PAGE ...`` (the same, without rendering), ``rankcollapse pages
[PAGE] [--profile paper]`` (the registry's pages, or one page's parameters: :mod:`rankcollapse.book.cli_listing`),
``rankcollapse results [PAGE]`` (the results store and the unfinished runs' checkpoints), ``rankcollapse bundle PAGE[:PART] ...`` (a device bundle of
initialized sweeps: :mod:`rankcollapse.book.cli_bundle`) and ``rankcollapse --version``.

Re-runs one book page with new parameters through papermill: the executed notebook goes to
``DIR/<page>.ipynb`` and its exported figures (PNG, SVG, PDF and JSON provenance) to ``DIR/figures/``
(``DIR`` defaults to a folder of its own, ``runs/<page>-<UTC time>[-k]/``); results land in the results store
(``results/``), so a later book build shows them, and the closing lines say where. Everything is checked
before anything runs: the page name, the parameter names (against the page's ``parameters`` cell, each once),
their types (against the defaults) and their ranges (by the page's configuration in the page registry,
:mod:`rankcollapse.book.registry`), the device, and that each option applies to the page. ``--add-to-book``
copies the executed notebook to ``book/runs/`` with its labels made unique. A page's results are computed
before the notebook runs (:func:`compute_page`: plan, progress bar, resume; :mod:`rankcollapse.experiments.sweep`),
in one process or in the ranks of ``torchrun --nproc-per-node K -m rankcollapse compute ...`` (its own process
group, ended with this process); the notebook then loads them.

Every failure is one sentence on stderr, never a traceback: a refused input or a damaged stored result exits 2,
a page that fails or runs past ``--timeout`` exits 1 (the executed notebook keeps the traceback), Ctrl-C exits 130
saying that the same command resumes from its checkpoints, SIGTERM 143; ``rankcollapse results`` exits 1 when a
stored result is damaged.

Used by: readers re-running a page, book/reproduce.md, tests/unit/test_cli.py, tests/unit/test_cli_errors.py.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime as _dt
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rankcollapse.book import cli_processes
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
    """``message`` with every long value of ``texts`` (as given, as parsed, as quoted) cut to _SHORT characters.

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
    """``cpu``, ``cuda`` or ``cuda:k`` of a GPU this machine has; one ValueError naming the device otherwise."""
    from rankcollapse import engine

    try:
        dev = engine.resolve_device(device)
    except ValueError as err:
        if "CUDA is not available" in str(err):
            raise ValueError(f"device {device!r} was asked for but CUDA is not available here; use --device cpu") \
                from None
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
        texts = [page, profile, *(x for pair in pairs for x in pair), *([device] if isinstance(device, str) else [])]
        raise ValueError(shorten(str(err).splitlines()[0] if str(err) else repr(err), texts)) from None


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
            raise ValueError(f"parameter {name!r} is given twice (-p {name} {seen[name]} and -p {name} {text}); "
                             f"give it once")
        seen[name] = text
        parameters[name] = parse_value(text)
    if device is not None:
        if "device" not in defaults:
            raise ValueError(f"--device applies to the pages with a device parameter ("
                             f"{', '.join(n for n in registry.EXPERIMENT_PAGES)}); {page} runs on the CPU")
        parameters["device"] = device
    if nproc != 1 and page not in registry.EXPERIMENT_PAGES:
        raise ValueError(f"--nproc applies to the experiment pages ({', '.join(registry.EXPERIMENT_PAGES)}); "
                         f"{page} computes in one process")
    if parameters and "show_largest_stored" in defaults:
        parameters.setdefault("show_largest_stored", False)  # a re-run shows its own result, not a stored larger one
    runner.check_parameter_types(defaults, parameters)
    model = parameters.get("model")
    if isinstance(model, str) and not model.startswith("pkg:"):
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            if Path(model).expanduser().is_dir():  # relative to the working directory, not to the book root
                parameters["model"] = str(Path(model).expanduser().resolve())
    registry.configure(page, {**defaults, **parameters})
    if "device" in parameters:
        _check_device(parameters["device"])
    return path, parameters


def compute_page(page: str, parameters: dict, nproc: int = 1, show: bool = True) -> bool:
    """Compute and store every result ``page`` shows for ``parameters`` (its defaults and the reader's;
    nothing for pages that compute in their own module), in ``nproc`` processes (torchrun, in a process
    group of its own that ends with this process) or in the processes torchrun started this one in;
    ``show``: print the plan and a progress bar. Returns whether this process should render the page
    (rank 0, or no process group)."""
    import torch

    from rankcollapse.core import checks
    from rankcollapse.book import registry
    from rankcollapse.book import runner
    from rankcollapse.experiments import ranks

    checks.check_int("nproc", nproc, 1, 4096)
    if page not in registry.EXPERIMENT_PAGES:
        return True
    if nproc > 1:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ValueError("nproc must be 1 inside torchrun (torchrun already started the processes)")
        pairs = [a for name, value in parameters.items() for a in ("-p", name, repr(value))]
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                   "-m", "rankcollapse", "compute", page, *pairs]
        env = {**os.environ, ranks.PROGRESS_ENV: "1" if show else "0"}
        process = subprocess.Popen(command, env=env, cwd=repo_root(), start_new_session=True)
        try:
            status = process.wait()
        finally:
            cli_processes.end_group(process)
        if status:
            raise RuntimeError(f"the {nproc} processes computing {page} failed (exit status {status})")
        return True
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


def add_to_book(ipynb: Path, page: str, runs_dir: Path, name: str) -> Path:
    """Copy an executed page into ``runs_dir`` as ``<page>-<name>.ipynb`` with unique labels."""
    from rankcollapse.book.runner import rename_labels

    target = runs_dir / f"{page}-{name}.ipynb"
    runs_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ipynb, target)
    rename_labels(target, name)
    return target


def new_run_folder(runs: Path, page: str, stamp: str) -> Path:
    """A folder of this run's own, ``runs/<page>-<stamp>``, or with ``-2``, ``-3`` ... when another run took the
    name in the same second (created here, atomically)."""
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

    parser = argparse.ArgumentParser(prog="rankcollapse", description="Re-run a page of the rank-collapse companion book.")
    parser.add_argument("--version", action="version", version=f"rankcollapse {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="execute a book page with new parameters (papermill)")
    compute = commands.add_parser("compute", help="compute and store a page's results without rendering it "
                                  "(every rank under torchrun)")
    for sub in (run, compute):
        sub.add_argument("page", help=f"one of: {', '.join(PAGES)}")
        sub.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                         help="set a parameter of the page's parameters cell (once each; rankcollapse pages PAGE "
                              "lists them)")
        sub.add_argument("--profile", default="default", help=f"parameter profile: {', '.join(PROFILE_NAMES)}")
        sub.add_argument("--device", default=None, help="'cpu', 'cuda' or 'cuda:K' (the experiment pages' device "
                         "parameter)")
        sub.add_argument("--nproc", type=int, default=1, help="compute an experiment page's samples in K "
                         "processes (torchrun: NCCL on GPUs, gloo on CPU)")
    run.add_argument("--output", type=Path, default=None, help="output folder (default: a new runs/<page>-<UTC time>)")
    run.add_argument("--add-to-book", action="store_true", help="also copy the executed notebook to book/runs/")
    run.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds (default: none)")
    listing = commands.add_parser("pages", help="list the book's pages, or one page's parameters")
    listing.add_argument("page", nargs="?", default=None, help="a page: list its parameters, defaults and ranges")
    listing.add_argument("--profile", default=None, help="only the pages this profile changes")
    bundle = commands.add_parser("bundle", help="write a device bundle of pages' initialized sweeps (cli_bundle)")
    bundle.add_argument("targets", nargs="+", metavar="PAGE[:PART]")
    bundle.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[])
    bundle.add_argument("--profile", default="default")
    bundle.add_argument("--output", type=Path, required=True)
    bundle.add_argument("--samples", type=int, nargs="+", default=[], help="sample counts (default: the pages')")
    bundle.add_argument("--code", action="store_true", help="copy the package's sources into OUTPUT/src")
    bundle.add_argument("--fit-mib", type=float, default=None, help="drop sample counts until it fits with the tree")
    bundle.add_argument("--extra", type=Path, default=None, help="with --fit-mib: move them here instead")
    results = commands.add_parser("results", help="list the stored results (verified or damaged) and unfinished runs")
    results.add_argument("page", nargs="?", default=None, help="only this page's results")
    return parser


def _listing(args: argparse.Namespace) -> int:
    from rankcollapse.book import cli_listing
    from rankcollapse.book import registry

    if args.command == "results":
        if args.page is not None:
            registry.page(args.page)
        rows, partial = cli_listing.results_table(args.page), cli_listing.partial_table(args.page)
        print(cli_listing.format_table(rows) if rows else "no stored results")
        if partial:
            print(f"\nunfinished runs (their finished units; the same command resumes them):\n{cli_listing.format_table(partial)}")
        return 1 if any(r["status"] != "verified" for r in rows) else 0
    if args.page is not None:
        if args.profile is not None:
            raise ValueError("give a page or --profile, not both")
        print(cli_listing.describe_page(args.page))
        return 0
    print("\n".join(registry.pages_with_profile(args.profile) if args.profile else tuple(registry.PAGES)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rankcollapse`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    prog = f"rankcollapse {args.command}"
    if args.command in ("pages", "results", "bundle"):
        try:
            if args.command == "bundle":
                from rankcollapse.book import cli_bundle

                print("\n".join(cli_bundle.write(args.targets, args.parameter, args.profile, args.output,
                                                 args.samples, args.code, args.fit_mib, args.extra, plan_run)))
                return 0
            return _listing(args)
        except ValueError as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
    resumes = "run the same command again to resume from its checkpoints"
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
    from rankcollapse.book import recompute
    from rankcollapse.experiments import ranks

    recompute.register()
    show = os.environ.get(ranks.PROGRESS_ENV) != "0"
    output = getattr(args, "output", None)
    try:
        if getattr(args, "timeout", None) is not None and args.timeout <= 0:
            raise ValueError(f"--timeout must be a positive number of seconds, got {args.timeout}")
        if output is not None and output.exists() and not output.is_dir():
            raise ValueError(f"--output must be a folder, and {output} is a file")
        path, parameters = plan_run(args.page, args.parameter, args.profile, args.device, args.nproc)
        before = cli_listing.stored_parts(args.page, parameters)
        if not compute_page(args.page, parameters, args.nproc, show=show):
            return 0  # a torchrun rank other than 0: rank 0 renders the page and says where the results are
        after = cli_listing.stored_parts(args.page, parameters)
        shown = None
        if args.command == "run" and after and _shows_largest(path, parameters):
            from rankcollapse.book import report  # a damaged larger result is found here, in one line

            shown = cli_listing.shown_line(args.page, after, report.largest_stored(after))
    except (ValueError, RuntimeError) as err:
        print(f"{prog}: error: {str(err) or type(err).__name__}", file=sys.stderr)
        return 2 if isinstance(err, ValueError) else 1
    stored = cli_listing.stored_lines(before, after)
    if args.command == "compute":
        print("\n".join(stored) if stored else f"{args.page} computes nothing to store (it computes as it renders)")
        return 0
    return _render(args, prog, path, parameters, shown, stored)


def _render(args: argparse.Namespace, prog: str, path: Path, parameters: dict, shown: str | None,
            stored: list[str]) -> int:
    import logging

    import papermill
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from rankcollapse.book.runner import check_notes, execute_page

    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    output = args.output.resolve() if args.output else new_run_folder(Path("runs").resolve(), args.page, stamp)
    os.environ["RANKCOLLAPSE_FIGURE_DIR"] = str(output / "figures")  # inherited by the papermill kernel
    if shown:
        print(shown, flush=True)
    print(f"running {args.page} with {parameters or 'its defaults'} -> {output}", flush=True)
    ipynb = output / f"{args.page}.ipynb"
    quiet = logging.getLogger("papermill")
    level, quiet.level = quiet.level, logging.CRITICAL  # its log repeats what the sentence below says
    try:
        execute_page(path, parameters, ipynb, timeout=args.timeout or -1)
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
        print(f"{prog}: error: a cell of {args.page} ran longer than --timeout {args.timeout} s; give a larger "
              f"--timeout, or none", file=sys.stderr)
        return 1
    except DeadKernelError as err:
        print(f"{prog}: error: the kernel running {args.page} died ({str(err).splitlines()[0]})", file=sys.stderr)
        return 1
    finally:
        quiet.level = level
    for note in check_notes(ipynb):
        print(f"note: {note}")
    print(f"executed notebook: {ipynb}\nfigures: {output / 'figures'}")
    if args.add_to_book:
        label = stamp if args.output else output.name.removeprefix(f"{args.page}-")  # the run folder's own suffix
        target = add_to_book(ipynb, args.page, repo_root() / "book" / "runs", label.lower())
        print(f"added to the book: {target} (list book/runs/{target.stem} in _toc.yml under Reproduce)")
    if stored:
        print("\n".join(stored))
    return 0


if __name__ == "__main__":
    sys.exit(main())
