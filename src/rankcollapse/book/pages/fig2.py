"""The Fig. 2 page (book/experiments/fig2.md): the paper's four masks with pure attention, the paper's
LayerNorm D (``unit``) and each layer's own LayerNorm (``model``), initialized and pretrained weights.

:func:`configure` turns the page's parameters into its one sweep; :func:`numbers` are the values its prose
states, :func:`claims` its claims table, both read from the tidy table the page shows.

Used by: book/experiments/fig2.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_claims.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from rankcollapse.book.pages._common import FIG2, computing, curves_claim, times_floor
from rankcollapse.core import masks
from rankcollapse.core.checks import check_int
from rankcollapse.core.norms import NORM_LABELS
from rankcollapse.experiments.config import INITIALIZED, MAX_SAMPLES, Run, experiment_config, value
from rankcollapse.verdicts.claims import (COLLAPSES, FAILS, HOLDS, PARTLY, STABLE, Claim, count_curves, mean_rate,
                                          select_curves)
from rankcollapse.verdicts.rules import claim_verdict

FIXED = FIG2  # the norms the page is about
CONTROL_MASKS = (*masks.PAPER_MASKS, "self")  # the paper's four and the no-mixing control
CONTROL_PAGE_PARAMETERS = ("n_samples_controls", "n_weight_seeds")  # the controls' own parameters
SEED_NORMS = ("none", "unit")  # the norms of the seed replicates: pure attention and the paper's D


def configure(parameters: dict) -> dict[str, Run]:
    """The main sweep (the paper's Fig. 2, stored as before), its controls and their seed replicates.

    ``controls``: the first ``n_samples_controls`` of the same samples, weights initialized with and without
    biases (the same draws), the paper's masks and the no-mixing ``self`` mask, the page's norms;
    ``pretrained_self``: the pretrained weights under the ``self`` mask. ``seed_<k>`` for
    k = 1 .. n_weight_seeds - 1: the initialized stacks of ``controls`` again with weight seed ``seed + k``
    (the samples stay those of ``seed``), pure attention and the paper's D only. ``decomposition``: pure attention
    under the paper's four masks on the controls' samples, initialized (with and without biases) and pretrained,
    recording each layer's decomposition of mu into the value maps' gain and attention's contraction
    (``attention_stats``; slower: every attention matrix is formed).
    """
    own = computing(parameters, *CONTROL_PAGE_PARAMETERS)
    runs = {"main": Run(experiment_config(own, **FIXED))}
    if not any(name in parameters for name in CONTROL_PAGE_PARAMETERS):
        return runs  # a page reusing Fig. 2's sweep without its controls (sample size, pretrained panels)
    n_controls, n_seeds = parameters.get("n_samples_controls"), parameters.get("n_weight_seeds")
    check_int("n_samples_controls", n_controls, 1, MAX_SAMPLES)
    check_int("n_weight_seeds", n_seeds, 1, 100)
    controls = {**own, "n_samples": n_controls}
    runs["controls"] = Run(experiment_config(controls, **FIXED, weights=INITIALIZED, masks=CONTROL_MASKS))
    runs["pretrained_self"] = Run(experiment_config(controls, **FIXED, weights=("pretrained",), masks=("self",)))
    for k in range(1, n_seeds):
        runs[f"seed_{k}"] = Run(experiment_config({**controls, "weight_seed": own.get("seed", 0) + k},
                                                  weights=INITIALIZED, masks=CONTROL_MASKS, norms=SEED_NORMS))
    runs["decomposition"] = Run(replace(experiment_config(controls, weights=(*INITIALIZED, "pretrained"),
                                                          masks=masks.PAPER_MASKS, norms=("none",)),
                                        attention_stats=True))
    return runs


def numbers(table: pd.DataFrame) -> dict[str, float | int]:
    """Last-layer μ of the initialized complete and uni-directional-window masks, and LayerNorm's μ at the
    complete mask against its rounding floor (initialized and pretrained)."""
    init = dict(weights="initialized", variant="SAN")
    pre = dict(weights="pretrained", variant="SAN")
    over_floor = lambda labels, norm: (value(table, "mu", mask="complete", norm=norm, **labels)  # noqa: E731
                                       / value(table, "floor", mask="complete", norm=norm, **labels))
    return {
        "n_layers": int(table.loc[table["weights"] == "initialized", "layer"].max()),
        "pure_complete": value(table, "mu", mask="complete", norm="none", **init),
        "pure_window": value(table, "mu", mask="causal_sliding_window", norm="none", **init),
        "ln_complete": value(table, "mu", mask="complete", norm="unit", **init),
        "floor_complete": value(table, "floor", mask="complete", norm="unit", **init),
        "ln_complete_over_floor": over_floor(init, "unit"),
        "ln_complete_floor_words": times_floor(over_floor(init, "unit")),
        "model_ln_complete_over_floor": over_floor(init, "model"),
        "pre_ln_complete_over_floor": over_floor(pre, "unit"),
        "pre_model_ln_complete": value(table, "mu", mask="complete", norm="model", **pre),
    }


def claims(table: pd.DataFrame, n_tokens: int) -> list[Claim]:
    """Fig. 2's caption, claim by claim (``n_tokens`` gives the masks' radii)."""
    rows = []
    for weights in ("initialized", "pretrained"):
        rows.append(curves_claim("Pure masked attention collapses exponentially", "Fig. 2 caption",
                                 f"{weights} weights, pure attention: late-layer rate of μ/‖X‖_F per mask", table,
                                 COLLAPSES, "masks collapse", weights=weights, variant="SAN", norm="none"))
    pure = select_curves(table, weights="initialized", variant="SAN", norm="none")
    rates = {r.mask: mean_rate(r.curve) for r in pure.itertuples()}
    spread = max(rates.values()) / min(rates.values()) if min(rates.values()) > 0 else math.inf
    rows.append(Claim("... at a rate that depends on the mask", "Fig. 2 caption",
                      "initialized pure attention: fastest over slowest mean rate (per layer, to the floor or the "
                      "last layer)", HOLDS if spread > 2 else FAILS,
                      f"{spread:.3g}× ({', '.join(f'{m}: {r:.3g}' for m, r in rates.items())})"))
    rows.append(_radius_claim(pure, rates, n_tokens))
    for norm, words in (("unit", "the paper's D (unit norm)"), ("model", "LayerNorm as a fresh model has it (no affine)")):
        rows.append(curves_claim("Adding LayerNorm alone stops μ → 0 at random initialization", "Fig. 2 caption",
                                 f"initialized, {words}: μ/‖X‖_F stays away from 0", table, STABLE,
                                 "masks keep μ/‖X‖_F", weights="initialized", variant="SAN", norm=norm))
    rows.append(curves_claim("In pretrained models LayerNorm helps (together with the other components)", "Fig. 2 caption",
                             "pretrained, the model's own trained LayerNorm (γ, β): μ/‖X‖_F stays away from 0", table,
                             STABLE, "masks keep μ/‖X‖_F", weights="pretrained", variant="SAN", norm="model"))
    return rows


def _radius_claim(curves: pd.DataFrame, rates: dict[str, float], n_tokens: int) -> Claim:
    """Theorem 1's reading of Fig. 2: a larger radius slows collapse (slowest mean rate at the largest radius)."""
    radius = {r.mask: masks.graph_radius(masks.build_mask(r.mask, n_tokens, None if pd.isna(r.window) else int(r.window)))
              for r in curves.itertuples()}
    widest = max(radius, key=lambda m: (radius[m], -rates[m]))
    slowest = min(rates, key=rates.get)
    words = ", ".join(f"{m}: r = {radius[m]}, rate {rates[m]:.3g}" for m in rates)
    return Claim("A larger mask radius slows collapse", "Theorem 1",
                 "initialized pure attention: is the mask of largest radius the slowest?",
                 HOLDS if widest == slowest else FAILS, f"largest radius {widest}, slowest {slowest} ({words})")


