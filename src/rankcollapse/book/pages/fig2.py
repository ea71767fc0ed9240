"""The Fig. 2 page (book/experiments/fig2.md): the paper's four masks with pure attention, the paper's
LayerNorm D (``unit``) and each layer's own LayerNorm (``model``), initialized and pretrained weights; its
controls (no biases, no mixing, other weight seeds) and the decomposition of μ's decay into the value maps'
gain and attention's contraction.

:func:`configure` turns the page's parameters into its sweeps (the main one, the controls, the pretrained
no-mixing control, the seed replicates, the decomposition); :func:`show` is what the page shows of them:
:func:`numbers` (the values its prose states) and :func:`claims` (its claims table) of the main sweep, the
controls' numbers, headline and claims (:func:`controls_numbers`, :func:`controls_headline`,
:func:`control_claims`), the decomposition's summary and claims (:func:`decomposition`,
:func:`decomposition_summary`), the four figures and the scale words and note.

Used by: book/experiments/fig2.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_claims.py, tests/unit/test_controls.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from rankcollapse.book.labels import mask_label
from rankcollapse.book.pages._common import (FIG2, against, computing, curves_claim, mask_radius, paired_sides,
                                            rates_claim, times_floor)
from rankcollapse.book.pages._decomposition import (decay_driver, decay_shares, decomposition_claims,
                                                    decomposition_frame)
from rankcollapse.book.plotting.controls import controls_figure
from rankcollapse.book.plotting.decomposition import decomposition_shown
from rankcollapse.book.plotting.overlap import coincidence_words
from rankcollapse.book.plotting.results import layer_figure
from rankcollapse.book.shown import Shown, prefixed, scale_note, scale_words
from rankcollapse.core import masks
from rankcollapse.core.checks import check_int
from rankcollapse.core.norms import NORM_LABELS
from rankcollapse.experiments.config import INITIALIZED, MAX_SAMPLES, Run, experiment_config
from rankcollapse.experiments.table import held_from, value
from rankcollapse.experiments.sample_values import SampleValues
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import (COLLAPSES, FAILS, HOLDS, PARTLY, STABLE, Claim, effect_cell,
                                          effect_claim, mean_rate, select_curves)
from rankcollapse.verdicts.effects import Side, late_factor, side
from rankcollapse.verdicts.robustness import robust
from rankcollapse.verdicts.rules import DEFAULTS, Thresholds, claim_verdict

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


def show(results: dict, parameters: dict) -> Shown:
    """The page's numbers and scales (``fig2_*``), its three claims tables (``fig2``, ``fig2_controls``,
    ``fig2_decomp``), the controls' and the decomposition's summaries, the scale note and the figures of μ,
    μ/‖X‖_F, the controls and the decomposition (whose coinciding curves its caption names:
    ``fig2_decomp_notes``)."""
    result, controls, decomposed = results["main"], results["controls"], results["decomposition"]
    seeds = seed_results(results)
    frame, shares = decomposition(decomposed)
    decomposition_fig = decomposition_shown(decomposed, frame, "fig-fig2-decomposition", DECOMPOSED_WORDS)
    values = {"scale": scale_words(result), **numbers(result.table), "controls_scale": scale_words(controls),
              "n_seeds": len(seeds), "decomp_scale": scale_words(decomposed),
              "decomp_notes": coincidence_words(decomposition_fig.figure)}
    found = controls_numbers(controls.table, results["pretrained_self"].table, result.table)
    n_tokens = result.provenance["parameters"]["n_tokens"]
    markdown = {"fig2_scale_note": scale_note(result), "fig2_controls_summary": controls_headline(found),
                "fig2_decomp_summary": decomposition_summary(shares)}
    return Shown(values=prefixed("fig2", values), markdown=markdown,
                 claims={"fig2": claims(result.table, n_tokens, result.samples),
                         "fig2_controls": control_claims(seeds),
                         "fig2_decomp": decomposition_claims(frame, DECOMPOSED_WORDS)},
                 figures=[layer_figure(result, "mu", "fig-fig2-mu"),
                          layer_figure(result, "relative_mu", "fig-fig2-relative"),
                          controls_figure(controls, "relative_mu", "fig-fig2-controls",
                                          _weight_seed(controls.provenance["parameters"])),
                          decomposition_fig])


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
        "ln_complete_floor_words": times_floor(over_floor(init, "unit"),
                                               held_from(table, mask="complete", norm="unit", **init)),
        "model_ln_complete_over_floor": over_floor(init, "model"),
        "pre_ln_complete_over_floor": over_floor(pre, "unit"),
        "pre_model_ln_complete": value(table, "mu", mask="complete", norm="model", **pre),
    }


def claims(table: pd.DataFrame, n_tokens: int, samples: SampleValues | None = None) -> list[Claim]:
    """Fig. 2's caption, claim by claim (``n_tokens`` gives the masks' radii): the absolute rows on each
    curve's verdict, the comparative ones as effects against their baseline with intervals from ``samples``
    (the result's per-sample values; without them the effects carry no interval)."""
    rows = []
    for weights in ("initialized", "pretrained"):
        rows.append(curves_claim("Pure masked attention collapses exponentially", "Fig. 2 caption",
                                 f"{weights} weights, pure attention: late-layer rate of μ/‖X‖_F per mask", table,
                                 COLLAPSES, "masks collapse", weights=weights, variant="SAN", norm="none"))
    init = dict(weights="initialized", variant="SAN")
    rates = {r.mask: mean_rate(r.curve) for r in select_curves(table, norm="none", **init).itertuples()}
    pure = {m: side(table, samples, m, mask=m, norm="none", **init) for m in rates}
    rows.append(_rate_spread_claim(pure, rates))
    rows.append(_radius_claim(pure, rates, table, n_tokens))
    for norm, words in (("unit", "the paper's D (unit norm)"), ("model", "LayerNorm as a fresh model has it (no affine)")):
        rows.append(curves_claim("Adding LayerNorm alone stops μ → 0 at random initialization", "Fig. 2 caption",
                                 f"initialized, {words}: μ/‖X‖_F stays away from 0", table, STABLE,
                                 "masks keep μ/‖X‖_F", norm=norm, **init))
        rows.append(against("... LayerNorm slows collapse against pure attention", "Fig. 2 caption",
                            f"initialized, {words}: late per-layer factor of μ/‖X‖_F over pure attention's (the "
                            "baseline)", paired_sides(table, samples, dict(norm=norm, **init),
                                                      dict(norm="none", **init), (NORM_LABELS[norm], "pure attention"))))
    pre = dict(weights="pretrained", variant="SAN")
    rows.append(curves_claim("In pretrained models LayerNorm helps (together with the other components)", "Fig. 2 caption",
                             "pretrained, the model's own trained LayerNorm (γ, β): μ/‖X‖_F stays away from 0", table,
                             STABLE, "masks keep μ/‖X‖_F", norm="model", **pre))
    rows.append(against("... the trained LayerNorm slows collapse against pure attention", "Fig. 2 caption",
                        "pretrained, the model's own LayerNorm: late per-layer factor of μ/‖X‖_F over pure "
                        "attention's with the same weights (the baseline)",
                        paired_sides(table, samples, dict(norm="model", **pre), dict(norm="none", **pre),
                                     ("own LayerNorm", "pure attention"))))
    return rows


def _rate_spread_claim(pure: dict[str, Side], rates: dict[str, float]) -> Claim:
    """"... at a rate that depends on the mask": in the column of the mask whose median curve decays slowest
    (by its mean rate, ``rates``), its late per-layer factor over the fastest one's, with its interval (the two
    are picked on the same data, so the effect is an upper estimate of the spread)."""
    slowest, fastest = min(rates, key=rates.get), max(rates, key=rates.get)
    return robust(lambda t: effect_claim(
        "... at a rate that depends on the mask", "Fig. 2 caption",
        f"initialized pure attention: late per-layer factor of the slowest mask over the fastest ({fastest}; mean "
        "rates " + ", ".join(f"{m}: {r:.3g}" for m, r in rates.items()) + ")",
        [effect_cell(slowest, late_factor(pure[slowest], pure[fastest], t), +1, t)]))


def _radius_claim(pure: dict[str, Side], rates: dict[str, float], table: pd.DataFrame, n_tokens: int) -> Claim:
    """Theorem 1's reading of Fig. 2, a larger radius slows collapse: in the column of every mask whose radius
    is not the smallest, its late per-layer factor over the slowest (by mean rate, ``rates``) of the masks of
    smaller radius, the hardest of those comparisons (above 1: slower)."""
    windows = table.groupby("mask", sort=False)["window"].first()
    radius = {m: mask_radius(m, n_tokens, None if pd.isna(windows[m]) else int(windows[m])) for m in pure}
    against = {m: min((b for b in pure if radius[b] < radius[m]), key=rates.get) for m in pure
               if any(radius[b] < radius[m] for b in pure)}
    return robust(lambda t: effect_claim(
        "A larger mask radius slows collapse", "Theorem 1",
        "initialized pure attention: late per-layer factor of each mask over the slowest mask of smaller radius ("
        + ", ".join(f"{m}: r = {radius[m]}" + (f", against {against[m]}" if m in against else "") for m in pure) + ")",
        [effect_cell(m, late_factor(pure[m], pure[b], t), +1, t) for m, b in against.items()]))


# ---------------------------------------------------------------- the controls (issue 21)

BIAS_SOURCES = ("initialized", "initialized_nobias")  # the same initialized draws, with and without biases
BIAS_WORDS = {"initialized": "with biases", "initialized_nobias": "without biases"}
# The verdicts the bias setting may change: (norm, what every curve should show, the words of the claim).
BIAS_VERDICTS = (("none", COLLAPSES, "initialized pure attention collapses"),
                 ("unit", STABLE, "the paper's D keeps μ/‖X‖_F"),
                 ("model", STABLE, "LayerNorm (no affine) keeps μ/‖X‖_F"))


def _paper_curves(table: pd.DataFrame, thresholds: Thresholds = DEFAULTS, **labels) -> pd.DataFrame:
    """Curve verdicts of μ/‖X‖_F of the paper's four masks matching ``labels``."""
    curves = select_curves(table, thresholds, variant="SAN", **labels)
    return curves[curves["mask"].isin(masks.PAPER_MASKS)]


def _agree(table: pd.DataFrame, expected: str, thresholds: Thresholds = DEFAULTS, **labels) -> tuple[int, int]:
    """How many of the paper's masks show ``expected`` (deciding curves: off the floor), of how many."""
    claim = claim_verdict(expected, list(_paper_curves(table, thresholds, **labels)["curve"]))
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
    stable = _paper_curves(controls, weights="initialized_nobias", norm="none")
    out["stable_without_biases"] = [r.mask for r in stable.itertuples() if r.curve.verdict == STABLE]
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
    stable = found.get("stable_without_biases", [])
    verdicts = (f"Dropping the biases (the same seeded weights; the theory's SAN has none) changes "
                f"{len(changed)} of {len(BIAS_VERDICTS)} verdicts at initialization"
                + (f": {'; '.join(changed)}" if changed else "")
                + (f". Without biases pure attention is stable under the {' and the '.join(map(mask_label, stable))}"
                   if stable else "")
                + (f". Unchanged: {'; '.join(kept)}" if kept else "") + ".")
    mixing = (f"With no mixing at all (each token attends only to itself, the same weights), μ/‖X‖_F "
              f"{_no_mixing_words(found, 'initialized')} with biases and {_no_mixing_words(found, 'initialized_nobias')} "
              f"without. With the pretrained weights no mixing gives a mean rate of {found['self_rate_pretrained']:.3g} "
              f"per layer, against {found['pretrained_rate_min']:.3g} to {found['pretrained_rate_max']:.3g} under the "
              f"paper's masks.")
    return (f"**Controls** ({found['n_samples_controls']} samples, {found['n_layers']} layers). {verdicts} {mixing}")


def _by_attention(controls: pd.DataFrame, weights: str, thresholds: Thresholds = DEFAULTS) -> tuple[int, int, str]:
    """This page's rule for "attention collapses the tokens" (not in :mod:`rankcollapse.verdicts.rules`): a
    mask's pure-attention curve collapses while the no-mixing control of the same weights does not. Returns
    how many of the paper's masks pass, of how many, and the control's words."""
    own = select_curves(controls, thresholds, weights=weights, variant="SAN", norm="none", mask="self")["curve"].iloc[0]
    curves = _paper_curves(controls, thresholds, weights=weights, norm="none")
    passed = sum(r.curve.collapses and not own.collapses for r in curves.itertuples())
    return passed, len(curves), own.words


def _by_attention_claim(table: pd.DataFrame, thresholds: Thresholds) -> Claim:
    """"The collapse is attention's": :func:`_by_attention` with and without biases, decided without them."""
    counts = {w: _by_attention(table, w, thresholds) for w in BIAS_SOURCES}
    n = counts["initialized_nobias"]
    return Claim("... and the collapse is attention's, not the value maps' (control: no mixing)",
                 "Fig. 2 caption", "initialized pure attention: masks that collapse while the no-mixing "
                 "control of the same weights does not (this page's rule; decided without biases)",
                 HOLDS if n[0] == n[1] else PARTLY if n[0] else FAILS,
                 "; ".join(f"{BIAS_WORDS[w]}: {a} of {b} (no mixing {words})" for w, (a, b, words) in counts.items()))


def _seeds_claim(seeds: dict[int, StoredResult], norm: str, expected: str, words: str, thresholds: Thresholds) -> Claim:
    """Without biases, the count of the paper's masks showing ``expected`` under ``norm`` is the same for every
    weight seed."""
    agree = {seed: _agree(r.table, expected, thresholds, weights="initialized_nobias", norm=norm)
             for seed, r in seeds.items()}
    return Claim(f"Without biases, {words}: the same count over weight seeds", "issue 21 (seeds)",
                 f"initialized without biases, {len(seeds)} weight seeds, the paper's masks",
                 HOLDS if len(set(agree.values())) == 1 else PARTLY,
                 ", ".join(f"seed {s}: {a} of {b}" for s, (a, b) in agree.items()))


def _weight_seed(parameters: dict) -> int:
    """The seed a stored run's initialized weights were drawn with (``weight_seed``, else the samples' ``seed``)."""
    return int(parameters["seed"] if parameters.get("weight_seed") is None else parameters["weight_seed"])


def seed_results(results: dict[str, object]) -> dict[int, StoredResult]:
    """The initialized controls by weight seed: the ``controls`` part and every ``seed_<k>`` part of a page's
    results (stored results), keyed by the seed their weights were drawn with (the controls' seed first)."""
    parts = [results["controls"], *(r for name, r in results.items() if name.startswith("seed_"))]
    return {_weight_seed(r.provenance["parameters"]): r for r in parts}


def _bias_sides(result: StoredResult, norm: str = "none") -> dict[str, tuple[Side, Side]]:
    """Per paper mask: (the stack without biases, the same draws with biases), ``norm``, μ/‖X‖_F."""
    table = result.table[result.table["mask"].isin(masks.PAPER_MASKS)]
    return paired_sides(table, result.samples, dict(weights="initialized_nobias", variant="SAN", norm=norm),
                        dict(weights="initialized", variant="SAN", norm=norm), ("no biases", "with biases"))


def control_claims(seeds: dict[int, StoredResult]) -> list[Claim]:
    """The claims decided on the controls (the first of ``seeds``, :func:`seed_results`): initialized pure
    attention collapses without biases and against the no-mixing control, LayerNorm on the stack without
    biases, the biases' and the mixing's effects with intervals (bootstrap over the controls' samples), and
    the counts and the bias effect over the weight seeds."""
    controls = next(iter(seeds.values()))
    table, samples = controls.table, controls.samples
    rows = []
    rows.append(rates_claim("Pure masked attention collapses exponentially (control: no biases)", "Fig. 2 caption",
                            "initialized without biases (the SAN of the theory), pure attention",
                            _paper_curves(table, weights="initialized_nobias", norm="none"), COLLAPSES, "masks collapse"))
    rows.append(against("The biases, not attention, drive the initialized decay (control: no biases)", "issue 21",
                        "initialized pure attention: late per-layer factor of μ/‖X‖_F without biases over with "
                        "them (the same draws; the baseline)", _bias_sides(controls)))
    rows.append(robust(lambda t: _by_attention_claim(table, t)))
    nobias = dict(weights="initialized_nobias", variant="SAN", norm="none")
    own = side(table, samples, "no mixing", mask="self", **nobias)
    mixing = {m: (own, side(table, samples, m, mask=m, **nobias)) for m in masks.PAPER_MASKS}
    rows.append(against("... mixing by the mask decays faster than no mixing (control: no mixing, no biases)",
                        "Fig. 2 caption", "initialized without biases, pure attention: late per-layer factor of the "
                        "no-mixing control over the mask's (the baseline; above 1: the mask's mixing decays faster)",
                        mixing))
    rows.append(rates_claim("Adding LayerNorm alone stops μ → 0 at random initialization (control: no biases)",
                            "Fig. 2 caption", "initialized without biases, the paper's D",
                            _paper_curves(table, weights="initialized_nobias", norm="unit"), STABLE, "masks keep μ/‖X‖_F"))
    for norm, expected, words in BIAS_VERDICTS[:2]:  # the seed replicates run pure attention and the paper's D
        rows.append(robust(lambda t, norm=norm, expected=expected, words=words: _seeds_claim(seeds, norm, expected, words, t)))
    for seed, result in list(seeds.items())[1:]:
        rows.append(against(f"The biases drive the initialized decay (weight seed {seed})", "issue 21 (seeds)",
                            "initialized pure attention: as in row 2, the weights drawn with this seed; intervals "
                            "over its samples",
                            _bias_sides(result)))
    return rows


def decomposition(result: StoredResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``decomposition`` part read per layer (:func:`rankcollapse.book.pages._decomposition.decomposition_frame`)
    and its shares of the decay (:func:`rankcollapse.book.pages._decomposition.decay_shares`)."""
    frame = decomposition_frame(result.table)
    frame["mask"] = frame["mask"].map(mask_label)  # the figure's legend and the claims name masks in words
    return frame, decay_shares(frame)


DECOMPOSED_WORDS = {"initialized": "initialized with biases", "initialized_nobias": "initialized without biases",
                    "pretrained": "pretrained"}


def decomposition_summary(shares: pd.DataFrame) -> str:
    """The page's sentence on what drives the decay of μ under the two windows and under the complete and
    causal masks, per weight source (:func:`rankcollapse.book.pages._decomposition.decay_driver`).

    Shapes: ``shares`` as from :func:`rankcollapse.book.pages._decomposition.decay_shares`.
    """
    def words(weights: str, local: bool) -> str:
        d = decay_driver(shares, weights, local)
        return (f"{d['driver']} (per layer g_V {d['gain_min']:.3g} to {d['gain_max']:.3g}, "
                f"c_A {d['contraction_min']:.3g} to {d['contraction_max']:.3g})")

    sources = [w for w in DECOMPOSED_WORDS if w in set(shares["weights"])]
    return ("**What drives the decay.** The larger part of μ's decay under the two windows is: "
            + "; ".join(f"{DECOMPOSED_WORDS[w]}, {words(w, True)}" for w in sources)
            + ". Under the complete and the causal mask: "
            + "; ".join(f"{DECOMPOSED_WORDS[w]}, {words(w, False)}" for w in sources) + ".")
