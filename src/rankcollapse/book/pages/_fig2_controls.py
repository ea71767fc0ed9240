"""The Fig. 2 page's controls (book/experiments/fig2.md): initialized weights with and without biases (the
same draws), the no-mixing ``self`` mask and other weight seeds.

:func:`controls_numbers` gives the numbers of the controls paragraph, :func:`controls_clauses` the clauses
its Markdown pastes, :func:`control_claims` the claims decided on the controls (their seed replicates
included).

Used by: :mod:`rankcollapse.book.pages.fig2`; tests/unit/test_controls.py.
"""

from __future__ import annotations

import math

import pandas as pd

from rankcollapse.book.labels import mask_label
from rankcollapse.book.pages._common import against, paired_sides, rates_claim
from rankcollapse.core import masks
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import (COLLAPSES, FAILS, HOLDS, PARTLY, STABLE, Claim, mean_rate,
                                          select_curves)
from rankcollapse.verdicts.effects import Side, side
from rankcollapse.verdicts.robustness import robust
from rankcollapse.verdicts.rules import DEFAULTS, Thresholds, claim_verdict

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


def _agree(table: pd.DataFrame, expected: str, thresholds: Thresholds = DEFAULTS,
           **labels) -> tuple[int, int]:
    """How many of the paper's masks show ``expected`` (deciding curves: off the floor), of how many."""
    claim = claim_verdict(expected, list(_paper_curves(table, thresholds, **labels)["curve"]))
    return claim.n_agree, claim.n_deciding


def _self_rate(table: pd.DataFrame, weights: str, norm: str) -> float:
    """Mean rate of μ/‖X‖_F per layer of the no-mixing control."""
    return mean_rate(select_curves(table, weights=weights, variant="SAN", norm=norm,
                                   mask="self")["curve"].iloc[0])


def value_map_shares(controls: pd.DataFrame, weights: str) -> dict[str, float]:
    """Per paper mask, the no-mixing control's mean rate of μ/‖X‖_F over the mask's own (pure attention):
    the share of the mask's decay that the value maps (and biases) give without any mixing of tokens."""
    own = _self_rate(controls, weights, "none")
    rates = {r.mask: mean_rate(r.curve)
             for r in _paper_curves(controls, weights=weights, norm="none").itertuples()}
    return {mask: own / rate for mask, rate in rates.items() if rate > 0}  # masks whose curve decays


def controls_numbers(controls: pd.DataFrame, pretrained_self: pd.DataFrame,
                     main: pd.DataFrame) -> dict[str, object]:
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
        out[f"share_min_{w}"], out[f"share_max_{w}"] = (min(shares.values(), default=math.nan),
                                                        max(shares.values(), default=math.nan))
    pre_rates = [mean_rate(r.curve)
                 for r in _paper_curves(main, weights="pretrained", norm="none").itertuples()]
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
    """What the no-mixing control does to μ/‖X‖_F for one weight source: its mean rate and, where it
    decays, its share of the masks' own mean rates (the value maps' and biases' share of the decay)."""
    rate = found[f"self_rate_{weights}"]
    if rate <= 0 or math.isnan(found[f"share_min_{weights}"]):
        return f"does not fall (mean rate {rate:.2g} per layer: none of the masks' decay)"
    return (f"falls {rate:.3g} per layer, {_percent(found[f'share_min_{weights}'])} to "
            f"{_percent(found[f'share_max_{weights}'])} of the masks' own mean rates")


def controls_clauses(found: dict[str, object]) -> dict[str, object]:
    """What the page's first paragraph on the controls says, as numbers and the clauses the numbers choose
    (the sentences themselves are the page's Markdown): the scale, how many verdicts change with the bias
    setting (``bias_changed`` of ``bias_verdicts``), the clause listing them (``bias_changed_list``, "" when
    none), the masks under which pure attention without biases is stable (``bias_stable``) and the unchanged
    verdicts (``bias_unchanged``), each "" when there are none; what the no-mixing control does with and
    without biases, and the pretrained rates, every one from ``found``."""
    changed, kept = [], []
    for norm, _, words in BIAS_VERDICTS:
        counts = [(found[f"{norm}_{w}_agree"], found[f"{norm}_{w}_of"]) for w in BIAS_SOURCES]
        text = (f"{words} under {counts[0][0]} of {counts[0][1]} masks with biases, {counts[1][0]} of "
                f"{counts[1][1]} without")
        (changed if counts[0] != counts[1] else kept).append(text)
    stable = found.get("stable_without_biases", [])
    return {"controls_n_samples": found["n_samples_controls"], "controls_n_layers": found["n_layers"],
            "bias_changed": len(changed), "bias_verdicts": len(BIAS_VERDICTS),
            "bias_changed_list": f": {'; '.join(changed)}" if changed else "",
            "bias_stable": (f". Without biases pure attention is stable under the "
                            f"{' and the '.join(map(mask_label, stable))}" if stable else ""),
            "bias_unchanged": f". Unchanged: {'; '.join(kept)}" if kept else "",
            "no_mixing_biased": _no_mixing_words(found, "initialized"),
            "no_mixing_unbiased": _no_mixing_words(found, "initialized_nobias"),
            **{k: found[k] for k in ("self_rate_pretrained", "pretrained_rate_min", "pretrained_rate_max")}}


