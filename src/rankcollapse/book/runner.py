"""Run a book page with new parameters: Jupytext page -> papermill -> executed notebook.

Used by: the notebook tests (every page at tiny parameters) and the re-run instructions in the book.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path

import jupytext
import papermill


def repo_root() -> Path:
    """The book root (the folder with ``_toc.yml``), searched from the working directory, then the package;
    else the :class:`rankcollapse.experiments.provenance.NoBookError` naming the working directory."""
    from rankcollapse.experiments.provenance import book_root

    try:
        return book_root()
    except FileNotFoundError as outside:
        try:
            return book_root(Path(__file__).resolve().parent)
        except FileNotFoundError:
            raise outside from None  # the reader's folder, not the package's, is the one to name


def execute_page(page: str | Path, parameters: dict, output: Path, timeout: int = 600) -> Path:
    """Execute a Jupytext MyST page with papermill, injecting ``parameters`` after its ``parameters`` cell.

    The kernel runs in the page's own folder (as in the book build); the executed ``.ipynb`` is written to
    ``output``. Raises ``papermill.PapermillExecutionError`` when a cell fails.
    """
    page = Path(page).resolve()
    if not page.is_file():
        raise ValueError(f"page must be an existing Jupytext .md file, got {page}")
    notebook = jupytext.read(page)
    if not any("parameters" in cell.metadata.get("tags", []) for cell in notebook.cells):
        raise ValueError(f"page {page.name} has no cell tagged 'parameters'")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(
        notebook,
        str(output),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(page.parent),
        progress_bar=False,
        execution_timeout=timeout,
        # the kernel's own log: its notice on every start, its shutdown noise after a timeout (a failing cell
        # reports in the notebook)
        extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
    )
    return output


# what a theory page shows for claims it could not confirm
CHECK_HEADING = "**Not every check holds on this run:**"


def check_notes(ipynb: Path) -> list[str]:
    """The claims an executed page could not confirm on its run (the items under CHECK_HEADING in its
    outputs, displayed or glued: :func:`rankcollapse.book.shown.check_note`), for the command line to
    repeat."""
    notes = []
    for cell in json.loads(Path(ipynb).read_text()).get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = data.get("text/markdown", data.get("application/papermill.record/text/markdown", ""))
            text = "".join(text) if isinstance(text, list) else text
            if text.startswith(CHECK_HEADING):
                notes += [line[2:] for line in text.splitlines() if line.startswith("- ")]
    return notes


def page_parameters(page: str | Path) -> dict[str, object]:
    """Names and default values of the page's ``parameters`` cell (each line ``name = literal``)."""
    notebook = jupytext.read(Path(page))
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise ValueError(f"page {Path(page).name} has no cell tagged 'parameters'")
    defaults: dict[str, object] = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defaults[node.targets[0].id] = ast.literal_eval(node.value)
    return defaults


def parameter_comments(page: str | Path) -> dict[str, str]:
    """The comment after each name of the page's ``parameters`` cell (``name = literal  # comment``), or
    ''."""
    notebook = jupytext.read(Path(page))
    source = next(c.source for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    comments = {token.start[0]: token.string.lstrip("# ").strip()
                for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT}
    return {node.targets[0].id: comments.get(node.end_lineno, "") for node in ast.parse(source).body
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)}


def type_name(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            type(None): "None or a value"}.get(type(value), type(value).__name__)


def check_parameter_types(defaults: dict[str, object], parameters: dict[str, object]) -> None:
    """One ValueError for an unknown name (listing the valid ones) or a value of the wrong type.

    A value must have its default's type; an integer is accepted where the default is a float.
    """
    for name, value in parameters.items():
        if name not in defaults:
            raise ValueError(f"unknown parameter {name!r}; this page's parameters are: {', '.join(defaults)}")
        default = defaults[name]
        if default is None:
            continue
        ok = (isinstance(value, type(default)) and isinstance(value, bool) == isinstance(default, bool)) or (
            isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise ValueError(f"parameter {name!r} must be {type_name(default)} (default {default!r}), "
                             f"got {value!r}")


def rename_labels(ipynb: Path, suffix: str) -> None:
    """Make an executed page's labels unique (``(sec-x)=`` and ``:name: fig-x`` get ``-<suffix>``), so a
    run can sit in the book beside its page without duplicate labels."""
    notebook = json.loads(Path(ipynb).read_text())
    for cell in notebook["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        text = re.sub(r"^\((sec-[\w-]+)\)=", rf"(\1-{suffix})=", text, flags=re.M)
        text = re.sub(r"^(:(?:name|label): )([\w-]+)$", rf"\1\2-{suffix}", text, flags=re.M)
        cell["source"] = text
    Path(ipynb).write_text(json.dumps(notebook, indent=1) + "\n")
