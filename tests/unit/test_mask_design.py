"""The mask-design page: its zoo and checks, the uniform-attention eigenvalue, the rate fit, the numbers,
the sortable table and the figure's legibility."""

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb


from rankcollapse.experiments.config import ExperimentConfig, stored_parameters
from rankcollapse.book.pages import mask_design
from rankcollapse.core import masks
from rankcollapse.book import registry
from rankcollapse.book.plotting import beyond as plotting_beyond
from rankcollapse.book.plotting import palette
from rankcollapse.book.plotting import decomposition as plotting_decomposition

pytestmark = pytest.mark.models  # configure reads the packaged MiniLM's config


def test_zoo_parts_are_distinct_and_each_sweep_has_its_one_mask():
    runs = registry.configure("mask_design", {"n_tokens": 32, "n_samples": 2})
    assert list(runs) == [z.part for z in mask_design.ZOO] and len(set(runs)) == len(mask_design.ZOO)
    dilated = runs["dilated_window-w2-dilation2"].config
    assert dilated.masks == ("dilated_window",) and dict(dilated.mask_options) == {"dilation": 2}
    assert dilated.san_configs()[0].build_mask(32).equal(masks.dilated_window_mask(32, 2, 2))


def test_a_window_wider_than_the_sequence_is_refused_before_running():
    with pytest.raises(ValueError, match=r"n_tokens must be an integer in \[9, 8192\] on this page "
                                         r"\(its zoo holds windows of up to 8 tokens\), got 8"):
        registry.configure("mask_design", {"n_tokens": 8})


@pytest.mark.parametrize("mask, options, words", [
    (("complete",), (("dilation", 2),), "do not fit mask 'complete'"),
    (("random",), (("density", 0.1),), "the random mask needs both"),
    (("dilated_window",), (("dilation", 99),), r"dilation must be an integer in \[1, 31\]"),
])
def test_mask_options_that_do_not_fit_are_refused(mask, options, words):
    with pytest.raises(ValueError, match=words):
        ExperimentConfig(masks=mask, mask_options=options)


def test_mask_options_read_back_from_json_are_pairs_again():
    config = ExperimentConfig(masks=("dilated_window",), window=2, mask_options=(["dilation", 2],))
    assert config.mask_options == (("dilation", 2),) and hash(config)


def test_empty_mask_options_leave_stored_keys_unchanged():
    seen = stored_parameters(ExperimentConfig(masks=("complete",)))
    assert "mask_options" not in seen and seen["masks"] == ("complete",)


def test_uniform_second_eigenvalue_is_one_half_for_every_causal_window_and_zero_for_complete():
    for window in (1, 3, 7):
        assert math.isclose(
            mask_design.uniform_second_eigenvalue(masks.causal_sliding_window_mask(16, window)), 0.5)
    assert mask_design.uniform_second_eigenvalue(masks.complete_mask(16)) == 0.0
    assert mask_design.uniform_second_eigenvalue(masks.dilated_window_mask(16, 2, 2)) == pytest.approx(1.0)


