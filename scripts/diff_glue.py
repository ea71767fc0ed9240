"""Diff the glued values of two book builds: every ``glue`` output of every executed page.

    python scripts/diff_glue.py BEFORE/_build/.jupyter_cache AFTER/_build/.jupyter_cache
    python scripts/diff_glue.py BEFORE/_build/.jupyter_cache runs/fig4-<time>/fig4.ipynb   # one page

(jupyter-cache keeps every executed page with all its outputs, the removed cells' glue included; an executed
notebook, e.g. of ``rankcollapse run``, stands for its page alone.)

Compares, page by page, the text and Markdown of every glued value (claims tables, numbers, sentences) and
the bytes of every glued figure, and prints one line per page plus each difference. A page may move what a
code cell displayed (a banner, a table, a re-run block) into a glued value pasted at the same place: a glued
text only in AFTER that equals a displayed output of BEFORE counts as *moved*, not as a difference, and a
displayed output of BEFORE found nowhere in AFTER counts as a difference. The seconds a page's own
computation took in this build (its re-run block) are not compared. Exit status 1 when a glued or
displayed text differs (figures are reported, not judged: their pixels may move with a font cache).
"""

from __future__ import annotations

import hashlib
import json
import re
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


def _normal(text: str) -> str:
    """``text`` without what differs between two builds of one page: a pandas Styler's random id, and in a
    re-run block that states this build's own computing time ("took 91 s on the build machine"), the
    seconds."""
    text = re.sub(r"T_[0-9a-f]{5}", "T_", text)
    if "on the build machine" in text:
        text = re.sub(r" \(\d+\.\d min\)", "", re.sub(r"under 1 s|\b\d+ s\b", "<seconds>", text))
    return text


def displayed_outputs(ipynb: Path) -> list[str]:
    """The texts (Markdown, HTML, else plain) of every output a cell displayed that is not a glued value."""
    shown = []
    for cell in json.loads(ipynb.read_text())["cells"]:
        for out in cell.get("outputs", []):
            if out.get("output_type") not in ("display_data", "execute_result"):
                continue
            if out.get("metadata", {}).get("scrapbook") is not None:
                continue
            data = out.get("data", {})
            mime = next((m for m in ("text/markdown", "text/html", "text/plain") if m in data), None)
            if mime is not None:
                value = data[mime]
                shown.append(_normal("".join(value) if isinstance(value, list) else str(value)))
    return shown


def executed_pages(cache: Path, only: str | None = None) -> dict[str, Path]:
    """Page source (from ``book/`` on) -> its executed notebook in a jupyter-cache folder (only the page
    ``only``, given as its notebook's stem, when set); an executed notebook ``cache`` is its page alone."""
    if cache.suffix == ".ipynb":
        return {cache.stem: cache}
    with sqlite3.connect(cache / "global.db") as db:
        rows = db.execute("SELECT hashkey, uri FROM nbcache").fetchall()
    pages = {uri[uri.index("book/"):]: cache / "executed" / key / "base.ipynb" for key, uri in rows}
    if only is None:
        return pages
    return {only: path for page, path in pages.items() if Path(page).stem == only}


def main(before_cache: Path, after_cache: Path) -> int:
    text_diffs = figure_diffs = n_values = n_figures = n_moved = 0
    one = next((p.stem for p in (before_cache, after_cache) if p.suffix == ".ipynb"), None)
    before, after = executed_pages(before_cache, one), executed_pages(after_cache, one)
    for page in sorted(set(before) | set(after)):
        if page not in before or page not in after:
            print(f"{page}: only in {'after' if page in after else 'before'}")
            text_diffs += 1
            continue
        a, b = glue_outputs(before[page]), glue_outputs(after[page])
        shown_before, shown_after = displayed_outputs(before[page]), displayed_outputs(after[page])
        page_text = page_fig = page_moved = 0
        for name in sorted(set(a) | set(b)):
            ea, eb = a.get(name, {}), b.get(name, {})
            texts = {m: _normal(t) for m, t in eb.items() if m not in IMAGE_TYPES and m != "text/plain"}
            if name not in a and texts and all(t == "" or t in shown_before for t in texts.values()):
                page_moved += 1  # a displayed output of BEFORE, now glued in its place
                shown_before = [t for t in shown_before if t not in texts.values()]
                continue
            for mime in sorted(set(ea) | set(eb)):
                is_image = mime in IMAGE_TYPES
                n_figures += is_image
                n_values += not is_image
                if _normal(ea.get(mime, "")) != _normal(eb.get(mime, "")) or (mime in ea) != (mime in eb):
                    if is_image:
                        page_fig += 1
                    else:
                        page_text += 1
                        print(f"  {page} {name} [{mime}]:\n    before: {ea.get(mime)!r:.300}\n"
                              f"    after:  {eb.get(mime)!r:.300}")
        for text in shown_before:
            if text not in shown_after:
                page_text += 1
                print(f"  {page} displayed output not in AFTER: {text!r:.300}")
        text_diffs += page_text
        figure_diffs += page_fig
        n_moved += page_moved
        print(f"{page}: {len(a)} glued values before, {len(b)} after "
              f"({page_moved} moved from displayed cells); {page_text} text differences, "
              f"{page_fig} figure differences")
    print(f"in all: {n_values} glued texts, {text_diffs} differ; "
          f"{n_moved} displayed outputs moved into glue; {n_figures} glued figures, {figure_diffs} differ")
    return 1 if text_diffs else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
