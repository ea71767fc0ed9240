"""The reviewers' questions page (book/response/reviewers.md): each numerical question a reviewer asked,
answered by computation.

Q4 (exponential or doubly exponential), Q2 (the counterexample rotated), Q1-continuity (a path of value
matrices), Q2-width (non-orthogonal W_V as the width grows) compute in
:mod:`rankcollapse.book.pages._reviewers_theory` (its ``compute``, from ``ReviewersConfig``: the page's
``parameters`` cell); Q1 (where μ → 0 goes), local or causal attention, the temperature and the 32 samples
read the Fig. 2-4 stored sweeps (:mod:`rankcollapse.book.pages._reviewers_sweeps`). :func:`configure` gives
every part, :func:`show` what the page shows of them (numbers, claims rows, tables and figures),
:func:`claims` the claims rows.

Used by: book/response/reviewers.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_shown.py, tests/notebooks/test_reviewers_page.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict

import pandas as pd

from rankcollapse.book.claims_table import claims_markdown
from rankcollapse.book.pages import sample_size
from rankcollapse.book.pages._common import FIG2, FIG3, FIG4, tally_clause
from rankcollapse.book.pages._reviewers_sweeps import (PAPER_SAMPLES, limit_numbers, limits, local_or_causal,
                                                       sample_pair, temperature_alignment,
                                                       temperature_numbers)
from rankcollapse.book.pages._reviewers_theory import ReviewersConfig, ReviewersResult
from rankcollapse.book.plotting import reviewers as figures
from rankcollapse.book.shown import Shown, ShownFigure, combined_parameters, prefixed, scale_words
from rankcollapse.book.shown import largest_stored
from rankcollapse.experiments.config import experiment_config
from rankcollapse.experiments.config import Run
from rankcollapse.theory import rates
from rankcollapse.verdicts.claims import FAILS, HOLDS, PARTLY, Claim

FIG2_PREFIX = "fig2_"  # the page's parameters of the Fig. 2 sweep it reads (Q1) carry this prefix
FIG2_DISPLAY = "fig2_show_largest"  # display only: show the largest stored Fig. 2 run of these parameters
# the d_QK values of the Fig. 3 sweep read for the temperature question
FIG3_TEMPERATURES = "fig3_temperatures"
WIDTH_GAP = 0.15  # a median rate within this relative gap of the orthogonal one counts as the same rate


def configure(parameters: dict) -> dict[str, object]:
    """The page's own config (``main``) and the Fig. 2, Fig. 3 and Fig. 4 sweeps on the ``fig2_`` parameters
    (Fig. 3 with ``fig3_temperatures``), stored as those pages' own."""
    own = {k: v for k, v in parameters.items() if not k.startswith((FIG2_PREFIX, FIG3_TEMPERATURES))}
    fig2 = {k[len(FIG2_PREFIX):]: v for k, v in parameters.items()
            if k.startswith(FIG2_PREFIX) and k != FIG2_DISPLAY}
    fig3 = {**fig2, "temperatures": parameters.get(FIG3_TEMPERATURES)}  # its default: the parameters cell
    return {"main": ReviewersConfig(**own), "fig2": Run(experiment_config(fig2, **FIG2), "fig2"),
            "fig3": Run(experiment_config(fig3, **FIG3), "fig3"),
            "fig4": Run(experiment_config(fig2, **FIG4), "fig4")}


def _read(results: Mapping[str, object], parameters: Mapping[str, object]) -> tuple:
    """The Fig. 2-4 sweeps the page reads (at their largest stored scale when ``fig2_show_largest`` is true)
    and what its claims read of them: Q1's limit table, the temperature alignment, local against causal."""
    fig2, fig3, fig4 = (largest_stored({part: results[part]})[part] if parameters[FIG2_DISPLAY]
                        else results[part] for part in ("fig2", "fig3", "fig4"))
    return (fig2, fig3, fig4, limits(fig2.table, fig2.provenance["parameters"]["dtype"]),
            temperature_alignment(fig3.table, fig4.table), local_or_causal(fig2.table))


def page_claims(results: Mapping[str, object], parameters: Mapping[str, object]) -> dict[str, list[Claim]]:
    """The page's claims table (``rv``: one row per question, :func:`claims`), as :func:`show` shows it (no
    figures drawn)."""
    _, _, _, limit_table, alignment, local = _read(results, parameters)
    _, result, _ = results["main"]
    rows = claims(result, limit_table, temperature_numbers(alignment), local)
    return {"rv": list(rows.values())}