def _by_attention(controls: pd.DataFrame, weights: str,
                  thresholds: Thresholds = DEFAULTS) -> tuple[int, int, str]:
    """This page's rule for "attention collapses the tokens" (not in :mod:`rankcollapse.verdicts.rules`): a
    mask's pure-attention curve collapses while the no-mixing control of the same weights does not. Returns
    how many of the paper's masks pass, of how many, and the control's words."""
    own = select_curves(controls, thresholds, weights=weights, variant="SAN", norm="none",
                        mask="self")["curve"].iloc[0]
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
                 "; ".join(f"{BIAS_WORDS[w]}: {a} of {b} (no mixing {words})"
                           for w, (a, b, words) in counts.items()))


def _seeds_claim(seeds: dict[int, StoredResult], norm: str, expected: str, words: str,
                 thresholds: Thresholds) -> Claim:
    """Without biases, the count of the paper's masks showing ``expected`` under ``norm`` is the same for
    every weight seed."""
    agree = {seed: _agree(r.table, expected, thresholds, weights="initialized_nobias", norm=norm)
             for seed, r in seeds.items()}
    return Claim(f"Without biases, {words}: the same count over weight seeds", "this book's control (seeds)",
                 f"initialized without biases, {len(seeds)} weight seeds, the paper's masks",
                 HOLDS if len(set(agree.values())) == 1 else PARTLY,
                 ", ".join(f"seed {s}: {a} of {b}" for s, (a, b) in agree.items()))


def _bias_sides(result: StoredResult, norm: str = "none") -> dict[str, tuple[Side, Side]]:
    """Per paper mask: (the stack without biases, the same draws with biases), ``norm``, μ/‖X‖_F."""
    table = result.table[result.table["mask"].isin(masks.PAPER_MASKS)]
    return paired_sides(table, result.samples, dict(weights="initialized_nobias", variant="SAN", norm=norm),
                        dict(weights="initialized", variant="SAN", norm=norm), ("no biases", "with biases"))


def control_claims(seeds: dict[int, StoredResult]) -> list[Claim]:
    """The claims decided on the controls (the first of ``seeds``,
    :func:`rankcollapse.book.pages.fig2.seed_results`): initialized pure attention collapses without biases
    and against the no-mixing control, LayerNorm on the stack without biases, the biases' and the mixing's
    effects with intervals (bootstrap over the controls' samples), and the counts and the bias effect over the
    weight seeds."""
    controls = next(iter(seeds.values()))
    table, samples = controls.table, controls.samples
    rows = []
    rows.append(rates_claim("Pure masked attention collapses exponentially (control: no biases)",
                            "Fig. 2 caption",
                            "initialized without biases (the SAN of the theory), pure attention",
                            _paper_curves(table, weights="initialized_nobias", norm="none"), COLLAPSES,
                            "masks collapse"))
    rows.append(against("The biases, not attention, drive the initialized decay (control: no biases)",
                        "this book's control", "initialized pure attention: late per-layer factor of μ/‖X‖_F "
                        "without biases over with them (the same draws; the baseline)",
                        _bias_sides(controls)))
    rows.append(robust(lambda t: _by_attention_claim(table, t)))
    nobias = dict(weights="initialized_nobias", variant="SAN", norm="none")
    own = side(table, samples, "no mixing", mask="self", **nobias)
    mixing = {m: (own, side(table, samples, m, mask=m, **nobias)) for m in masks.PAPER_MASKS}
    rows.append(against("... mixing by the mask decays faster than no mixing (control: no mixing, no biases)",
                        "Fig. 2 caption", "initialized without biases, pure attention: late per-layer "
                        "factor of the no-mixing control over the mask's (the baseline; above 1: the mask's "
                        "mixing decays faster)", mixing))
    rows.append(rates_claim("Adding LayerNorm alone stops μ → 0 at random initialization "
                            "(control: no biases)", "Fig. 2 caption",
                            "initialized without biases, the paper's D",
                            _paper_curves(table, weights="initialized_nobias", norm="unit"), STABLE,
                            "masks keep μ/‖X‖_F"))
    # the seed replicates run pure attention and the paper's D
    for norm, expected, words in BIAS_VERDICTS[:2]:
        rows.append(robust(lambda t, norm=norm, expected=expected, words=words:
                           _seeds_claim(seeds, norm, expected, words, t)))
    for seed, result in list(seeds.items())[1:]:
        rows.append(against(f"The biases drive the initialized decay (weight seed {seed})",
                            "this book's control (seeds)",
                            "initialized pure attention: as in row 2, the weights drawn with this seed; "
                            "intervals over its samples",
                            _bias_sides(result)))
    return rows