# ---------------------------------------------------------------- the controls (issue 21)

BIAS_SOURCES = ("initialized", "initialized_nobias")  # the same initialized draws, with and without biases
BIAS_WORDS = {"initialized": "with biases", "initialized_nobias": "without biases"}
# The verdicts the bias setting may change: (norm, what every curve should show, the words of the claim).
BIAS_VERDICTS = (("none", COLLAPSES, "initialized pure attention collapses"),
                 ("unit", STABLE, "the paper's D keeps μ/‖X‖_F"),
                 ("model", STABLE, "LayerNorm (no affine) keeps μ/‖X‖_F"))


def _paper_curves(table: pd.DataFrame, **labels) -> pd.DataFrame:
    """Curve verdicts of μ/‖X‖_F of the paper's four masks matching ``labels``."""
    curves = select_curves(table, variant="SAN", **labels)
    return curves[curves["mask"].isin(masks.PAPER_MASKS)]


def _agree(table: pd.DataFrame, expected: str, **labels) -> tuple[int, int]:
    """How many of the paper's masks show ``expected`` (deciding curves: off the floor), of how many."""
    claim = claim_verdict(expected, list(_paper_curves(table, **labels)["curve"]))
    return claim.n_agree, claim.n_deciding


def _self_rate(table: pd.DataFrame, weights: str, norm: str) -> float:
    """Mean rate of μ/‖X‖_F per layer of the no-mixing control."""
    return mean_rate(select_curves(table, weights=weights, variant="SAN", norm=norm, mask="self")["curve"].iloc[0])


