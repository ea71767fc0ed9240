"""The claims tables: for each claim the paper or the authors' response makes about a figure, what we
measure, our verdict and the number that decides it — computed from the result the page shows.

A claim is decided from per-configuration curve verdicts of μ/‖X‖_F (:func:`rankcollapse.verdicts.rules.table_verdicts`:
*collapses*, *stable*, *decays slowly*, *on the floor*, with the late-layer rate) combined by
:func:`rankcollapse.verdicts.rules.claim_verdict`, or from a direct comparison of numbers (stated in the row).
The verdict words are :data:`rankcollapse.verdicts.rules.CLAIM_VERDICTS` (holds / holds partly / does not hold /
cannot tell: on the rounding floor); the rules are those of :mod:`rankcollapse.verdicts.rules`, documented on the
setup page.

Used by: every experiment and response page (``claims.<page>(...)`` then :func:`markdown_table` and
:func:`headline`), tests/unit/test_claims.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import math

import numpy as np
import pandas as pd

from rankcollapse.core import masks
from rankcollapse.verdicts import rules as verdicts
from rankcollapse.book.findings import rank_correlation
from rankcollapse.experiments.config import value

HOLDS, PARTLY, FAILS, FLOOR = verdicts.CLAIM_VERDICTS
COLLAPSES, STABLE = verdicts.EXPECTATIONS


@dataclass(frozen=True)
class Claim:
    """One row of a claims table."""

    claim: str  # the claim, as the paper or the response states it
    source: str  # where it is stated ("Fig. 2 caption", "response W1", ...)
    measured: str  # what we measure to decide it
    verdict: str  # one of verdicts.CLAIM_VERDICTS
    number: str  # the deciding number(s), formatted


def _curves(table: pd.DataFrame, **labels) -> pd.DataFrame:
    """Curve verdicts of μ/‖X‖_F for the configurations matching ``labels`` (column=value)."""
    curves = verdicts.table_verdicts(table)
    for column, wanted in labels.items():
        curves = curves[curves[column] == wanted]
    if curves.empty:
        raise ValueError(f"no configuration of this result matches {labels}")
    return curves


def _count(curves: pd.DataFrame, expected: str, what: str) -> tuple[str, str]:
    """The claim verdict for "every curve ``expected``" and the deciding numbers, per mask."""
    claim = verdicts.claim_verdict(expected, list(curves["curve"]))
    per_mask = "; ".join(f"{r.mask}: {r.words}" for r in curves.itertuples())
    return claim.verdict, f"{claim.n_agree} of {claim.n_deciding} {what} ({per_mask})"


def mean_rate(curve: verdicts.CurveVerdict) -> float:
    """Average decay per layer of a curve from the first layer to the last one read (its floor, if it hits
    it): ``-log(ratio) / layers``; comparable between curves that reach the floor and curves that do not."""
    last = curve.floor_layer if curve.floor_layer is not None else curve.n_layers
    return -math.log(curve.ratio) / max(1, last - verdicts.EARLY_LAYER) if curve.ratio > 0 else math.inf


def fig2(table: pd.DataFrame, n_tokens: int) -> list[Claim]:
    """Fig. 2's caption, claim by claim (``n_tokens`` gives the masks' radii)."""
    rows = []
    for weights in ("initialized", "pretrained"):
        pure = _curves(table, weights=weights, variant="SAN", norm="none")
        verdict, number = _count(pure, COLLAPSES, "masks collapse")
        rows.append(Claim("Pure masked attention collapses exponentially", "Fig. 2 caption",
                          f"{weights} weights, pure attention: late-layer rate of μ/‖X‖_F per mask", verdict, number))
    pure = _curves(table, weights="initialized", variant="SAN", norm="none")
    rates = {r.mask: mean_rate(r.curve) for r in pure.itertuples()}
    spread = max(rates.values()) / min(rates.values()) if min(rates.values()) > 0 else math.inf
    rows.append(Claim("... at a rate that depends on the mask", "Fig. 2 caption",
                      "initialized pure attention: fastest over slowest mean rate (per layer, to the floor or the "
                      "last layer)", HOLDS if spread > 2 else FAILS,
                      f"{spread:.3g}× ({', '.join(f'{m}: {r:.3g}' for m, r in rates.items())})"))
    rows.append(_radius_claim(pure, rates, n_tokens))
    for norm, words in (("unit", "the paper's D (unit norm)"), ("model", "LayerNorm as a fresh model has it (no affine)")):
        ln = _curves(table, weights="initialized", variant="SAN", norm=norm)
        verdict, number = _count(ln, STABLE, "masks keep μ/‖X‖_F")
        rows.append(Claim("Adding LayerNorm alone stops μ → 0 at random initialization", "Fig. 2 caption",
                          f"initialized, {words}: μ/‖X‖_F stays away from 0", verdict, number))
    ln = _curves(table, weights="pretrained", variant="SAN", norm="model")
    verdict, number = _count(ln, STABLE, "masks keep μ/‖X‖_F")
    rows.append(Claim("In pretrained models LayerNorm helps (together with the other components)", "Fig. 2 caption",
                      "pretrained, the model's own trained LayerNorm (γ, β): μ/‖X‖_F stays away from 0", verdict, number))
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


def fig3(table: pd.DataFrame) -> list[Claim]:
    """Fig. 3's caption and the response's correction of its pretrained panels."""
    temperatures = sorted(table["temperature"].dropna().unique())
    cold, warm = temperatures[0], temperatures[-1]
    rows = []
    for weights in ("initialized", "pretrained"):
        first = {m: value(table, "relative_mu", layer=1, mask=m, temperature=cold, weights=weights)
                 / value(table, "relative_mu", layer=1, mask=m, temperature=warm, weights=weights)
                 for m in dict.fromkeys(table["mask"])}
        slower = sum(r > 1 for r in first.values())
        verdict = HOLDS if slower == len(first) else PARTLY if slower else FAILS
        rows.append(Claim("A smaller temperature slows rank collapse", "Fig. 3 caption",
                          f"{weights}: μ/‖X‖_F after one layer at d_QK = {cold:g} over d_QK = {warm:g}, per mask",
                          verdict, ", ".join(f"{m}: {r:.3g}×" for m, r in first.items())))
    init = {m: value(table, "relative_mu", layer=1, mask=m, temperature=cold, weights="initialized")
            / value(table, "relative_mu", layer=1, mask=m, temperature=warm, weights="initialized")
            for m in dict.fromkeys(table["mask"])}
    largest = max(init, key=init.get)
    rows.append(Claim("... more for global attention", "Fig. 3 caption",
                      "initialized: the mask with the largest effect after one layer",
                      HOLDS if largest == "complete" else FAILS, f"{largest} ({init[largest]:.3g}×)"))
    ratios = _layer_ratios(table, "pretrained", cold, warm)
    persistent = float((ratios > 1).mean())
    rows.append(Claim("In pretrained models the effect is visible in all layers and for every mask",
                      "response W2", f"pretrained: share of (mask, layer) with μ/‖X‖_F at d_QK = {cold:g} above "
                      f"d_QK = {warm:g}", HOLDS if persistent == 1 else PARTLY if persistent > 0.5 else FAILS,
                      f"{100 * persistent:.0f} % (lowest ratio {ratios.min():.3g})"))
    return rows


def _layer_ratios(table: pd.DataFrame, weights: str, cold: float, warm: float) -> pd.Series:
    """μ/‖X‖_F at ``cold`` over ``warm`` temperature, per mask and layer >= 1."""
    rows = table[(table["metric"] == "relative_mu") & (table["weights"] == weights) & (table["layer"] >= 1)]
    pivot = rows.pivot_table(index=["mask", "layer"], columns="temperature", values="median")
    return pivot[cold] / pivot[warm]


def fig4(table: pd.DataFrame) -> list[Claim]:
    """Fig. 4's caption: full rank kept, anisotropy grows, σ_min falls (pretrained full transformer)."""
    full = dict(weights="pretrained", variant="full transformer")
    share = table.query("metric == 'full_rank' and variant == 'full transformer' and weights == 'pretrained'")
    lowest = float(share["mean"].min())
    cos0, cos1 = value(table, "mean_abs_cosine", layer=0, **full), value(table, "mean_abs_cosine", **full)
    s0, s1 = value(table, "sigma_min", layer=0, stat="median", **full), value(table, "sigma_min", stat="median", **full)
    return [
        Claim("Tokens keep full rank across layers", "Fig. 4 caption",
              "pretrained full transformer: lowest share of samples at full numerical rank over layers",
              HOLDS if lowest == 1 else PARTLY if lowest >= 0.5 else FAILS, f"{100 * lowest:.0f} %"),
        Claim("... but become anisotropic", "Fig. 4 caption",
              "pretrained full transformer: mean pairwise |cos|, embeddings → last layer",
              HOLDS if cos1 > cos0 else FAILS, f"{cos0:.2f} → {cos1:.2f}"),
        Claim("The smallest singular value falls", "Fig. 4 caption",
              "pretrained full transformer: median σ_min, embeddings → last layer",
              HOLDS if s1 < s0 else FAILS, f"{s0:.3g} → {s1:.3g}"),
    ]