def show(results: Mapping[str, object], parameters: Mapping[str, object]) -> Shown:
    """What the page shows: its numbers (``rv_*``; ``rv_finding``: how many of the authors' answers hold, and
    each that does not, :func:`rankcollapse.book.pages._common.tally_clause`), the claims table with one row
    per question (``rv``) and each row alone (``rv_claim_<question>``, Markdown), its tables
    (:func:`_tables`) and its nine figures (``fig-reviewers-<question>``, each citing the parameters it draws:
    the page's own or a stored sweep's). The Fig. 2-4 sweeps are read at their largest stored scale when
    ``fig2_show_largest`` is true."""
    config, result, _ = results["main"]
    fig2, fig3, fig4, limit_table, alignment, local = _read(results, parameters)
    temperature = temperature_numbers(alignment)
    rows = claims(result, limit_table, temperature, local)
    samples = sample_pair(fig2)
    fig2_parameters = fig2.provenance["parameters"]
    values = {**temperature, "fig3_scale": scale_words(fig3), "fig4_scale": scale_words(fig4),
              **result.numbers, "fig2_samples": fig2_parameters["n_samples"],
              "fig2_tokens": fig2_parameters["n_tokens"], "fig2_model": fig2_parameters["model"],
              **limit_numbers(limit_table), "paper_samples": PAPER_SAMPLES,
              "finding": tally_clause(list(rows.values()))}
    samples_row = ("No run of 32 samples is stored beside this one." if samples is None else
                   claims_markdown(sample_size.claims(sample_size.numbers(samples.table))))
    own = asdict(config)
    plots = {
        "limits": (figures.limits_figure(fig2.table, limit_table), fig2_parameters),
        "decay": (figures.decay_shape_figure(result.complete_log_mu, result.linear_log_mu), own),
        "linear": (figures.linear_rate_figure(result.linear_log_mu, result.numbers["log2"]), own),
        "rotation": (figures.rotation_figure(result.rotated, result.rotation_table), own),
        "path": (figures.path_figure(result.path_s, result.path_mu, config.path_depths,
                                     result.numbers["path_s_simulated"]), own),
        "width": (figures.width_figure(result.widths), own),
        "temperature": (figures.temperature_figure(alignment), combined_parameters([fig3, fig4])),
        "local": (figures.local_figure(local), fig2_parameters),
        "samples": (figures.sample_size_figure(None if samples is None else samples.table, PAPER_SAMPLES),
                    fig2_parameters),
    }
    return Shown(values=prefixed("rv", values), claims={"rv": list(rows.values())},
                 markdown={**{f"rv_claim_{key}": claims_markdown([claim]) for key, claim in rows.items()},
                           "rv_claim_samples": samples_row},
                 tables=_tables(limit_table, result, local),
                 figures=[ShownFigure(f"fig-reviewers-{what}", fig, cited)
                          for what, (fig, cited) in plots.items()])


def _tables(limit_table: pd.DataFrame, result: ReviewersResult, local: pd.DataFrame) -> dict[str, object]:
    """The page's tables by glue key: Q1's limit per configuration (styled), the ranks of the Jordan chain
    (a data frame, one column per power k), the rotations (styled) and local against causal attention
    (styled, headers with spaces that wrap at the column's width)."""
    shown = local.rename(columns=lambda c: str(c).replace("_", " "))
    rates_format = {c: "{:.3g}" for c in ("causal", "sliding window", "causal sliding window")
                    if c in shown.columns}
    limit_columns = ["weights", "mask", "norm", "limit", "norm ratio", "relative ratio"]
    return {"rv_limits_table": limit_table[limit_columns].style.format(
                {"norm ratio": "{:.3g}", "relative ratio": "{:.2e}"}).hide(axis="index"),
            "rv_jordan_table": result.jordan.T,
            "rv_rotation_table": result.rotation_table.style.format("{:.3g}"),
            "rv_local_table": shown.style.format(rates_format).hide(axis="index")}


