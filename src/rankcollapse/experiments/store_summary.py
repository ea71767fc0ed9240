"""The table of every stored result that book/reproduce.md shows: one row per result of the store
(:class:`rankcollapse.experiments.store.ResultStore`, each verified as it is listed), with the settings that
tell results of one page apart.

Used by: book/reproduce.md, tests/unit/test_summary_table.py, tests/unit/test_results.py.
"""

from __future__ import annotations

import json

import pandas as pd

from rankcollapse.experiments.store import ResultStore, compute_seconds


def _setting_words(value: object) -> str:
    """A stored setting in a table cell: lists joined, ``None`` (a parameter's default, e.g. a layer's own
    temperature) as "default".

    >>> _setting_words([None, 1.0]), _setting_words(None), _setting_words("disjoint")
    ('default, 1.0', 'default', 'disjoint')
    """
    if isinstance(value, list):
        return ", ".join(_setting_words(v) for v in value)
    return "default" if value is None else str(value)


def summary_table(store: ResultStore | None = None) -> pd.DataFrame:
    """One row per stored result: page, scale, model, the settings that tell it apart, where and how
    long it ran.

    ``settings`` lists the parameters (other than scale and model) whose values differ between the stored
    results of the same page, so two runs of one page at one scale never show as identical rows. Columns:
    page, result (the key), scale (samples×tokens×layers, those a page has), model, settings, ran on (hardware
    and dtype), compute time (s) (:func:`compute_seconds`), commit. Used by book/reproduce.md.
    """
    store = store or ResultStore()
    pages = sorted(p.name for p in store.root.iterdir() if p.is_dir()) if store.root.is_dir() else []
    shown = {"n_samples", "n_tokens", "n_layers", "model"}
    rows = []
    for page in pages:
        entries = store.entries(page)
        names = sorted({name for r in entries for name in r["parameters"]} - shown)
        differ = [n for n in names if len({json.dumps(r["parameters"].get(n)) for r in entries}) > 1]
        for r in entries:
            p = r["parameters"]
            settings = "; ".join(f"{n}: {_setting_words(p.get(n))}" for n in differ)
            scale = "×".join(str(p[n]) for n in ("n_samples", "n_tokens", "n_layers")
                             if p.get(n) is not None)
            rows.append({"page": page, "result": r["key"], "scale": scale or "–",
                         "model": p.get("model"), "settings": settings or "–",
                         "ran on": ", ".join(str(v) for v in (r.get("hardware"), r.get("dtype"))
                                             if v is not None),
                         "compute time (s)": compute_seconds(r), "commit": str(r.get("git_commit", ""))[:8]})
    return pd.DataFrame(rows)
