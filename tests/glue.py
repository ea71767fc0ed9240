"""Reading glued values back from an executed page (the notebook tests' one helper)."""

import ast
import json
from pathlib import Path


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
