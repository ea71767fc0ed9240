"""The skip-connections page (book/response/skip_connections.md): SAN, SAN + skip, SAN + LayerNorm (with
and without skip) and the full transformer, shallow (both weight sources) and deep (initialized).

:func:`configure` turns the page's parameters into its two sweeps; :func:`show` is what the page shows of
them: :func:`numbers` (the values its prose states), :func:`claims` (its claims table), the figures of μ and
‖X‖_F, the scale words and the scale notes of both sweeps.

Used by: book/response/skip_connections.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from rankcollapse.book.pages._common import against, computing, curves_claim, paired_sides, times_floor
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core.checks import check_int
from rankcollapse.experiments.config import experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.experiments.sample_values import SampleValues
from rankcollapse.experiments.store import StoredResult
from rankcollapse.experiments.table import held_from, value
from rankcollapse.verdicts.claims import STABLE, Claim, effect_cell, effect_claim
from rankcollapse.verdicts.effects import growth, last_value, side
from rankcollapse.verdicts.robustness import robust

FIXED = dict(norms=("none", "model"), skips=(False, True), full_transformer=True)


def configure(parameters: dict) -> dict[str, Run]:
    """Shallow (both weight sources, ``n_layers``) and deep (initialized only, ``n_layers_deep``) sweeps."""
    own = computing(parameters, "n_layers_deep")
    deep = {k: v for k, v in own.items() if k not in ("n_layers", "weights")}
    n_layers_deep = parameters.get("n_layers_deep")  # its default: the parameters cell
    check_int("n_layers_deep", n_layers_deep, 1, 4096)
    return {"shallow": Run(experiment_config(own, **FIXED)),
            "deep": Run(experiment_config({**deep, "n_layers": n_layers_deep},
                                                      **FIXED, weights=("initialized",)))}


def page_claims(results: Mapping[str, StoredResult], parameters: dict) -> dict[str, list[Claim]]:
    """The page's claims table (``skip``), as :func:`show` shows it (no figures drawn)."""
    shallow, deep = results["shallow"], results["deep"]
    found = numbers(shallow.table, deep.table)
    return {"skip": claims(shallow.table, deep.table, found, shallow.samples, deep.samples)}


def show(results: Mapping[str, StoredResult], parameters: dict) -> Shown:
    """The page's numbers and scale (``skip_*``), claims table, the figures of μ and ‖X‖_F (shallow) and
    of μ (deep), and the scale notes of both sweeps."""
    shallow, deep = results["shallow"], results["deep"]
    found = numbers(shallow.table, deep.table)
    return Shown(values=prefixed("skip", {"scale": scale_words(shallow), **found}),
                 markdown={"skip_scale_note": scale_note(shallow) + "\n\n" + scale_note(deep)},
                 claims=page_claims(results, parameters),
                 figures=[layer_figure(shallow, "mu", "fig-skip-connections-mu"),
                          layer_figure(shallow, "norm", "fig-skip-connections-norm"),
                          layer_figure(deep, "mu", "fig-skip-connections-deep")])


def numbers(shallow: pd.DataFrame, deep: pd.DataFrame) -> dict[str, float | int]:
    """At the complete mask: token scale ‖X‖_F at the last pretrained layer per variant, and μ over its
    floor after the deep stack."""
    pre = dict(weights="pretrained")

    def labels(norm: str, skip: bool) -> dict:
        return dict(weights="initialized", variant="SAN", mask="complete", norm=norm, skip=skip)

    def over_floor(norm: str, skip: bool) -> float:
        return value(deep, "mu", **labels(norm, skip)) / value(deep, "floor", **labels(norm, skip))

    return {
        "ln_scale": value(shallow, "norm", variant="SAN", mask="complete", norm="model", skip=True, **pre),
        "skip_scale": value(shallow, "norm", variant="SAN", mask="complete", norm="none", skip=True, **pre),
        "full_scale": value(shallow, "norm", variant="full transformer", **pre),
        "deep_pure_over_floor": over_floor("none", False),
        "deep_ln_over_floor": over_floor("model", False),
        "deep_skip_over_floor": over_floor("none", True),
        "deep_ln_skip_over_floor": over_floor("model", True),
        **{f"deep_{name}_floor_words": times_floor(over_floor(norm, skip),
                                                   held_from(deep, **labels(norm, skip)))
           for name, norm, skip in (("pure", "none", False), ("ln", "model", False), ("skip", "none", True),
                                    ("ln_skip", "model", True))},
        "n_layers_deep": int(deep["layer"].max()),
    }


