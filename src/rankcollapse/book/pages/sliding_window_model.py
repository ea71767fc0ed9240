"""The sliding-window-model page (book/beyond/sliding_window_model.md): a real sliding-window model
(Gemma-3) with its windows kept (as trained), dropped (all global) or imposed on every layer (all local).

It runs the pretrained attention sublayers only, on sequences longer than the window
(``overlap="concatenated"``: leads of consecutive articles, joined, see :mod:`rankcollapse.experiments.data`),
with pure attention and with the model's own norms, with and without the skip. :func:`configure` turns the
page's parameters into the three sweeps, :func:`rankcollapse.book.pages._common.rate_table` (shared with the
RMSNorm page) reads them; :func:`numbers` are the values its prose states, :func:`claims` its claims table;
:func:`show` is what the page shows: those, the rate table, the as-trained run's layer figure and its scale.

Used by: book/beyond/sliding_window_model.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_decoders.py.
"""

from __future__ import annotations



from rankcollapse.book.pages._common import (CAUSAL, RATE_COLUMNS, against, computing, curves_claim,
                                             part_sides, rate_table, stops_claim, verdict_words)
from rankcollapse.book.plotting.beyond import SortableTable
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import MAX_TOKENS, experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import Claim

_PARTS = ("as_trained", "all_global", "all_local")  # the model's own windows, none, every layer local
_SWEEP = dict(weights=("pretrained",), norms=("none", "model"), skips=(False, True))
FIXED = {"parts": _PARTS, **_SWEEP}


def configure(parameters: dict) -> dict[str, Run]:
    """``configure`` of the page: the pretrained model under its causal mask with its own windows (as
    trained, with the full transformer), without them (all global) and with a uni-directional window of
    size ``window`` imposed on every layer (all local). ``n_tokens`` must exceed ``window``, so that the
    window binds; checked here, before anything runs."""
    own = computing(parameters)
    window = own.pop("window", None)
    check_int("window", window, 1, MAX_TOKENS - 1)
    check_int("n_tokens", own.get("n_tokens"), window + 1, MAX_TOKENS)
    causal = dict(masks=(CAUSAL,), **_SWEEP)
    return {"as_trained": Run(experiment_config(own, full_transformer=True, **causal)),
            "all_global": Run(experiment_config(own, model_windows=False, **causal)),
            "all_local": Run(experiment_config(own, masks=("causal_sliding_window",), window=window,
                                               **{k: v for k, v in causal.items() if k != "masks"}))}


def page_claims(results: dict[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``sliding_window_model``), as :func:`show` shows it (no figures drawn)."""
    return {"sliding_window_model": claims(results)}


def show(results: dict[str, StoredResult], parameters: dict) -> Shown:
    """The as-trained run's scale and :func:`numbers` (``sliding_window_model_*``), the claims table, its
    scale note, the sortable rate table (``sliding_window_model_table``: one row per configuration of the
    three runs, their part and RATE_COLUMNS) and its layer figure of μ/‖X‖_F."""
    result = results["as_trained"]
    rates = rate_table(results)
    rows = page_claims(results, parameters)["sliding_window_model"]
    return Shown(values=prefixed("sliding_window_model", {"scale": scale_words(result), **numbers(result),
                                                          "finding": verdict_words(rows)}),
                 markdown={"sliding_window_model_scale_note": scale_note(result)},
                 claims={"sliding_window_model": rows},
                 tables={"sliding_window_model_table": SortableTable(rates[["part", *RATE_COLUMNS]])},
                 figures=[layer_figure(result, "relative_mu", "fig-sliding-window-model-relative",
                                       panel_titles={CAUSAL: "causal, with its own windows (as trained)"})])


def numbers(result: StoredResult) -> dict[str, int]:
    """How many samples of the page's length the corpus holds (the as-trained run's provenance)."""
    return {"available": result.provenance["samples_available"]}


def claims(results: dict[str, StoredResult]) -> list[Claim]:
    """Does a local window slow collapse in a trained sliding-window model? Pure attention's verdict per run;
    the all-local and as-trained runs against the all-global one (the baseline) as late per-layer factors,
    for pure attention and for the model's own norms + skip; the norms + skip against pure attention (stops
    the collapse; slows it); robust or not over the thresholds' grid. One cell per part: ``as_trained``,
    ``all_global``, ``all_local``."""
    setting = "pretrained Gemma-3 (4-bit weights, dequantized)"
    base = dict(weights="pretrained", variant="SAN")
    pure = part_sides(results, "pure attention", norm="none", skip=False, **base)
    kept = part_sides(results, "SAN + skip + its own norms", norm="model", skip=True, **base)
    rows = [curves_claim("Pure masked attention collapses exponentially", "the paper: Fig. 2, Theorem 1",
                         "pure attention: per-layer factor of μ/‖X‖_F as trained, all global, all local",
                         pure, setting=setting)]
    for own, words in ((pure, "pure attention"), (kept, "SAN + skip + its own norms")):
        rows.append(against("Local (sliding-window) masks slow collapse",
                            "the paper: Theorem 1; the response",
                            f"{words}: late per-layer factor of μ/‖X‖_F, all local and as trained over all "
                            "global",
                            {p: (own[p], own["all_global"]) for p in ("all_local", "as_trained") if p in own},
                            setting=setting))
    pairs = {p: (kept[p], pure[p]) for p in kept}
    rows.append(stops_claim("In pretrained models LayerNorm helps, together with the other components",
                            "the paper: Fig. 2", "SAN + skip + its own norms against pure attention on the "
                            "same weights", pairs, setting=setting))
    rows.append(against("... its own norms + skip slow collapse against pure attention", "the paper: Fig. 2",
                        "SAN + skip + its own norms: late per-layer factor of μ/‖X‖_F over pure attention's",
                        pairs, setting=setting))
    return rows