def appendix_g1(fig2_table: pd.DataFrame) -> list[Claim]:
    """The response on the 128-layer models: "the same trend as 12 layer models"."""
    rows = []
    pure = _curves(fig2_table, variant="SAN", norm="none")
    verdict, number = _count(pure, COLLAPSES, "masks collapse")
    rows.append(Claim("Pure attention collapses under every mask (same trend as 12 layers)", "response, App. G.1",
                      "128 initialized layers, pure attention: late-layer rate of μ/‖X‖_F", verdict, number))
    for norm, words in (("unit", "the paper's D"), ("model", "LayerNorm without affine, as a fresh model has it")):
        verdict, number = _count(_curves(fig2_table, variant="SAN", norm=norm), STABLE, "masks keep μ/‖X‖_F")
        rows.append(Claim("LayerNorm alone prevents collapse (same trend as 12 layers)", "response, App. G.1",
                          f"128 initialized layers, {words}", verdict, number))
    return rows


def sample_size(found: dict) -> list[Claim]:
    """The response: with 3000 samples the results "are still similar to the original results"."""
    ratio = found["max_median_ratio"]
    return [Claim("Results on the large sample are similar to those on the small one", "response (sample size)",
                  f"largest factor between the medians over {found['small']} and {found['large']} samples, "
                  "any curve and layer", HOLDS if ratio < 2 else PARTLY if ratio < 10 else FAILS, f"{ratio:.3g}×")]