def claims(shallow: pd.DataFrame, deep: pd.DataFrame, found: dict,
           shallow_samples: SampleValues | None = None,
           deep_samples: SampleValues | None = None) -> list[Claim]:
    """The response (W1) on skip connections and LayerNorm: the curve verdicts of the deep initialized stacks,
    each against its baseline without the component (an effect per mask, with its interval when the result
    kept per-sample values), μ's own growth in the deep skip stacks, and the scale of the pretrained tokens
    against the full transformer's. Medians over samples; robust or not over the thresholds' grid."""
    deep_layers = f"{found['n_layers_deep']} initialized layers"
    init = dict(weights="initialized", variant="SAN")
    pure = dict(init, norm="none", skip=False)
    rows = [curves_claim("Pure skip connections prevent μ → 0", "response W1",
                         f"{deep_layers}, SAN + skip", deep, STABLE, "masks keep μ/‖X‖_F",
                         **init, norm="none", skip=True),
            against("... skip slows the collapse of μ against no skip", "response W1",
                    f"{deep_layers}, SAN + skip: late per-layer factor of μ over SAN's (the baseline)",
                    paired_sides(deep, deep_samples, dict(init, norm="none", skip=True), pure,
                                 ("SAN + skip", "SAN"), metric="mu"))]
    for metric, what in (("mu", "μ"), ("norm", "‖X‖_F")):
        sides = paired_sides(deep, deep_samples, dict(init, norm="none", skip=True), pure,
                             ("SAN + skip", "SAN"), metric)
        rows.append(robust(lambda t, sides=sides, what=what: effect_claim(
            "... but make μ unstable in deep layers", "response W1",
            f"deep initialized SAN + skip, {what}: growth over the last half of the layers",
            [effect_cell(m, growth(pair[0], what), +1, t) for m, pair in sides.items()])))
    for norm_skip, words in ((False, "SAN + LayerNorm"), (True, "SAN + LayerNorm + skip")):
        claim = "LayerNorm alone prevents collapse at initialization" if not norm_skip else \
            "LayerNorm + skip keeps μ away from 0"
        rows.append(curves_claim(claim, "response W1", f"{deep_layers}, {words}", deep, STABLE,
                                 "masks keep μ/‖X‖_F", **init, norm="model", skip=norm_skip))
        rows.append(against(f"... {words} slows collapse against {'SAN' if not norm_skip else 'SAN + skip'}",
                            "response W1", f"{deep_layers}, {words}: late per-layer factor of μ/‖X‖_F "
                            f"over {'SAN' if not norm_skip else 'SAN + skip'}'s (the baseline)",
                            paired_sides(deep, deep_samples, dict(init, norm="model", skip=norm_skip),
                                         dict(init, norm="none", skip=norm_skip),
                                         (words, "SAN" if not norm_skip else "SAN + skip"))))
    rows.append(_scale_claim(shallow, shallow_samples))
    return rows


def _scale_claim(shallow: pd.DataFrame, samples: SampleValues | None) -> Claim:
    """"LayerNorm keeps the tokens at the scale of the full transformer": ‖X‖_F of SAN + LN + skip (and of
    SAN + skip) over the full transformer's at the last pretrained layer, complete mask; holds when the
    interval lies within SAME_SCALE of 1."""
    full = side(shallow, samples, "the full transformer", "norm", weights="pretrained",
                variant="full transformer")
    sides = {words: side(shallow, samples, words, "norm", weights="pretrained", variant="SAN",
                         mask="complete", norm=norm, skip=True)
             for words, norm in (("SAN + LN + skip", "model"), ("SAN + skip", "none"))}
    effects = {words: last_value(s, full, "‖X‖_F") for words, s in sides.items()}
    return robust(lambda t: effect_claim(
        "In pretrained models LayerNorm keeps the tokens at the scale of the full transformer", "response W1",
        f"complete mask, last pretrained layer: ‖X‖_F of SAN + LN + skip over the full transformer's "
        f"(SAN + skip for comparison: {effects['SAN + skip'].text})",
        [effect_cell("complete", effects["SAN + LN + skip"], 0, t)]))