def value_map_shares(controls: pd.DataFrame, weights: str) -> dict[str, float]:
    """Per paper mask, the no-mixing control's mean rate of μ/‖X‖_F over the mask's own (pure attention):
    the share of the mask's decay that the value maps (and biases) give without any mixing of tokens."""
    own = _self_rate(controls, weights, "none")
    rates = {r.mask: mean_rate(r.curve) for r in _paper_curves(controls, weights=weights, norm="none").itertuples()}
    return {mask: own / rate for mask, rate in rates.items() if rate > 0}  # masks whose curve decays


def controls_numbers(controls: pd.DataFrame, pretrained_self: pd.DataFrame, main: pd.DataFrame) -> dict[str, object]:
    """The numbers of the controls paragraph: per bias verdict the counts with and without biases, the
    no-mixing rates and the value maps' share of each mask's decay, the pretrained no-mixing rate."""
    out: dict[str, object] = {"n_samples_controls": int(controls["n_samples"].iloc[0]),
                              "n_layers": int(controls["layer"].max())}
    for norm, expected, _ in BIAS_VERDICTS:
        for w in BIAS_SOURCES:
            out[f"{norm}_{w}_agree"], out[f"{norm}_{w}_of"] = _agree(controls, expected, weights=w, norm=norm)
    for w in BIAS_SOURCES:
        out[f"self_rate_{w}"] = _self_rate(controls, w, "none")
        shares = value_map_shares(controls, w)
        out[f"share_min_{w}"], out[f"share_max_{w}"] = min(shares.values(), default=math.nan), max(shares.values(), default=math.nan)
    pre_rates = [mean_rate(r.curve) for r in _paper_curves(main, weights="pretrained", norm="none").itertuples()]
    out["self_rate_pretrained"] = _self_rate(pretrained_self, "pretrained", "none")
    out["pretrained_rate_min"], out["pretrained_rate_max"] = min(pre_rates), max(pre_rates)
    return out


def _percent(x: float) -> str:
    """A share in per cent; "–" where no mask's curve decays (no share to take).

    >>> _percent(0.934), _percent(math.nan)
    ('93 %', '–')
    """
    return "–" if math.isnan(x) else f"{100 * x:.0f} %"


def _no_mixing_words(found: dict[str, object], weights: str) -> str:
    """What the no-mixing control does to μ/‖X‖_F for one weight source: its mean rate and, where it decays,
    its share of the masks' own mean rates (the value maps' and biases' share of the decay)."""
    rate = found[f"self_rate_{weights}"]
    if rate <= 0 or math.isnan(found[f"share_min_{weights}"]):
        return f"does not fall (mean rate {rate:.2g} per layer: none of the masks' decay)"
    return (f"falls {rate:.3g} per layer, {_percent(found[f'share_min_{weights}'])} to "
            f"{_percent(found[f'share_max_{weights}'])} of the masks' own mean rates")


def controls_headline(found: dict[str, object]) -> str:
    """The page's first paragraph on the controls: which verdicts change with the bias setting (those that
    change first), and the no-mixing control's share of the decay, every number from ``found``."""
    changed, kept = [], []
    for norm, _, words in BIAS_VERDICTS:
        counts = [(found[f"{norm}_{w}_agree"], found[f"{norm}_{w}_of"]) for w in BIAS_SOURCES]
        text = f"{words} under {counts[0][0]} of {counts[0][1]} masks with biases, {counts[1][0]} of {counts[1][1]} without"
        (changed if counts[0] != counts[1] else kept).append(text)
    verdicts = (f"Dropping the biases (the same seeded weights; the theory's SAN has none) changes "
                f"{len(changed)} of {len(BIAS_VERDICTS)} verdicts at initialization"
                + (f": {'; '.join(changed)}" if changed else "")
                + (f". Unchanged: {'; '.join(kept)}" if kept else "") + ".")
    mixing = (f"With no mixing at all (each token attends only to itself, the same weights), μ/‖X‖_F "
              f"{_no_mixing_words(found, 'initialized')} with biases and {_no_mixing_words(found, 'initialized_nobias')} "
              f"without. With the pretrained weights no mixing gives a mean rate of {found['self_rate_pretrained']:.3g} "
              f"per layer, against {found['pretrained_rate_min']:.3g} to {found['pretrained_rate_max']:.3g} under the "
              f"paper's masks.")
    return (f"**Controls** ({found['n_samples_controls']} samples, {found['n_layers']} layers). {verdicts} {mixing}")


