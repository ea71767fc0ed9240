"""The table of every stored result that book/reproduce.md shows: one row per result of the store
(:class:`rankcollapse.experiments.store.ResultStore`, each verified as it is listed), with the settings that
tell results of one page apart.

Used by: book/reproduce.md, tests/unit/test_summary_table.py, tests/unit/test_results.py.
"""

from __future__ import annotations

import json

import pandas as pd

from rankcollapse.experiments.store import ResultStore, compute_seconds


_SCALE = ("n_samples", "n_tokens", "n_layers")  # a run's scale, in the order the table shows and sorts it
COLUMNS = ["page", "result", "scale", "model", "settings", "ran on", "compute time (s)", "commit"]


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
    and dtype), compute time (s) (:func:`compute_seconds`), commit. Rows sorted by page, then scale (samples,
    tokens, layers, as numbers), model and settings. Used by book/reproduce.md.
    """
    store = store or ResultStore()
    shown = {*_SCALE, "model"}
    rows, order = [], []
    for page in store.pages():
        entries = store.entries(page)
        names = sorted({name for r in entries for name in r["parameters"]} - shown)
        differ = [n for n in names if len({json.dumps(r["parameters"].get(n)) for r in entries}) > 1]
        for r in entries:
            p = r["parameters"]
            settings = "; ".join(f"{n}: {_setting_words(p.get(n))}" for n in differ)
            scale = "×".join(str(p[n]) for n in _SCALE if p.get(n) is not None)
            rows.append({"page": page, "result": r["key"], "scale": scale or "–",
                         "model": p.get("model"), "settings": settings or "–",
                         "ran on": ", ".join(str(v) for v in (r.get("hardware"), r.get("dtype"))
                                             if v is not None),
                         "compute time (s)": compute_seconds(r), "commit": str(r.get("git_commit", ""))[:8]})
            order.append((page, *(p.get(n) or 0 for n in _SCALE), str(p.get("model")), settings))
    return pd.DataFrame([rows[i] for i in sorted(range(len(rows)), key=order.__getitem__)],
                        columns=COLUMNS)


def summary_by_page(table: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """:func:`summary_table`'s rows page by page, for a compact listing: ``(page, words, rows)`` with words
    such as "3 results, 16×32×12 to 3000×128×12" and the rows without the page and key columns.

    >>> table = pd.DataFrame({"page": ["a", "a", "b"], "result": ["k1", "k2", "k3"],
    ...                       "scale": ["8×32×12", "256×128×12", "128"]})
    >>> [(page, words, list(rows.columns)) for page, words, rows in summary_by_page(table)]
    [('a', '2 results, 8×32×12 to 256×128×12', ['scale']), ('b', '1 result, 128', ['scale'])]
    """
    groups = []
    for page, rows in table.groupby("page", sort=False):
        scales = rows["scale"].tolist()
        span = scales[0] if len(set(scales)) == 1 else f"{scales[0]} to {scales[-1]}"
        words = f"{len(rows)} result{'s' if len(rows) > 1 else ''}, {span}"
        groups.append((str(page), words, rows.drop(columns=["page", "result"])))
    return groups
