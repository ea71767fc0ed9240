"""The pretrained-panels page (book/response/pretrained_panels.md): Fig. 2's and Fig. 3's own runs with
the weights named in every panel (the response's corrected pretrained panels).

:func:`configure` turns the page's parameters into the two sweeps (stored as the Fig. 2 and Fig. 3 pages'
own); :func:`show` is what the page shows of them: :func:`numbers` (the values its prose states, which it
checks: the pretrained row is not the initialized row), the four layer figures, the scale words and note, and
:func:`claims`, its claims table (the response's claim on the pretrained temperature panels,
:func:`rankcollapse.book.pages._common.pretrained_layers_claim`).

Used by: book/response/pretrained_panels.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from rankcollapse.book.pages._common import FIG2, FIG3, fig2_and_fig3, pretrained_layers_claim, verdict_words
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.experiments.sample_values import SampleValues
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import Claim

FIXED = {"fig2": FIG2, "fig3": FIG3}
configure = fig2_and_fig3(stored_as_figures=True)


def page_claims(results: dict, parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``panels``), as :func:`show` shows it (no figures drawn)."""
    return {"panels": claims(results["fig3"].table, results["fig3"].samples)}


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scale (``panels_*``), claims table, the figures of μ and μ/‖X‖_F of both
    sweeps with the weights named, and the scale note; asserts that the pretrained row is not the
    initialized one."""
    fig2, fig3 = results["fig2"], results["fig3"]
    gaps = numbers(fig2.table, fig3.table)
    # The point of the correction: the pretrained row is not the initialized row.
    assert min(gaps.values()) > 1.01
    fig2_pre, fig3_pre = _pretrained(fig2), _pretrained(fig3)  # the corrected panels: pretrained weights only
    figures = [layer_figure(fig2_pre, "mu", "fig-pretrained-panels-fig2"),
               layer_figure(fig2_pre, "relative_mu", "fig-pretrained-panels-fig2-relative"),
               layer_figure(fig3_pre, "mu", "fig-pretrained-panels-fig3", hue="temperature"),
               layer_figure(fig3_pre, "relative_mu", "fig-pretrained-panels-fig3-relative",
                            hue="temperature")]
    rows = page_claims(results, parameters)["panels"]
    return Shown(values=prefixed("panels", {"scale": scale_words(fig2), **gaps,
                                            "finding": verdict_words(rows)}),
                 markdown={"panels_scale_note": scale_note(fig2)},
                 claims={"panels": rows}, figures=figures)


def _pretrained(result: StoredResult) -> StoredResult:
    """The result with its pretrained rows only: the panels the response corrected, without the initialized
    rows Fig. 2 and Fig. 3 show beside them."""
    return replace(result, table=result.table[result.table["weights"] == "pretrained"])


def _weights_gap(table: pd.DataFrame, hue: str) -> float:
    """Median factor (>= 1) between pretrained and initialized μ (medians over samples) after one layer, over
    masks and ``hue``."""
    first = table[(table["metric"] == "mu") & (table["layer"] == 1) & (table["variant"] == "SAN")]
    by_weights = first.pivot_table(index=["mask", hue], columns="weights", values="median")
    ratio = by_weights["pretrained"] / by_weights["initialized"]
    return float(np.maximum(ratio, 1 / ratio).median())


def numbers(fig2_table: pd.DataFrame, fig3_table: pd.DataFrame) -> dict[str, float]:
    """How far the pretrained row lies from the initialized row after one layer (:func:`_weights_gap`), in
    the Fig. 2 panels (over masks and norms) and in the Fig. 3 panels (over masks and temperatures)."""
    return {"gap_fig2": _weights_gap(fig2_table, "norm"), "gap_fig3": _weights_gap(fig3_table, "temperature")}


def claims(fig3_table: pd.DataFrame, samples: SampleValues | None = None) -> list[Claim]:
    """The response (W2): corrected pretrained panels show the temperature's effect in all layers (against the
    largest temperature, per mask; ``samples``: the Fig. 3 result's per-sample values, for intervals)."""
    return [pretrained_layers_claim(fig3_table, samples)]