def claims(result: ReviewersResult, limit_table: pd.DataFrame, temperature: dict[str, object],
           local: pd.DataFrame) -> dict[str, Claim]:
    """One claims row per question: the authors' answer as the claim, our verdict and its numbers."""
    n, q = result.numbers, limit_numbers(limit_table)
    slower = local[[c for c in local.columns if str(c).endswith(" slower")]].to_numpy()
    pure = limit_table[limit_table["norm"] == "none"]
    pure_kinds = sorted(set(pure["limit"]))
    ln_zero = q["q1_normed_to_zero"]
    q1 = HOLDS if ln_zero == 0 and len(pure_kinds) > 1 else PARTLY if ln_zero == 0 else FAILS
    double = (rates.decay_shape(n["complete_loglog_slope"]), rates.decay_shape(n["linear_loglog_slope"])) == \
        ("doubly exponential", "exponential")
    linear_ok = abs(n["causal_ratio_40"] - n["causal_lambda2"]) < 1e-6
    return {
        "q1": Claim("With LayerNorm X does not go to 0; without it, it depends on the mask, inputs and "
                    "weights",
                    "the response (Q1)", "Fig. 2's curves classified by the trends of ‖X‖_F and μ/‖X‖_F",
                    q1, f"LayerNorm: {ln_zero} of {q['q1_normed']} to zero; without: "
                        + "; ".join(f"{(pure['limit'] == k).sum()} {k}" for k in pure_kinds)),
        "q2": Claim("Theorem 2 extends to i.i.d. Gaussian or uniform W_V in the large-width limit",
                    "the response (Q2)", "LayerNorm D: share of runs where μ decays; largest gap of the "
                    "median rate to orthogonal W_V",
                    HOLDS if n["width_decaying"] == 1 and n["width_gap_large"] < WIDTH_GAP else
                    PARTLY if n["width_decaying"] > 0.5 else FAILS,
                    f"{100 * n['width_decaying']:.0f} % decay; gap {100 * n['width_gap_small']:.0f} % at d = "
                    f"{n['width_smallest']}, {100 * n['width_gap_large']:.0f} % at d = {n['width_largest']} "
                    f"({n['width_mask']}: {n['width_rate_gaussian']:.3g} Gaussian, "
                    f"{n['width_rate_uniform']:.3g} uniform, {n['width_rate_orthogonal']:.3g} orthogonal)"),
        "temperature": Claim("Once the tokens align, the temperature matters less (initialized models)",
                             "the response (W2)", "rank correlation over masks and layers of the per-layer "
                             "temperature effect with the mean absolute cosine entering the layer "
                             "(initialized)",
                             HOLDS if temperature["temp_initialized_correlation"] < -0.5 else
                             PARTLY if temperature["temp_initialized_correlation"] < 0 else FAILS,
                             f"{temperature['temp_initialized_correlation']:.2f}; effect "
                             f"{temperature['temp_initialized_early_effect']:.2g} → "
                             f"{temperature['temp_initialized_late_effect']:.2g} per layer while the mean "
                             f"absolute cosine goes {temperature['temp_initialized_early_cosine']:.2f} → "
                             f"{temperature['temp_initialized_late_cosine']:.2f}"),
        "local": Claim("A local window slows collapse compared with the causal mask",
                       "the paper (Sec. 5); a reviewer's question",
                       "Fig. 2: (weights, norm) pairs where a window's mean rate of μ/‖X‖_F is below the "
                       "causal one",
                       HOLDS if slower.all() else PARTLY if slower.any() else FAILS,
                       f"{int(slower.sum())} of {slower.size} (window, weights, norm)"),
        "q4": Claim("The exponential rate is tight: linear systems cannot collapse doubly exponentially",
                    "the response (Q4)",
                    "log(−log μ) slope per layer; linear causal per-layer ratio at layer 40",
                    HOLDS if double and linear_ok else PARTLY if linear_ok else FAILS,
                    f"complete mask with logits {n['complete_loglog_slope']:.3f} "
                    f"({rates.decay_shape(n['complete_loglog_slope'])}), linear "
                    f"{n['linear_loglog_slope']:.3f} ({rates.decay_shape(n['linear_loglog_slope'])}); ratio "
                    f"{n['causal_ratio_40']:.7f}, second eigenvalue {n['causal_lambda2']:.3g}"),
        "q2_rotation": Claim("The counterexample does not rely on a zero activation of token 1",
                             "the response (Q2, W4)", "rotated instances Z^T W Z: largest gap to X(t) Z; "
                             "smallest absolute coordinate of (0, 1) Z",
                             HOLDS if n["rotation_max_gap"] < 1e-12 and n["rotation_min_coordinate"] > 1e-3
                             else FAILS,
                             f"gap {n['rotation_max_gap']:.1e}, smallest absolute coordinate "
                             f"{n['rotation_min_coordinate']:.3f} over {n['rotation_count']} rotations"),
        "q1_continuity": Claim("Token trajectories are not continuous in the value matrices under LayerNorm",
                               "the response (Q1)", f"μ at depth {n['path_depth']} along (1 − s) I + s W",
                               HOLDS if n["path_mu_above"] > 1e3 * max(n["path_mu_below"], 1e-300) else FAILS,
                               f"jump at s = {n['path_s_simulated']:.6f} (fixed point appears at "
                               f"{n['path_s_analytic']:.6f}); μ {n['path_mu_below_words']} before, "
                               f"≥ {n['path_mu_above']:.3g} after"),
    }