def _table(relative_mu, mu, floor):
    rows = []
    for metric, values in (("relative_mu", relative_mu), ("mu", mu), ("floor", floor)):
        rows += [{"weights": "initialized", "variant": "SAN", "metric": metric, "layer": t, "mean": v}
                 for t, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_decay_rate_fits_the_layers_above_the_floor_only():
    layers = np.arange(6)
    relative = np.exp(-0.7 * layers)
    mu = np.array([1, 0.5, 0.25, 1e-9, 1e-9, 1e-9])  # the last three sit at the floor
    table = _table(np.r_[relative[:3], 1.0, 1.0, 1.0], mu, np.full(6, 1e-9))
    assert mask_design.decay_rate(table, "initialized") == pytest.approx(0.7)
    assert math.isnan(mask_design.decay_rate(_table(relative, np.full(6, 1e-9), np.full(6, 1e-9)),
                                             "initialized"))


def test_numbers_name_the_order_and_the_fastest_sparse_mask():
    table = pd.DataFrame({
        "mask": ["complete", "causal window 1", "causal window 4", "window ±2", "window ±1",
                 "window ±1 + 1 global", "dilated"],
        "edges": [100, 20, 50, 40, 25, 45, 30], "edge share": [1.0, 0.2, 0.5, 0.4, 0.25, 0.45, 0.3],
        "radius": [1, 9, 3, 3, 9, 1, None], "uniform |λ₂|": [0.0, 0.5, 0.5, 0.9, 0.95, 0.7, 1.0],
        "rate, initialized": [2.0, 0.1, 1.2, 0.5, 0.2, 0.8, 0.05], "verdict, initialized": ["collapses"] * 7})
    found = mask_design.numbers(table)
    assert (found["causal_order"] == "the radius orders them"
            and found["causal_by_radius"] == pytest.approx(-1.0))
    assert found["fastest"] == "causal window 4" and found["unconnected"] == "dilated"
    assert (found["sparse_min"] == 0.05 and found["sparse_max"] == 1.2 and found["fastest_share"] == 50
            and found["fastest_over_complete"] == pytest.approx(0.6))
    assert found["sparse_spread"] == "a factor 24 between the slowest and the fastest"
    assert found["by_radius"] < 0 and found["global_rate"] == 0.8 and found["window1_rate"] == 0.2
    assert found["n_pairs"] == 2 and found["collapse_words"] == "every mask collapses"
    assert found["uni_vs_bi"] == ("collapses sometimes faster, sometimes more slowly than the bidirectional "
                                  "one (rate ratio 0.50 to 2.40)")
    # beside "disconnected masks": their verdict
    assert found["unconnected_verdicts"] == "dilated: “collapses”"


def test_windows_within_five_percent_collapse_at_the_same_rate():
    """MPNet initialized: uni- over bidirectional rates 0.97 to 1.00 read "more slowly", which no
    reader can see."""
    table = pd.DataFrame({
        "mask": ["complete", "causal window 1", "causal window 2", "window ±1", "window ±2",
                 "window ±1 + 1 global"],
        "edge share": [1.0, 0.02, 0.03, 0.02, 0.04, 0.04], "radius": [1, 64, 32, 64, 32, 1],
        "uniform |λ₂|": [0.0, 0.5, 0.5, 0.99, 0.99, 0.75],
        "rate, initialized": [4.9, 1.05, 1.07, 1.07, 1.08, 1.35],
        "verdict, initialized": ["collapses"] * 6})
    words = mask_design.numbers(table)["uni_vs_bi"]
    assert words == "collapses at the same rate as the bidirectional one, within 5% (rate ratio 0.98 to 0.99)"
    table.loc[1, "rate, initialized"] = 0.9  # a ratio of 0.84: now it is slower
    assert mask_design.numbers(table)["uni_vs_bi"] == ("collapses more slowly than the bidirectional one "
                                                       "(rate ratio 0.84 to 0.99)")


def test_rates_of_masks_that_do_not_collapse_are_not_compared():
    """Pretrained MPNet at 128 tokens: windows keep μ/‖X‖_F (rates near 0, of either sign); their ratios
    mean nothing, and the page says which masks do not collapse instead of ordering them."""
    table = pd.DataFrame({
        "mask": ["complete", "causal window 1", "causal window 4", "window ±1", "window ±2",
                 "window ±1 + 1 global", "random"],
        "edge share": [1.0, 0.02, 0.04, 0.02, 0.04, 0.04, 0.15], "radius": [1, 127, 32, 64, 32, 1, 2],
        "uniform |λ₂|": [0.0, 0.5, 0.5, 0.99, 0.99, 0.75, 0.3],
        "rate, pretrained": [0.8, -0.0013, -0.0042, -0.002, -0.0038, 0.008, 0.09],
        "verdict, pretrained": ["collapses", *["not resolved"] * 5, "reaches the floor"]})
    found = mask_design.numbers(table, "pretrained")
    assert found["n_collapsing"] == 2 and found["collapse_words"].startswith(
        "only 2 of the 7 masks collapse (complete, random); for the other 5 (causal window 1, "
        "causal window 4, window ±1, window ±2, window ±1 + 1 global) no collapse of μ/‖X‖_F is resolved "
        "in these layers: it neither reaches the rounding floor")
    assert found["causal_order"] == "none of them collapses"
    assert found["uni_vs_bi"] == ("does not collapse, and neither does the bidirectional one (rates "
                                  "-0.0042 to -0.0038 per layer), so there is nothing to compare")
    assert found["sparse_spread"] == "the slowest of them does not collapse"


def test_sortable_table_carries_values_and_its_script():
    text = plotting_beyond.sortable_table(pd.DataFrame({"mask": ["a<b"], "radius": [math.nan],
                                                        "rate": [0.25]}))
    assert 'data-value="Infinity">none' in text and 'data-value="0.25">0.25' in text and "a&lt;b" in text
    assert text.count("<script>") == 1 and "rc-sortable" in text


def test_sortable_table_shows_a_missing_integer_as_none_not_na():
    """A nullable integer column (the model's own mask has no radius) holds pd.NA, which printed "<NA>"."""
    text = plotting_beyond.sortable_table(pd.DataFrame({"radius": pd.array([3, None], dtype="Int64")}))
    assert 'data-value="Infinity">none' in text and "&lt;NA&gt;" not in text and "<NA>" not in text


_KINDS = {"complete": ("complete", None), "causal window 2": ("causal_sliding_window", 2),
          "dilated": ("dilated_window", 2), "window ±1": ("sliding_window", 1)}  # zoo labels: mask, window


def test_figure_fits_the_column_with_legible_fonts():
    table = pd.DataFrame({"mask": ["complete", "causal window 2", "dilated"], "edges": [64, 15, 20],
                          "radius": [1, 4, None], "rate, initialized": [1.0, 0.3, 0.1],
                          "rate, pretrained": [0.5, 0.1, 0.0]})
    fig = plotting_beyond.rate_radius_figure(table, _KINDS)
    width = fig.get_figwidth()
    sizes = [t.get_fontsize() for t in fig.findobj(lambda o: hasattr(o, "get_fontsize") and o.get_text())]
    assert width <= 7.0 and min(sizes) * 672 / (width * 96) >= 9  # points at the 672 px column


def test_masks_that_do_not_collapse_are_drawn_hollow_and_named_in_the_legend():
    table = pd.DataFrame({"mask": ["complete", "causal window 2", "window ±1"], "edges": [64, 15, 20],
                          "radius": [1, 4, 8], "rate, pretrained": [0.5, 0.1, -0.002],
                          "verdict, pretrained": ["collapses", "collapses", "stable"]})
    fig = plotting_beyond.rate_radius_figure(table, _KINDS)
    hollow = [c for c in fig.axes[0].collections if len(c.get_offsets()) and not c.get_facecolor().any()]
    assert [list(c.get_offsets()[:, 0]) for c in hollow] == [[8.0]]  # the window that stays put, alone
    assert "hollow: does not collapse" in [t.get_text() for t in fig.legends[0].get_texts()]
    # each mask in its colour and marker, a legend entry per mask (not per window)
    assert [t.get_text() for t in fig.legends[0].get_texts()][:3] == ["complete", "uni-directional window",
                                                                     "sliding window"]
    edges = [tuple(c.get_edgecolor()[0][:3]) for c in hollow]
    assert edges == [to_rgb(palette.MASK_STYLES["sliding_window"].colour)]
    fig = plotting_beyond.rate_radius_figure(table.drop(columns="verdict, pretrained"), _KINDS)
    assert "hollow: does not collapse" not in [t.get_text() for t in fig.legends[0].get_texts()]


def test_without_windows_of_equal_radius_there_is_nothing_to_pair():
    table = pd.DataFrame({"mask": ["complete", "causal window 1", "window ±1", "window ±1 + 1 global"],
                          "edge share": [1.0, 0.1, 0.2, 0.3], "radius": [1, 9, 5, 1],
                          "uniform |λ₂|": [0.0, 0.5, 0.9, 0.7], "rate, initialized": [2.0, 0.5, 0.6, 0.9],
                          "verdict, initialized": ["collapses"] * 4})
    found = mask_design.numbers(table)
    assert found["n_pairs"] == 0
    assert found["uni_vs_bi"] == "has no bidirectional window of the same radius at this sequence length"


def _decomposition_frame(factors: dict, read_from: int = 1) -> pd.DataFrame:
    """A decomposition frame (mask_design.decomposition's columns): per (mask, weights) the value gain and
    attention contraction of every layer 1..4; layers before ``read_from`` are marked as not read."""
    rows = []
    for (mask, weights), (gain, contraction) in factors.items():
        for layer in range(1, 5):
            for metric, value in (("value_gain", gain), ("attention_contraction", contraction)):
                rows.append({"mask": mask, "weights": weights, "metric": metric, "layer": layer,
                             "median": value, "q10": value / 2, "q90": value * 2, "read": layer >= read_from,
                             "above_floor": math.inf if layer >= read_from else 1.0})
    return pd.DataFrame(rows)


def test_attention_drives_the_decay_only_where_its_log_share_is_the_larger():
    frame = _decomposition_frame({("window ±1", "initialized"): (1 / 3, 0.9),  # the value maps drive it
                                  # attention drives it, against a gain > 1
                                  ("causal", "initialized"): (1.2, 0.5),
                                  # no decay at all: gain x contraction > 1
                                  ("window ±1", "pretrained"): (1.5, 0.8),
                                  ("causal", "pretrained"): (0.5, 0.4)})
    shares = mask_design.decay_shares(frame).set_index(["mask", "weights"])
    assert shares["attention_drives"].to_dict() == {("window ±1", "initialized"): False,
                                                    ("causal", "initialized"): True,
                                                    ("window ±1", "pretrained"): False,
                                                    ("causal", "pretrained"): True}
    assert shares.loc[("window ±1", "initialized"), "gain"] == pytest.approx(1 / 3)
    verdicts = [c.verdict for c in mask_design.decomposition_claims(frame)]
    assert verdicts == ["holds partly", "holds partly"]
    words = mask_design.decay_driver(mask_design.decay_shares(frame), "initialized")
    # window ±1 is the only local mask here
    assert words["driver"] == "the value maps' gain" and words["n"] == 1
    words = mask_design.decay_driver(mask_design.decay_shares(frame), "pretrained", local=False)
    assert words["driver"] == "attention's contraction"  # causal alone among complete and causal
    mixed = _decomposition_frame({("window ±1", "pretrained"): (1.5, 0.8),
                                  ("window ±8", "pretrained"): (0.3, 0.9),
                                  ("causal window 4", "pretrained"): (1.1, 0.2)})
    words = mask_design.decay_driver(mask_design.decay_shares(mixed), "pretrained")
    assert words["driver"] == ("attention's contraction for 1 of the 3, the value maps' gain for 1 of the 3, "
                               "neither (μ does not decay) for 1 of the 3")


def test_layers_on_the_floor_are_left_out_of_the_shares():
    frame = _decomposition_frame({("complete", "initialized"): (0.3, 1e-9)}, read_from=3)
    frame.loc[frame["layer"] < 3, "median"] = 1e3  # noise on the floor would decide everything if read
    assert mask_design.decay_shares(frame)["layers"].tolist() == [2]
    assert mask_design.decay_shares(frame)["contraction"].iloc[0] == pytest.approx(1e-9)


def test_decomposition_runs_record_attention_stats_under_keys_of_their_own():
    parameters = {"n_tokens": 32, "n_samples": 2}
    zoo = registry.configure("mask_design", parameters)
    decomposed = mask_design.decomposition_runs(parameters)
    assert len(decomposed) == len(mask_design.DECOMPOSED)
    for part, run in decomposed.items():
        original = zoo[part.removeprefix(mask_design.DECOMPOSITION_PREFIX)].config
        assert run.config.attention_stats and not original.attention_stats
        stored, zoo_stored = stored_parameters(run.config), stored_parameters(original)
        assert stored.pop("attention_stats") is True
        # the theory's bias-free SAN beside the zoo's initialized (with biases) and pretrained weights
        assert stored.pop("weights") == ("initialized_nobias", "initialized", "pretrained")
        assert zoo_stored.pop("weights") == ("initialized", "pretrained") and stored == zoo_stored
    assert "attention_stats" not in stored_parameters(zoo["complete"].config)


def test_decomposition_figure_names_the_masks_below_its_axis():
    frame = _decomposition_frame({("complete", "initialized"): (0.3, 1e-6),
                                  ("causal", "initialized"): (0.3, 0.6)})
    fig = plotting_decomposition.decomposition_figure(frame)
    texts = [t.get_text() for t in fig.axes[1].texts]
    assert texts == ["below the axis:\ncomplete (to 1e-06)"] and not fig.axes[0].texts
    sizes = [t.get_fontsize() for t in fig.findobj(lambda o: hasattr(o, "get_fontsize") and o.get_text())]
    assert fig.get_figwidth() <= 7.0 and min(sizes) * 672 / (fig.get_figwidth() * 96) >= 9
