"""Run a book page with new parameters: Jupytext page -> papermill -> executed notebook.

Used by: the notebook tests (every page at tiny parameters) and the re-run instructions in the book.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jupytext
import papermill


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
    )
    return output


def read_glue(ipynb: Path) -> dict[str, object]:
    """Values glued with ``myst_nb.glue`` in an executed notebook, by key (``text/plain`` parsed back).

    Values whose plain-text form is not a Python literal (figures, tables) come back as strings.
    """
    notebook = json.loads(Path(ipynb).read_text())
    values: dict[str, object] = {}
    for cell in notebook["cells"]:
        for out in cell.get("outputs", []):
            key = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if key is None:
                continue
            text = out.get("data", {}).get("application/papermill.record/text/plain")
            if text is None:
                values[key] = None
                continue
            try:
                values[key] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                values[key] = text
    return values
