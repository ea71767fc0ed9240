"""The skip-connections page (book/response/skip_connections.md): SAN, SAN + skip, SAN + LayerNorm (with
and without skip) and the full transformer, shallow (both weight sources) and deep (initialized).

:func:`configure` turns the page's parameters into its two sweeps; :func:`numbers` are the values its prose
states, :func:`claims` its claims table.

Used by: book/response/skip_connections.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.book.pages._common import computing, times_floor
from rankcollapse.core.checks import check_int
from rankcollapse.experiments import config as experiments
from rankcollapse.experiments.config import Run, value
from rankcollapse.verdicts.claims import FAILS, HOLDS, STABLE, Claim, count_curves, select_curves

FIXED = dict(norms=("none", "model"), skips=(False, True), full_transformer=True)


def configure(parameters: dict) -> dict[str, Run]:
    """Shallow (both weight sources, ``n_layers``) and deep (initialized only, ``n_layers_deep``) sweeps."""
    own = computing(parameters, "n_layers_deep")
    deep = {k: v for k, v in own.items() if k not in ("n_layers", "weights")}
    n_layers_deep = parameters.get("n_layers_deep")  # its default: the parameters cell
    check_int("n_layers_deep", n_layers_deep, 1, 4096)
    return {"shallow": Run(experiments.experiment_config(own, **FIXED)),
            "deep": Run(experiments.experiment_config({**deep, "n_layers": n_layers_deep},
                                                      **FIXED, weights=("initialized",)))}


def numbers(shallow: pd.DataFrame, deep: pd.DataFrame) -> dict[str, float | int]:
    """At the complete mask: token scale ‖X‖_F at the last pretrained layer per variant, and μ over its
    floor after the deep stack."""
    pre = dict(weights="pretrained")

    def over_floor(norm: str, skip: bool) -> float:
        labels = dict(weights="initialized", variant="SAN", mask="complete", norm=norm, skip=skip)
        return value(deep, "mu", **labels) / value(deep, "floor", **labels)

    return {
        "ln_scale": value(shallow, "norm", variant="SAN", mask="complete", norm="model", skip=True, **pre),
        "skip_scale": value(shallow, "norm", variant="SAN", mask="complete", norm="none", skip=True, **pre),
        "full_scale": value(shallow, "norm", variant="full transformer", **pre),
        "deep_pure_over_floor": over_floor("none", False),
        "deep_ln_over_floor": over_floor("model", False),
        "deep_skip_over_floor": over_floor("none", True),
        "deep_ln_skip_over_floor": over_floor("model", True),
        **{f"deep_{name}_floor_words": times_floor(over_floor(norm, skip))
           for name, norm, skip in (("pure", "none", False), ("ln", "model", False), ("skip", "none", True),
                                    ("ln_skip", "model", True))},
        "n_layers_deep": int(deep["layer"].max()),
    }


def claims(shallow: pd.DataFrame, deep: pd.DataFrame, found: dict) -> list[Claim]:
    """The response (W1) on skip connections and LayerNorm."""
    skip = select_curves(deep, weights="initialized", variant="SAN", norm="none", skip=True)
    verdict, number = count_curves(skip, STABLE, "masks keep μ/‖X‖_F")
    rows = [Claim("Pure skip connections prevent μ → 0", "response W1",
                  f"{found['n_layers_deep']} initialized layers, SAN + skip", verdict, number)]
    growth = _norm_growth(deep)
    rows.append(Claim("... but make μ unstable in deep layers", "response W1",
                      "deep initialized SAN + skip: growth of ‖X‖_F over the last half of the layers",
                      HOLDS if growth > 10 else FAILS, f"{growth:.3g}×"))
    ln = select_curves(deep, weights="initialized", variant="SAN", norm="model", skip=False)
    verdict, number = count_curves(ln, STABLE, "masks keep μ/‖X‖_F")
    rows.append(Claim("LayerNorm alone prevents collapse at initialization", "response W1",
                      f"{found['n_layers_deep']} initialized layers, SAN + LayerNorm", verdict, number))
    both = select_curves(deep, weights="initialized", variant="SAN", norm="model", skip=True)
    verdict, number = count_curves(both, STABLE, "masks keep μ/‖X‖_F")
    rows.append(Claim("LayerNorm + skip keeps μ away from 0", "response W1",
                      f"{found['n_layers_deep']} initialized layers, SAN + LayerNorm + skip", verdict, number))
    gap_ln = abs(np.log(found["ln_scale"] / found["full_scale"]))
    gap_skip = abs(np.log(found["skip_scale"] / found["full_scale"]))
    rows.append(Claim("In pretrained models LayerNorm keeps the tokens at the scale of the full transformer",
                      "response W1", "complete mask, last pretrained layer: ‖X‖_F of SAN + LN + skip and SAN + skip "
                      "against the full transformer's", HOLDS if gap_ln < gap_skip else FAILS,
                      f"{found['ln_scale']:.3g} and {found['skip_scale']:.3g} vs {found['full_scale']:.3g}"))
    return rows


def _norm_growth(deep: pd.DataFrame) -> float:
    """Largest factor by which ‖X‖_F of SAN + skip grows over the last half of the deep layers, over masks."""
    rows = deep[(deep["metric"] == "norm") & (deep["variant"] == "SAN") & (deep["norm"] == "none") & deep["skip"]]
    half = rows["layer"].max() // 2
    start = rows[rows["layer"] == half].set_index("mask")["median"]
    end = rows[rows["layer"] == rows["layer"].max()].set_index("mask")["median"]
    return float((end / start).max())