def skip_connections(shallow: pd.DataFrame, deep: pd.DataFrame, found: dict) -> list[Claim]:
    """The response (W1) on skip connections and LayerNorm."""
    skip = _curves(deep, weights="initialized", variant="SAN", norm="none", skip=True)
    verdict, number = _count(skip, STABLE, "masks keep μ/‖X‖_F")
    rows = [Claim("Pure skip connections prevent μ → 0", "response W1",
                  f"{found['n_layers_deep']} initialized layers, SAN + skip", verdict, number)]
    growth = _norm_growth(deep)
    rows.append(Claim("... but make μ unstable in deep layers", "response W1",
                      "deep initialized SAN + skip: growth of ‖X‖_F over the last half of the layers",
                      HOLDS if growth > 10 else FAILS, f"{growth:.3g}×"))
    ln = _curves(deep, weights="initialized", variant="SAN", norm="model", skip=False)
    verdict, number = _count(ln, STABLE, "masks keep μ/‖X‖_F")
    rows.append(Claim("LayerNorm alone prevents collapse at initialization", "response W1",
                      f"{found['n_layers_deep']} initialized layers, SAN + LayerNorm", verdict, number))
    both = _curves(deep, weights="initialized", variant="SAN", norm="model", skip=True)
    verdict, number = _count(both, STABLE, "masks keep μ/‖X‖_F")
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


def pretrained_panels(fig3_table: pd.DataFrame) -> list[Claim]:
    """The response (W2): corrected pretrained panels show the temperature's effect in all layers."""
    return [c for c in fig3(fig3_table) if c.source == "response W2"]


def markdown_table(claims: list[Claim]) -> str:
    """The claims as a Markdown table (claim, source, what we measure, verdict in bold, the number)."""
    lines = ["| claim | source | what we measure | verdict | number |", "|---|---|---|---|---|"]
    lines += [f"| {c.claim} | {c.source} | {c.measured} | **{c.verdict}** | {c.number} |" for c in claims]
    return "\n".join(lines)


def headline(claims: list[Claim]) -> str:
    """One sentence for a page's first paragraph: which claims do not hold (or only partly) on this run."""
    failing = [c for c in claims if c.verdict != HOLDS]
    if not failing:
        return "On this run every claim below holds."
    words = "; ".join(f"*{c.claim.strip('. ')}* ({c.measured.split(':')[0]}) — **{c.verdict}**" for c in failing)
    return f"On this run not every claim holds: {words}."


