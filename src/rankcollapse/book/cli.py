"""``rankcollapse run PAGE [-p NAME VALUE ...] [--profile paper] [--device cuda] [--output DIR] [--add-to-book] [--nproc K]``
and ``rankcollapse pages [--profile paper]`` (the page names of the registry, :mod:`rankcollapse.book.registry`).

Re-runs one book page with new parameters through papermill: the executed notebook goes to
``DIR/<page>.ipynb`` and its exported figures (PNG, SVG, PDF and JSON provenance) to ``DIR/figures/``;
results land in the results store (``results/``), so a later book build shows them. Everything is checked
before anything runs: the page name, the parameter names (against the page's ``parameters`` cell), their
types (against the defaults) and their ranges (by the page's configuration in the page registry,
:mod:`rankcollapse.book.registry`), and the device. ``--add-to-book`` copies the executed notebook to ``book/runs/`` with its labels made
unique, to be listed in the book's table of contents. A page's results are computed before the notebook
runs (:func:`compute_page`: plan, progress bar, resume; :mod:`rankcollapse.experiments.sweep`), in ``--nproc K`` processes
or in the ranks of ``torchrun --nproc-per-node K -m rankcollapse run ...``; the notebook then loads them.
``rankcollapse compute PAGE ...`` (the same options, under torchrun in every rank) only computes and stores.

Used by: readers re-running a page, book/reproduce.md, tests/unit/test_cli.py.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime as _dt
import os
import shutil
import subprocess
import sys
from pathlib import Path


def repo_root() -> Path:
    """The book root (the folder with ``_toc.yml``), searched from the working directory, then the package."""
    from rankcollapse.experiments.provenance import book_root

    try:
        return book_root()
    except FileNotFoundError:
        return book_root(Path(__file__).resolve().parent)


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


def plan_run(page: str, pairs: list[tuple[str, str]] | None = None, profile: str = "default",
             device: str | None = None) -> tuple[Path, dict[str, object]]:
    """Check everything and return (page file, the parameters to inject); raises one ValueError on bad input."""
    from rankcollapse.book import registry as pages
    from rankcollapse.book import runner
    from rankcollapse import engine

    path = pages.page(page).path(repo_root())
    defaults = runner.page_parameters(path)
    parameters = pages.profile_parameters(page, profile)
    for name, text in pairs or []:
        parameters[name] = parse_value(text)
    if device is not None:
        parameters["device"] = device
    if parameters and "show_largest_stored" in defaults:
        parameters.setdefault("show_largest_stored", False)  # a re-run shows its own result, not a stored larger one
    runner.check_parameter_types(defaults, parameters)
    pages.configure(page, {**defaults, **parameters})
    if "device" in parameters:
        engine.resolve_device(parameters["device"])
    return path, parameters


def compute_page(page: str, parameters: dict, nproc: int = 1, show: bool = True) -> bool:
    """Compute and store every result ``page`` shows for ``parameters`` (its defaults and the reader's;
    nothing for pages that compute in their own module), in ``nproc`` processes (torchrun) or in the
    processes torchrun started this one in; ``show``: print the plan and a progress bar. Returns whether
    this process should render the page (rank 0, or no process group)."""
    import torch

    from rankcollapse.core import checks
    from rankcollapse.book import registry as pages
    from rankcollapse.book import runner
    from rankcollapse.experiments import ranks

    checks.check_int("nproc", nproc, 1, 4096)
    if page not in pages.EXPERIMENT_PAGES:
        return True
    if nproc > 1:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ValueError("nproc must be 1 inside torchrun (torchrun already started the processes)")
        pairs = [a for name, value in parameters.items() for a in ("-p", name, repr(value))]
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                   "-m", "rankcollapse", "compute", page, *pairs]
        env = {**os.environ, ranks.PROGRESS_ENV: "1" if show else "0"}
        status = subprocess.run(command, env=env, cwd=repo_root()).returncode
        if status:
            raise RuntimeError(f"the {nproc} processes computing {page} failed (exit status {status})")
        return True
    started = ranks.init_distributed(str(parameters.get("device", "cpu")))
    rank, _ = ranks.rank_and_world()
    try:  # in the book's root, as the page's own kernel: the same store, commit and provenance
        with ranks.progress(show), contextlib.chdir(repo_root()):
            pages.compute(page, **{**runner.page_parameters(pages.page(page).path(repo_root())), **parameters})
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


def _parser() -> argparse.ArgumentParser:
    from rankcollapse.book.registry import PAGES, PROFILE_NAMES

    parser = argparse.ArgumentParser(prog="rankcollapse", description="Re-run a page of the rank-collapse companion book.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="execute a book page with new parameters (papermill)")
    run.add_argument("page", help=f"one of: {', '.join(PAGES)}")
    run.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                     help="override a parameter of the page's parameters cell (repeatable)")
    run.add_argument("--profile", default="default", help=f"parameter profile: {', '.join(PROFILE_NAMES)}")
    run.add_argument("--device", default=None, help="'cpu' or 'cuda' (sets the page's device parameter)")
    run.add_argument("--output", type=Path, default=None, help="output folder (default runs/<page>-<UTC time>)")
    run.add_argument("--add-to-book", action="store_true", help="also copy the executed notebook to book/runs/")
    run.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds (default: none)")
    run.add_argument("--nproc", type=int, default=1,
                     help="compute the page's results in K processes first (torchrun: NCCL on GPUs, gloo on CPU)")
    compute = commands.add_parser("compute", help="compute and store a page's results without rendering it "
                                  "(every rank under torchrun)")
    compute.add_argument("page", help=f"one of: {', '.join(PAGES)}")
    compute.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[])
    compute.add_argument("--profile", default="default", help=f"parameter profile: {', '.join(PROFILE_NAMES)}")
    compute.add_argument("--device", default=None, help="'cpu' or 'cuda'")
    listing = commands.add_parser("pages", help="list the book's pages (one name a line)")
    listing.add_argument("--profile", default=None, help="only the pages this profile changes")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rankcollapse`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "pages":
        from rankcollapse.book import registry as pages

        try:
            names = pages.pages_with_profile(args.profile) if args.profile else tuple(pages.PAGES)
        except ValueError as err:
            print(f"rankcollapse pages: error: {err}", file=sys.stderr)
            return 2
        print("\n".join(names))
        return 0
    try:
        path, parameters = plan_run(args.page, args.parameter, args.profile, args.device)
    except ValueError as err:
        print(f"rankcollapse {args.command}: error: {err}", file=sys.stderr)
        return 2
    from rankcollapse.experiments import ranks
    from rankcollapse.book.runner import execute_page

    try:  # the results first, outside the notebook: plan, progress bar, resume, processes (rankcollapse.experiments.sweep)
        show = os.environ.get(ranks.PROGRESS_ENV) != "0"
        if not compute_page(args.page, parameters, getattr(args, "nproc", 1), show=show) or args.command == "compute":
            return 0  # computed only, or a torchrun rank other than 0: rank 0 renders the page
    except ValueError as err:
        print(f"rankcollapse {args.command}: error: {err}", file=sys.stderr)
        return 2
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    output = (args.output or Path("runs") / f"{args.page}-{stamp}").resolve()
    os.environ["RANKCOLLAPSE_FIGURE_DIR"] = str(output / "figures")  # inherited by the papermill kernel
    print(f"running {args.page} with {parameters or 'its defaults'} -> {output}", flush=True)
    ipynb = execute_page(path, parameters, output / f"{args.page}.ipynb", timeout=args.timeout or -1)
    print(f"executed notebook: {ipynb}\nfigures: {output / 'figures'}")
    if args.add_to_book:
        target = add_to_book(ipynb, args.page, repo_root() / "book" / "runs", stamp.lower())
        print(f"added to the book: {target} (list book/runs/{target.stem} in _toc.yml under Reproduce)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
