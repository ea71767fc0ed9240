"""The decoder pages of "Beyond the paper": an RMSNorm decoder (SmolLM2) under its own causal mask and under
uni-directional windows, and a real sliding-window model (Gemma-3) with its windows kept, dropped or imposed
on every layer.

One sweep per mask (its window is one value of :class:`rankcollapse.experiments.config.ExperimentConfig`), all on
the same X(0) and the same weights. The causal sweep adds the Hugging Face forward of the whole model
(hooks), the reference the SAN variants are read against. Norms: none (pure attention), ``rms`` (RMSNorm
without gain: the paper's LayerNorm without centring) and ``model`` (each layer's own trained
``input_layernorm``, in pre position, for the pretrained weights; a fresh LayerNorm for initialized ones).

:func:`rate_table` gives each configuration's curve verdict (:func:`rankcollapse.verdicts.rules.table_verdicts`),
its mean rate per layer (:func:`rankcollapse.verdicts.claims.mean_rate`) and its mask's radius.

The sliding-window page (:func:`window_configure`) runs the pretrained attention sublayers only, on
sequences longer than the window (``overlap="concatenated"``: leads of consecutive articles, joined, see
:mod:`rankcollapse.experiments.data`), with pure attention and with the model's own norms, with and without the skip.

Used by: book/beyond/rmsnorm_decoders.md, book/beyond/sliding_window_model.md (through the page registry),
tests/unit/test_decoders.py.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from rankcollapse.experiments import config as experiments
from rankcollapse.verdicts import rules as verdicts
from rankcollapse.verdicts.claims import mean_rate
from rankcollapse.core import masks as rc_masks
from rankcollapse.core.checks import check_int, check_ints
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.store import StoredResult

FIXED = dict(norms=("none", "rms", "model"), skips=(False, True))  # the comparisons the page is about
RATE_COLUMNS = ("weights", "variant", "mask", "radius", "norm", "skip", "verdict", "mean rate", "late rate")
CAUSAL = "causal"  # the part of the model's own mask (with the full transformer)


def window_part(window: int) -> str:
    """The result part of the uni-directional window of size ``window``, e.g. ``causal_sliding_window-w4``."""
    return f"causal_sliding_window-w{window}"


def configure(parameters: dict) -> dict[str, Run]:
    """``configure`` of the page: the causal sweep (with the full transformer) and one sweep per window of
    ``windows`` (sizes of the uni-directional window, each below ``n_tokens``), the reader's other parameters
    for all. A window the sequence cannot hold is rejected here, before anything runs."""
    own = {k: v for k, v in parameters.items() if k not in ("show_largest_stored", "windows")}
    windows = parameters.get("windows")
    windows = tuple(windows) if isinstance(windows, list) else windows
    check_ints("windows", windows, 1, int(own.get("n_tokens", 2)) - 1)
    runs = {CAUSAL: Run(experiments.experiment_config(own, masks=(CAUSAL,), full_transformer=True, **FIXED))}
    for w in windows:
        runs[window_part(w)] = Run(experiments.experiment_config(own, masks=("causal_sliding_window",), window=w,
                                                                 **FIXED))
    return runs


def rate_table(results: Mapping[str, StoredResult]) -> pd.DataFrame:
    """One row per configuration of every part: its ``part`` (the key of ``results``), weights, variant,
    mask (with its window), norm, skip, the mask's radius at the run's ``n_tokens``, the curve verdict of
    μ/‖X‖_F (median over samples), its ``mean rate`` per layer, its ``late rate`` and ``words``; ``curve``
    keeps the CurveVerdict.

    Shapes: ``results`` part -> result, as :func:`configure` names them.
    """
    frames = []
    for part, result in results.items():
        n_tokens = result.provenance["parameters"]["n_tokens"]
        curves = verdicts.table_verdicts(result.table)
        curves.insert(0, "part", part)
        window = curves["window"].map(lambda w: None if pd.isna(w) else int(w))
        curves["radius"] = pd.array([None if m == "model" else rc_masks.graph_radius(rc_masks.build_mask(m, n_tokens, w))
                                     for m, w in zip(curves["mask"], window)], dtype="Int64")
        curves["mask"] = [m if w is None else f"{m} {w}" for m, w in zip(curves["mask"], window)]
        curves["mean rate"] = curves["curve"].map(mean_rate)
        curves = curves.rename(columns={"rate": "late rate"})
        frames.append(curves)
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------- a real sliding-window model (Gemma-3)

WINDOW_PARTS = ("as_trained", "all_global", "all_local")  # the model's own windows, none, every layer local
WINDOW_FIXED = dict(weights=("pretrained",), norms=("none", "model"), skips=(False, True))


def window_configure(parameters: dict) -> dict[str, Run]:
    """``configure`` of the sliding-window page: the pretrained model under its causal mask with its own
    windows (as trained, with the full transformer), without them (all global) and with a uni-directional
    window of size ``window`` imposed on every layer (all local). ``n_tokens`` must exceed ``window``, so
    that the window binds; checked here, before anything runs."""
    own = {k: v for k, v in parameters.items() if k != "show_largest_stored"}
    window = own.pop("window", None)
    check_int("window", window, 1, experiments.MAX_TOKENS - 1)
    check_int("n_tokens", own.get("n_tokens"), window + 1, experiments.MAX_TOKENS)
    causal = dict(masks=(CAUSAL,), **WINDOW_FIXED)
    return {"as_trained": Run(experiments.experiment_config(own, full_transformer=True, **causal)),
            "all_global": Run(experiments.experiment_config(own, model_windows=False, **causal)),
            "all_local": Run(experiments.experiment_config(own, masks=("causal_sliding_window",), window=window,
                                                           **{k: v for k, v in causal.items() if k != "masks"}))}