def _by_attention(controls: pd.DataFrame, weights: str) -> tuple[int, int, str]:
    """This page's rule for "attention collapses the tokens" (not in :mod:`rankcollapse.verdicts.rules`): a
    mask's pure-attention curve collapses while the no-mixing control of the same weights does not. Returns
    how many of the paper's masks pass, of how many, and the control's words."""
    own = select_curves(controls, weights=weights, variant="SAN", norm="none", mask="self")["curve"].iloc[0]
    curves = _paper_curves(controls, weights=weights, norm="none")
    passed = sum(r.curve.collapses and not own.collapses for r in curves.itertuples())
    return passed, len(curves), own.words


def seed_tables(results: dict[str, object]) -> dict[int, pd.DataFrame]:
    """The initialized controls by weight seed: the ``controls`` part and every ``seed_<k>`` part of a page's
    results (stored results), keyed by the seed their weights were drawn with."""
    def weight_seed(result) -> int:
        p = result.provenance["parameters"]
        return int(p["seed"] if p.get("weight_seed") is None else p["weight_seed"])

    parts = [results["controls"], *(r for name, r in results.items() if name.startswith("seed_"))]
    return {weight_seed(r): r.table for r in parts}


def control_claims(controls: pd.DataFrame, seeds: dict[int, pd.DataFrame]) -> list[Claim]:
    """The claims decided on the controls: initialized pure attention collapses without biases and against
    the no-mixing control, LayerNorm on the stack without biases, and both over the weight seeds."""
    rows = []
    pure = _paper_curves(controls, weights="initialized_nobias", norm="none")
    verdict, number = count_curves(pure, COLLAPSES, "masks collapse")
    rows.append(Claim("Pure masked attention collapses exponentially (control: no biases)", "Fig. 2 caption",
                      "initialized without biases (the SAN of the theory), pure attention", verdict, number))
    counts = {w: _by_attention(controls, w) for w in BIAS_SOURCES}
    n = counts["initialized_nobias"]
    rows.append(Claim("... and the collapse is attention's, not the value maps' (control: no mixing)",
                      "Fig. 2 caption", "initialized pure attention: masks that collapse while the no-mixing "
                      "control of the same weights does not (this page's rule; decided without biases)",
                      HOLDS if n[0] == n[1] else PARTLY if n[0] else FAILS,
                      "; ".join(f"{BIAS_WORDS[w]}: {a} of {b} (no mixing {words})" for w, (a, b, words) in counts.items())))
    ln = _paper_curves(controls, weights="initialized_nobias", norm="unit")
    verdict, number = count_curves(ln, STABLE, "masks keep μ/‖X‖_F")
    rows.append(Claim("Adding LayerNorm alone stops μ → 0 at random initialization (control: no biases)",
                      "Fig. 2 caption", "initialized without biases, the paper's D", verdict, number))
    for norm, expected, words in BIAS_VERDICTS[:2]:  # the seed replicates run pure attention and the paper's D
        agree = {seed: _agree(t, expected, weights="initialized_nobias", norm=norm) for seed, t in seeds.items()}
        same = len(set(agree.values())) == 1
        rows.append(Claim(f"Without biases, {words}: the same count over weight seeds", "issue 21 (seeds)",
                          f"initialized without biases, {len(seeds)} weight seeds, the paper's masks",
                          HOLDS if same else PARTLY, ", ".join(f"seed {s}: {a} of {b}" for s, (a, b) in agree.items())))
    return rows


def glue_controls_figure(result, metric: str, stem: str, data: list[dict]) -> None:
    """The controls beside the curves they control: one panel per mask (the paper's four and no mixing),
    each norm in its variant's colour, with biases solid and without biases dashed; exported and glued as
    ``stem`` (``-`` made ``_``).  ``result``: the stored ``controls`` part; ``data``: what the figure's record
    names as drawn (:func:`rankcollapse.book.report.figure_data`)."""
    from rankcollapse.book.labels import mask_title
    from rankcollapse.book.plotting import common as plotting

    p = result.provenance["parameters"]
    table = result.table.copy()
    control = table["weights"] == "initialized_nobias"
    table["label"] = table["norm"].map(NORM_LABELS) + control.map({True: plotting.CONTROL_SUFFIX, False: ""})
    table["mask_title"] = table["mask"].map(lambda m: mask_title(m, p["window"]))
    table["panel"] = "initialized"
    title = (f"initialized: U(±1/√d), weight seed {p['seed'] if p.get('weight_seed') is None else p['weight_seed']}; dashed: the same weights "
             f"without biases")
    fig = plotting.layer_curve_grid(table, metric, row="panel", col="mask_title", hue="label",
                                    titles={"initialized": title}, dashed=tuple(table.loc[control, "label"].unique()))
    plotting.glue_figure(stem.replace("-", "_"), fig, stem=stem, parameters={**p, "result": result.provenance["key"]},
                         data=data)
