"""What the book's build computes and what it loads: for every page of the registry at its parameters cell's
defaults, whether the build computes what the page shows or loads it from the results store, and then which
stored results, computed at which commit (the intro's table).

An experiment page shows its stored results when every part is stored for its defaults (then, with
``show_largest_stored``, the largest stored run of the same experiment,
:func:`rankcollapse.book.report.largest_stored`), and computes them otherwise; a page that computes in its own
module always computes.

Used by: book/intro.md.
"""

from __future__ import annotations

import pandas as pd

from rankcollapse.book import registry
from rankcollapse.book.report import largest_stored
from rankcollapse.book.runner import page_parameters
from rankcollapse.experiments.config import stored_parameters
from rankcollapse.experiments.table import check_table
from rankcollapse.experiments.provenance import book_root
from rankcollapse.experiments.store import TABLE_SUFFIX, ResultStore, compute_seconds

COMPUTED = "computed when the book is built"


def _loaded_words(records: list[dict]) -> str:
    """The stored results a page loads, by the commit that computed them, e.g.
    ``loaded: results/fig2/84d7….csv.gz, computed at commit 35be2223a296 (5194 s)``; more than three of one
    commit are counted, not listed."""
    by_commit: dict[str, list[dict]] = {}
    for record in records:
        by_commit.setdefault(str(record.get("git_commit", "unknown"))[:12], []).append(record)
    words = []
    for commit, group in by_commit.items():
        files = [f"results/{r['page']}/{r['key']}{TABLE_SUFFIX}" for r in group]
        seconds = [compute_seconds(r) for r in group]
        what = ", ".join(files) if len(files) <= 3 else f"{len(files)} results in results/{group[0]['page']}/"
        took = (f"{seconds[0]:.0f} s" if len(seconds) == 1
                else f"{min(seconds):.0f} to {max(seconds):.0f} s each")
        words.append(f"{what}, computed at commit {commit} ({took})")
    return "loaded: " + "; ".join(words)


def page_origin(name: str, store: ResultStore | None = None) -> str:
    """Where what page ``name`` shows at its defaults comes from: :data:`COMPUTED`, or the stored results
    it loads with their commits."""
    entry = registry.page(name)
    store = store or ResultStore()
    if name not in registry.EXPERIMENT_PAGES:  # it may still read a stored part (the data page's counts)
        kept = store.entries(name) if (store.root / name).is_dir() else []
        return COMPUTED + (f"; it reads its stored parts where they exist ({_loaded_words(kept)})"
                           if kept else "")
    defaults = page_parameters(entry.path(book_root()))
    stored = {part: store.load(run.page or name, stored_parameters(run.config), check_table)
              for part, run in registry.configure(name, defaults).items()}
    if any(result is None for result in stored.values()):
        return f"{COMPUTED} (its defaults are not stored)"
    if defaults.get("show_largest_stored", False):
        stored = largest_stored(stored, store)
    return _loaded_words([r.provenance for r in stored.values()])


def origins_table(store: ResultStore | None = None) -> pd.DataFrame:
    """One row per page, in book order: page, title and where what it shows comes from
    (:func:`page_origin`)."""
    return pd.DataFrame([{"page": name, "title": entry.title, "what the build does": page_origin(name, store)}
                         for name, entry in registry.PAGES.items()])
