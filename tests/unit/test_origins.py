"""The intro's table of what the build computes and what it loads, read from the registry and the store."""

import pandas as pd

from rankcollapse.book import origins
from rankcollapse.book import registry
from rankcollapse.book.runner import page_parameters
from rankcollapse.experiments.config import stored_parameters
from rankcollapse.experiments.table import STATISTICS, TABLE_COLUMNS
from rankcollapse.experiments.provenance import book_root
from rankcollapse.experiments.store import ResultStore


def _save(store: ResultStore, page: str, config, commit: str, seconds: float) -> None:
    """A stored result of ``config``: one row per configuration (what check_table asks) and a commit."""
    rows = [dict(weights=w, variant="SAN", mask=m, window=config.window, temperature=t, norm=n, skip=s,
                 layer=0, metric="mu", **{k: 1.0 for k in STATISTICS}, n_samples=config.n_samples)
            for w in config.weights for m in config.masks for t in config.temperatures for n in config.norms
            for s in config.skips]
    store.save(page, stored_parameters(config), pd.DataFrame(rows, columns=list(TABLE_COLUMNS)),
               {"git_commit": commit, "compute_time_s": seconds})


def test_a_page_loads_what_is_stored_for_its_defaults_and_names_the_commit(tmp_path):
    store = ResultStore(tmp_path)
    assert origins.page_origin("theorem1", store) == origins.COMPUTED
    assert origins.page_origin("fig3", store) == f"{origins.COMPUTED} (its defaults are not stored)"
    defaults = page_parameters(registry.page("fig3").path(book_root()))
    runs = registry.configure("fig3", defaults)  # its main sweep and its weight seeds' parts
    for run, seconds in zip(runs.values(), range(100, 100 + len(runs))):
        _save(store, "fig3", run.config, "67f324776d9ae82e", seconds)
    assert origins.page_origin("fig3", store) == (
        f"loaded: {len(runs)} results in results/fig3/, computed at commit 67f324776d9a "
        f"(100 to {99 + len(runs)} s each)")
    table = origins.origins_table(store)
    assert list(table["page"]) == list(registry.PAGES)
    assert table.set_index("page").loc["fig2"].iloc[-1].startswith(origins.COMPUTED)
