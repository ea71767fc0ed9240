"""The reviewers page's "is 32 samples enough" pair (book.pages._reviewers_sweeps.sample_pair): Fig. 2's
stored run joined with the stored run of the same parameters on its first 32 samples, read back from results/;
and its figure's ratios against the two stored tables read independently."""

import json

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd

from rankcollapse.book.pages import _reviewers_sweeps as page
from rankcollapse.book.plotting import reviewers as figures
from rankcollapse.experiments.table import check_table
from rankcollapse.experiments.store import ResultStore


def _stored(repo_root, n_samples: int, model: str):
    """The stored Fig. 2 run of ``model`` on ``n_samples`` samples (the only one in results/fig2)."""
    for record in sorted((repo_root / "results" / "fig2").glob("*.json")):
        parameters = json.loads(record.read_text())["parameters"]
        if parameters["n_samples"] == n_samples and parameters["model"] == model:
            return ResultStore(repo_root / "results").load("fig2", parameters, check_table)
    raise LookupError(n_samples)


def _last_mu(table: pd.DataFrame) -> float:
    """The median of mu at layer 12 of the initialized causal mask without a norm."""
    rows = table[(table["metric"] == "mu") & (table["layer"] == 12) & (table["mask"] == "causal")
                 & (table["norm"] == "none") & (table["weights"] == "initialized")]
    return float(rows["median"].item())


def test_pair_joins_the_stored_32_sample_run(repo_root):
    large = _stored(repo_root, 3000, "pkg:mpnet")
    small = _stored(repo_root, page.PAPER_SAMPLES, "pkg:mpnet")
    joined = page.sample_pair(large, ResultStore(repo_root / "results"))
    assert sorted(set(joined.table["n_samples"])) == [page.PAPER_SAMPLES, 3000]
    rows = joined.table[joined.table["n_samples"] == page.PAPER_SAMPLES].reset_index(drop=True)
    pd.testing.assert_frame_equal(rows, small.table.reset_index(drop=True), check_dtype=False)
    ax = figures.sample_size_figure(joined.table, page.PAPER_SAMPLES).axes[0]
    drawn = [line for line in ax.get_lines() if len(line.get_xdata()) == 12]
    assert np.isclose(_last_mu(small.table) / _last_mu(large.table),
                      [line.get_ydata()[-1] for line in drawn]).any()


def test_pair_is_none_without_more_samples_or_a_stored_run(repo_root, tmp_path):
    assert page.sample_pair(_stored(repo_root, 16, "pkg:minilm"), ResultStore(repo_root / "results")) is None
    assert page.sample_pair(_stored(repo_root, 3000, "pkg:mpnet"), ResultStore(tmp_path)) is None
