"""The sample-size page (book/response/sample_size.md): Fig. 2's sweep on the first ``n_samples_small``
samples and on all ``n_samples`` (the response: 32 against 3000), stored as Fig. 2's own runs.

:func:`configure` turns the page's parameters into the two sweeps; :func:`show` is what the page shows of
them: :func:`pair` joins their tables, :func:`numbers` are the values its prose states, :func:`claims` its
claims table (:func:`finding_clauses` the clauses of its finding), the μ figure of both samples and the
ratio figure of their means (:func:`mean_ratio_result`), the scale words and the scale note.

Used by: book/response/sample_size.md (through the page registry, :mod:`rankcollapse.book.registry`),
:mod:`rankcollapse.book.pages.reviewers` (its sample-size row), tests/unit/test_report.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pandas as pd

from rankcollapse.book.pages._common import FIG2, computing, verdict_clause
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.table import STATISTICS
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import FAILS, HOLDS, PARTLY, Claim

FIXED = FIG2  # Fig. 2's very sweeps
_CURVE = ["weights", "variant", "mask", "window", "temperature", "norm", "skip"]  # one configuration's labels


def configure(parameters: dict) -> dict[str, Run]:
    """Fig. 2's sweep on the first ``n_samples_small`` samples and on all ``n_samples`` (the first k samples
    of a larger draw are the draw of k, so the small sample is part of the large one), stored as Fig. 2's."""
    large = experiment_config(computing(parameters, "n_samples_small"), **FIXED)
    small = parameters.get("n_samples_small")  # its default: the parameters cell
    check_int("n_samples_small", small, 1, large.n_samples - 1)
    return {"large": Run(large, "fig2"), "small": Run(replace(large, n_samples=small), "fig2")}


def page_claims(results: Mapping[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``sample_size``), as :func:`show` shows it (no figures drawn)."""
    return {"sample_size": claims(numbers(pair(results).table))}


def show(results: Mapping[str, StoredResult], parameters: dict) -> Shown:
    """The page's numbers and scale (``sample_size_*``), the clauses of its finding (:func:`finding_clauses`),
    claims table, the μ figure of both samples, the ratio figure of their means and the scale note."""
    result = pair(results)
    found = numbers(result.table)
    tables = page_claims(results, parameters)
    return Shown(values=prefixed("sample_size", {"scale": scale_words(result), **found,
                                                 **finding_clauses(found, tables["sample_size"])}),
                 markdown={"sample_size_scale_note": scale_note(result)}, claims=tables,
                 figures=[layer_figure(result, "mu", "fig-sample-size-mu", hue="n_samples"),
                          layer_figure(mean_ratio_result(result), "mean_ratio", "fig-sample-size-ratio",
                                       ratio=True)])


def pair(results: Mapping[str, StoredResult]) -> StoredResult:
    """The page's one result: the ``large`` run with the ``small`` run's rows added (column ``n_samples``
    tells them apart); provenance and file are the large run's."""
    large, small = results["large"], results["small"]
    return replace(large, table=pd.concat([small.table, large.table], ignore_index=True))


def _sample_pivot(table: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """μ's mean, median and band width (q90 / q10) per curve and layer >= 1, one column per sample count,
    and the two sample counts (small, large)."""
    mu = table[(table["metric"] == "mu") & (table["layer"] >= 1)].copy()
    mu["width"] = mu["q90"] / mu["q10"]
    pivot = mu.pivot_table(index=[*_CURVE, "layer"], columns="n_samples", values=["mean", "median", "width"],
                           dropna=False).dropna(how="all")
    small, large = sorted(set(table["n_samples"]))
    return pivot, int(small), int(large)


def mean_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Per curve and layer, the mean of μ over the small sample divided by its mean over the large one, as
    a tidy table with metric ``mean_ratio`` (every statistic column holds the ratio: a line, no band)."""
    pivot, small, large = _sample_pivot(table)
    ratios = (pivot["mean"][small] / pivot["mean"][large]).rename("ratio").reset_index()
    return ratios.assign(metric="mean_ratio", n_samples=large, **{s: ratios["ratio"] for s in STATISTICS}) \
        .drop(columns="ratio")


def mean_ratio_result(joined: StoredResult) -> StoredResult:
    """The joined result (:func:`pair`) with its table replaced by :func:`mean_ratios`, for the ratio
    figure."""
    return replace(joined, table=mean_ratios(joined.table))


def numbers(table: pd.DataFrame) -> dict[str, float | int]:
    """How far the small sample's summaries move from the large sample's, over every curve and layer:
    the factor (>= 1) between their means and between their medians, and the ratio of band widths."""
    pivot, small, large = _sample_pivot(table)

    def factor(stat: str) -> pd.Series:
        ratio = pivot[stat][small] / pivot[stat][large]
        return np.maximum(ratio, 1 / ratio)

    return {"small": int(small), "large": int(large), "max_mean_ratio": float(factor("mean").max()),
            "median_mean_ratio": float(factor("mean").median()),
            "max_median_ratio": float(factor("median").max()),
            "worst_layer": int(factor("mean").idxmax()[-1]),
            "band_ratio": float((pivot["width"][large] / pivot["width"][small]).median())}


def claims(found: dict) -> list[Claim]:
    """The response: with 3000 samples the results "are still similar to the original results"."""
    ratio = found["max_median_ratio"]
    return [Claim("Results on the large sample are similar to those on the small one",
                  "the response (sample size)",
                  f"largest factor between the medians over {found['small']} and {found['large']} samples, "
                  "any curve and layer", HOLDS if ratio < 2 else PARTLY if ratio < 10 else FAILS,
                  f"{ratio:.3g}×")]


def finding_clauses(found: dict, rows: list[Claim]) -> dict[str, str]:
    """The page's finding as the clauses its first paragraph pastes: the claim's verdict and number
    (``finding``), and how far the mean moves against the median (``finding_mean``, :func:`numbers`)."""
    mean, median = found["max_mean_ratio"], found["max_median_ratio"]
    more = "more than" if mean > median else "no more than"
    return {"finding": verdict_clause(rows[0]),
            "finding_mean": f"the mean moves {more} the median, by up to a factor {mean:.3g}"}
