"""Diff the glued values of two book builds: every ``glue`` output of every executed page.

    python scripts/diff_glue.py BEFORE/_build/.jupyter_cache AFTER/_build/.jupyter_cache

(jupyter-cache keeps every executed page with all its outputs, the removed cells' glue included.)

Compares, page by page, the text and Markdown of every glued value (claims tables, numbers, sentences) and
the bytes of every glued figure, and prints one line per page plus each difference. Exit status 1 when a
glued text differs (figures are reported, not judged: their pixels may move with a font cache).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path

TEXT_TYPES = ("text/plain", "text/markdown", "text/html")
IMAGE_TYPES = ("image/png", "image/svg+xml")


def glue_outputs(ipynb: Path) -> dict[str, dict[str, str]]:
    """Glue name -> {mime type: text (or sha256 of an image)} of one executed notebook."""
    found: dict[str, dict[str, str]] = {}
    for cell in json.loads(ipynb.read_text())["cells"]:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is None:
                continue
            data = out.get("data", {})
            entry = {}
            for mime, value in data.items():
                text = "".join(value) if isinstance(value, list) else str(value)
                kind = mime.split("papermill.record/")[-1]
                if kind in IMAGE_TYPES:
                    entry[kind] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
                elif kind in TEXT_TYPES or kind.startswith("text/"):
                    entry[kind] = text
            found[name] = entry
    return found


def executed_pages(cache: Path) -> dict[str, Path]:
    """Page source (from ``book/`` on) -> its executed notebook in a jupyter-cache folder."""
    with sqlite3.connect(cache / "global.db") as db:
        rows = db.execute("SELECT hashkey, uri FROM nbcache").fetchall()
    return {uri[uri.index("book/"):]: cache / "executed" / key / "base.ipynb" for key, uri in rows}


def main(before_cache: Path, after_cache: Path) -> int:
    text_diffs = figure_diffs = n_values = n_figures = 0
    before, after = executed_pages(before_cache), executed_pages(after_cache)
    for page in sorted(set(before) | set(after)):
        if page not in before or page not in after:
            print(f"{page}: only in {'after' if page in after else 'before'}")
            text_diffs += 1
            continue
        a, b = glue_outputs(before[page]), glue_outputs(after[page])
        page_text = page_fig = 0
        for name in sorted(set(a) | set(b)):
            ea, eb = a.get(name, {}), b.get(name, {})
            for mime in sorted(set(ea) | set(eb)):
                is_image = mime in IMAGE_TYPES
                n_figures += is_image
                n_values += not is_image
                if ea.get(mime) != eb.get(mime):
                    if is_image:
                        page_fig += 1
                    else:
                        page_text += 1
                        print(f"  {page} {name} [{mime}]:\n    before: {ea.get(mime)!r:.300}\n    after:  {eb.get(mime)!r:.300}")
        text_diffs += page_text
        figure_diffs += page_fig
        print(f"{page}: {len(a)} glued values before, {len(b)} after; {page_text} text differences, {page_fig} figure differences")
    print(f"in all: {n_values} glued texts, {text_diffs} differ; {n_figures} glued figures, {figure_diffs} differ")
    return 1 if text_diffs else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
