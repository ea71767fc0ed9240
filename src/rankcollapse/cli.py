"""``rankcollapse run PAGE [-p NAME VALUE ...] [--profile paper] [--device cuda] [--output DIR] [--add-to-book] [--nproc K]``.

Re-runs one book page with new parameters through papermill: the executed notebook goes to
``DIR/<page>.ipynb`` and its exported figures (PNG, SVG, PDF and JSON provenance) to ``DIR/figures/``;
results land in the results store (``results/``), so a later book build shows them. Everything is checked
before anything runs: the page name, the parameter names (against the page's ``parameters`` cell), their
types (against the defaults) and their ranges (against :mod:`rankcollapse.experiments`' configurations),
and the device. ``--add-to-book`` copies the executed notebook to ``book/runs/`` with its labels made
unique, to be listed in the book's table of contents. A page's results are computed before the notebook
runs (:func:`rankcollapse.sweep.compute_page`: plan, progress bar, resume), in ``--nproc K`` processes or
in the ranks of ``torchrun --nproc-per-node K -m rankcollapse run ...``; the notebook then loads them.

Used by: readers re-running a page, book/reproduce.md, tests/unit/test_cli.py.
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import os
import shutil
import sys
from pathlib import Path

PAGES = {
    "setup": "book/setup.md",
    "data": "book/data.md",
    "theorem1": "book/theory/theorem1.md",
    "theorem2": "book/theory/theorem2.md",
    "counterexample": "book/theory/counterexample.md",
    "equilibria": "book/theory/equilibria.md",
    "fig2": "book/experiments/fig2.md",
    "fig3": "book/experiments/fig3.md",
    "fig4": "book/experiments/fig4.md",
    "appendix_g1": "book/experiments/appendix_g1.md",
    "sample_size": "book/response/sample_size.md",
    "skip_connections": "book/response/skip_connections.md",
    "pretrained_panels": "book/response/pretrained_panels.md",
}
_PAPER_SCALE = {"model": "pkg:mpnet", "n_samples": 3000, "n_tokens": 128, "overlap": "sentence_starts"}
PROFILES: dict[str, dict[str, dict[str, object]]] = {  # profile -> page -> parameters over the page defaults
    "default": {},
    "paper": {
        "fig2": _PAPER_SCALE, "fig3": _PAPER_SCALE, "fig4": _PAPER_SCALE, "pretrained_panels": _PAPER_SCALE,
        "appendix_g1": {**_PAPER_SCALE, "n_layers": 128},
        "sample_size": {**_PAPER_SCALE, "n_samples_small": 32},
        "skip_connections": {**_PAPER_SCALE, "n_layers": 12, "n_layers_deep": 128},
    },
}


def repo_root() -> Path:
    """The book root (the folder with ``_toc.yml``), searched from the working directory, then the package."""
    from rankcollapse.plotting import book_root

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
    except (ValueError, SyntaxError):
        return text


def plan_run(page: str, pairs: list[tuple[str, str]] | None = None, profile: str = "default",
             device: str | None = None) -> tuple[Path, dict[str, object]]:
    """Check everything and return (page file, the parameters to inject); raises one ValueError on bad input."""
    from rankcollapse import experiments, runner, san

    if page not in PAGES:
        raise ValueError(f"unknown page {page!r}; pages are: {', '.join(PAGES)}")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; profiles are: {', '.join(PROFILES)}")
    path = repo_root() / PAGES[page]
    defaults = runner.page_parameters(path)
    parameters = dict(PROFILES[profile].get(page, {}))
    for name, text in pairs or []:
        parameters[name] = parse_value(text)
    if device is not None:
        parameters["device"] = device
    if parameters and "show_largest_stored" in defaults:
        parameters.setdefault("show_largest_stored", False)  # a re-run shows its own result, not a stored larger one
    runner.check_parameter_types(defaults, parameters)
    experiments.check_parameters(page, {**defaults, **parameters})
    if "device" in parameters:
        san.resolve_device(parameters["device"])
    return path, parameters


def add_to_book(ipynb: Path, page: str, runs_dir: Path, name: str) -> Path:
    """Copy an executed page into ``runs_dir`` as ``<page>-<name>.ipynb`` with unique labels."""
    from rankcollapse.runner import rename_labels

    target = runs_dir / f"{page}-{name}.ipynb"
    runs_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ipynb, target)
    rename_labels(target, name)
    return target


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankcollapse", description="Re-run a page of the rank-collapse companion book.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="execute a book page with new parameters (papermill)")
    run.add_argument("page", help=f"one of: {', '.join(PAGES)}")
    run.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                     help="override a parameter of the page's parameters cell (repeatable)")
    run.add_argument("--profile", default="default", help=f"parameter profile: {', '.join(PROFILES)}")
    run.add_argument("--device", default=None, help="'cpu' or 'cuda' (sets the page's device parameter)")
    run.add_argument("--output", type=Path, default=None, help="output folder (default runs/<page>-<UTC time>)")
    run.add_argument("--add-to-book", action="store_true", help="also copy the executed notebook to book/runs/")
    run.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds (default: none)")
    run.add_argument("--nproc", type=int, default=1,
                     help="compute the page's results in K processes first (torchrun: NCCL on GPUs, gloo on CPU)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rankcollapse`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        path, parameters = plan_run(args.page, args.parameter, args.profile, args.device)
    except ValueError as err:
        print(f"rankcollapse run: error: {err}", file=sys.stderr)
        return 2
    from rankcollapse import sweep
    from rankcollapse.runner import execute_page

    try:  # the results first, outside the notebook: plan, progress bar, resume, processes (rankcollapse.sweep)
        show = os.environ.get(sweep.PROGRESS_ENV) != "0"
        if not sweep.compute_page(args.page, parameters, args.nproc, show=show):
            return 0  # a torchrun rank other than 0: rank 0 renders the page
    except ValueError as err:
        print(f"rankcollapse run: error: {err}", file=sys.stderr)
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