def rmsnorm_decoders(rates: pd.DataFrame) -> list[Claim]:
    """The paper's claims read on an RMSNorm decoder (SmolLM2) under its causal mask and uni-directional windows.

    Shapes: ``rates`` one row per configuration (:func:`rankcollapse.book.pages.rmsnorm_decoders.rate_table`).
    """
    san = rates[rates["variant"] == "SAN"]
    rows = []
    for weights in dict.fromkeys(san["weights"]):
        own = san[san["weights"] == weights]
        pure = own[(own["norm"] == "none") & ~own["skip"]]
        verdict, number = _count(pure, COLLAPSES, "masks collapse")
        rows.append(Claim("Pure masked attention collapses exponentially", "Fig. 2 caption, Theorem 1",
                          f"{weights} weights, pure attention: μ/‖X‖_F per mask", verdict, number))
        rows.append(_radius_order(pure, weights))
        rms = own[(own["norm"] == "rms") & ~own["skip"]]
        verdict, number = _count(rms, STABLE, "masks keep μ/‖X‖_F")
        rows.append(Claim("LayerNorm can prevent collapse (its LayerNorm without centring is RMSNorm without gain)",
                          "Sec. 4, response", f"{weights} weights, SAN + RMSNorm without gain", verdict, number))
    trained = san[(san["weights"] == "pretrained") & (san["norm"] == "model")]
    for skip, words in ((False, "SAN + its own trained RMSNorm"), (True, "SAN + skip + its own trained RMSNorm")):
        verdict, number = _count(trained[trained["skip"] == skip], STABLE, "masks keep μ/‖X‖_F")
        rows.append(Claim("In pretrained models LayerNorm helps (together with the other components)",
                          "Fig. 2 caption", f"pretrained weights, {words}", verdict, number))
    return rows


def _radius_order(pure: pd.DataFrame, weights: str) -> Claim:
    """Theorem 1's reading: sparser local masks collapse more slowly, at a rate set by the radius — the rank
    correlation of radius and mean rate (-1: every larger radius is slower)."""
    correlation = rank_correlation(pure["radius"].astype(float), pure["mean rate"])
    slowest = pure.loc[pure["mean rate"].idxmin(), "mask"]
    widest = pure.loc[pure["radius"].astype(float).idxmax(), "mask"]
    verdict = HOLDS if correlation < -1 + 1e-9 else PARTLY if correlation < 0 or slowest == widest else FAILS
    words = ", ".join(f"{m}: r = {r}, {v:.3g}" for m, r, v in zip(pure["mask"], pure["radius"], pure["mean rate"]))
    return Claim("Local masks slow collapse, at a rate set by the radius", "Theorem 1",
                 f"{weights} weights, pure attention: rank correlation of radius and mean rate per layer",
                 verdict, f"{correlation:.2f} ({words})")


def sliding_window_model(rates: pd.DataFrame) -> list[Claim]:
    """Does a local window slow collapse in a trained sliding-window model? Mean rates of the all-local and
    as-trained runs against the all-global one, for pure attention and for the model's own norms + skip.

    Shapes: ``rates`` one row per configuration (:func:`rankcollapse.book.pages.rmsnorm_decoders.rate_table`), parts
    ``as_trained``, ``all_global``, ``all_local``.
    """
    san = rates[rates["variant"] == "SAN"]
    rows = []
    pure = san[(san["norm"] == "none") & ~san["skip"]]
    verdict, number = _count(pure.assign(mask=pure["part"]), COLLAPSES, "runs collapse")
    rows.append(Claim("Pure masked attention collapses exponentially", "Fig. 2 caption, Theorem 1",
                      "pretrained, pure attention: μ/‖X‖_F as trained, all global, all local", verdict, number))
    for norm, skip, words in (("none", False, "pure attention"), ("model", True, "SAN + skip + its own norms")):
        own = san[(san["norm"] == norm) & (san["skip"] == skip)].set_index("part")
        rate = own["mean rate"]
        for part, name in (("all_local", "all local"), ("as_trained", "as trained")):
            if (own.loc[[part, "all_global"], "verdict"] == verdicts.CURVE_VERDICTS[3]).all():
                verdict = FLOOR
            else:
                verdict = HOLDS if rate[part] < 0.9 * rate["all_global"] else FAILS
            ratio = rate[part] / rate["all_global"] if rate["all_global"] else math.nan
            rows.append(Claim("Local (sliding-window) masks slow collapse", "Theorem 1, response",
                              f"pretrained, {words}: mean rate per layer, {name} against all global",
                              verdict, f"{rate[part]:.3g} vs {rate['all_global']:.3g} ({ratio:.2f}×)"))
    kept = san[(san["norm"] == "model") & san["skip"]]
    verdict, number = _count(kept.assign(mask=kept["part"]), STABLE, "runs keep μ/‖X‖_F")
    rows.append(Claim("In pretrained models LayerNorm helps (together with the other components)", "Fig. 2 caption",
                      "pretrained, SAN + skip + its own norms", verdict, number))
    return rows
