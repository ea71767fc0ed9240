"""Every legend entry of a figure is visible, or its caption names it: computed from the plotted data (the
curves' points in display pixels), not from the picture. The figures are drawn from the stored results as
their pages draw them (no book build). Before the plotting layer named and restyled coinciding curves, these
failed on Fig. 8.2 (fig3 relative), 9.1 (fig4), 10.3 (G.1 temperatures), 11.1 (sample size), 12.2 and 12.3
(skip connections), 15.1/15.2 (RMSNorm decoders) and 16.1 (sliding-window model)."""

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from rankcollapse.book import registry
from rankcollapse.book import report, runner
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import logaxis, overlap, palette
from rankcollapse.book.plotting.drawn import drawn_table

# (page, figure stem): the layer figures whose curves coincided on main
_FIGURES = [
    ("fig3", "fig-fig3-relative"),
    ("fig4", "fig-fig4-geometry"),
    ("appendix_g1", "fig-appendix-g1-fig3"),
    ("sample_size", "fig-sample-size-mu"),
    ("skip_connections", "fig-skip-connections-deep"),
    ("skip_connections", "fig-skip-connections-norm"),
    ("rmsnorm_decoders", "fig-rmsnorm-decoders-relative"),
    ("sliding_window_model", "fig-sliding-window-model-relative"),
]


def _draw(page: str, stem: str, tmp_path, monkeypatch):
    """The figure ``stem`` its page's ``show`` draws from the page's stored results, and its caption words."""
    monkeypatch.setenv("RANKCOLLAPSE_FIGURE_DIR", str(tmp_path))
    plotting.set_theme()
    defaults = runner.page_parameters(registry.page(page).path(runner.repo_root()))
    results = report.largest_stored(registry.compute(page, **defaults))
    shown = registry.show(page, results, defaults)
    figure = next(f for f in shown.figures if f.stem == stem)
    for other in shown.figures:
        if other is not figure:
            plt.close(other.figure)
    return figure.figure, overlap.caption_notes(figure.figure)


def _distance(points: np.ndarray, path: np.ndarray) -> np.ndarray:
    """Each point's distance to the polyline ``path``: to each segment by projection, the nearest taken.
    Shapes: points [point, 2], path [vertex, 2] -> [point]."""
    if len(path) < 2:
        far = np.full(len(points), np.inf)
        return np.linalg.norm(points[:, None] - path[None], axis=2).min(axis=1) if len(path) else far
    best = np.full(len(points), np.inf)
    for a, b in zip(path[:-1], path[1:]):
        t = np.clip((points - a) @ (b - a) / max(float((b - a) @ (b - a)), 1e-12), 0.0, 1.0)  # [point]
        best = np.minimum(best, np.linalg.norm(points - (a + t[:, None] * (b - a)), axis=1))
    return best


def hidden_fractions(fig) -> dict[str, float]:
    """Per legend entry, the share of its drawn points (all panels together) within overlap.PIXEL of another
    entry's line in the same panel: an oracle of what a reader cannot tell apart, beside the plotting layer's
    own per-pair :func:`overlap.coincidences` that names them."""
    fig.canvas.draw()
    counts: dict[str, list[int]] = {}
    for ax in fig.axes:
        lines = overlap.entry_lines(ax)
        for label, own in lines.items():
            others = [line for other, group in lines.items() if other != label for line in group]
            for line in own:
                points = overlap.drawn_pixels(line)
                near = (np.min([_distance(points, overlap.drawn_pixels(o)) for o in others], axis=0)
                        <= overlap.PIXEL) if others and len(points) else np.zeros(len(points), bool)
                tally = counts.setdefault(label, [0, 0])
                tally[0] += int(near.sum())
                tally[1] += len(near)
    return {label: hidden / total for label, (hidden, total) in counts.items() if total}


def _after(page: str, key: str) -> str:
    """What follows the ``{glue:figure}`` ``key`` in the page's file, up to the next figure."""
    text = registry.page(page).path(runner.repo_root()).read_text()
    match = re.search(r"```\{glue:figure\} " + re.escape(key) + r"\n.*?```", text, re.S)
    assert match, f"no glue:figure {key} on page {page}"
    return text[match.end():].split("```{glue:figure}")[0]


@pytest.mark.slow
@pytest.mark.parametrize("page, stem", _FIGURES, ids=[f[1] for f in _FIGURES])
def test_every_legend_entry_is_visible_or_named_as_coinciding(page, stem, tmp_path, monkeypatch):
    fig, notes = _draw(page, stem, tmp_path, monkeypatch)
    hidden = {label for label, share in hidden_fractions(fig).items() if share > overlap.HIDDEN_FRACTION}
    named = notes.split("A y axis ends")[0]
    assert all(label in named for label in hidden), f"hidden and not named in the caption: {hidden}"
    key = stem.replace("-", "_")
    assert f"```{{glue:md}} {key}_notes" in _after(page, key), "the page does not show the computed words"
    plt.close(fig)


def _two_curves(gap: float):
    """One panel, two curves over 12 layers, the second ``gap`` times the first."""
    layers = np.arange(1, 13)
    rows = [dict(weights="w", mask="m", label=label, layer=int(t), metric="mu", median=v, mean=v,
                 q10=v, q90=v)
            for label, factor in (("a", 1.0), ("b", gap)) for t, v in zip(layers, factor * 0.5 ** layers)]
    return pd.DataFrame(rows)


def test_coinciding_curves_are_found_named_and_restyled_and_separate_ones_are_not():
    plotting.set_theme()
    same = plotting.layer_curve_grid(_two_curves(1.001), "mu", row="weights", col="mask", hue="label")
    shares = hidden_fractions(same)
    assert shares["a"] > 0.9 and shares["b"] > 0.9
    words = overlap.coincidence_words(same)
    assert "a and b in the panel" in words
    assert "0.1 %" in words  # the curves differ by 0.1 %, measured where they overlap
    # each keeps its colour and line style and gets markers of its own place ...
    styles = {line.get_label(): (line.get_color(), line.get_markevery())
              for line in same.axes[0].get_lines() if line.get_label() in ("a", "b")}
    assert styles["a"][0] != styles["b"][0] and styles["a"][1] != styles["b"][1]
    # ... and of its own fill where both are one mask's colour (two norms of the causal mask)
    norms = {"a": "none", "b": "unit"}
    one_mask = _two_curves(1.001).assign(mask="causal", norm=lambda t: t["label"].map(norms))
    fig = plotting.layer_curve_grid(one_mask, "mu", row="weights", col="mask", hue="label")
    lines = {line.get_label(): line for line in fig.axes[0].get_lines() if line.get_label() in ("a", "b")}
    assert lines["a"].get_color() == lines["b"].get_color() == palette.MASK_STYLES["causal"].colour
    assert lines["a"].get_fillstyle() != lines["b"].get_fillstyle()
    assert lines["a"].get_marker() == lines["b"].get_marker() == palette.MASK_STYLES["causal"].marker
    apart = plotting.layer_curve_grid(_two_curves(100.0), "mu", row="weights", col="mask", hue="label")
    assert max(hidden_fractions(apart).values()) == 0 and overlap.coincidence_words(apart) == ""
    plt.close("all")


def test_a_log_axis_is_cut_below_the_floor_and_the_cut_is_named():
    fig, ax = plt.subplots()
    layers = np.arange(1, 40)
    ax.loglog(layers, 10.0 ** (-3.0 * layers), label="falls")
    ax.loglog(layers, np.full(len(layers), 1e-3), label="stays")
    plotting.draw_floor(ax, 1e-16)
    low, high = logaxis.fit_log_axes([ax], logaxis.shaded_floor([ax]))
    assert low == pytest.approx(1e-16 / 10 ** logaxis.CUT_DECADES) and high == pytest.approx(3.0 * 1e-3)
    words = logaxis.cut_words(fig)
    assert "falls goes below it" in words and "1.0e-117" in words and "stays" not in words
    plt.close(fig)


def test_a_floor_far_below_every_curve_is_left_off_the_axis_and_named():
    fig, ax = plt.subplots()
    ax.loglog([1, 2, 3], [1.0, 0.5, 0.2], label="curve")
    plotting.draw_floor(ax, 1e-16)
    low, _ = logaxis.fit_log_axes([ax], logaxis.shaded_floor([ax]))
    assert low == pytest.approx(0.2 / 3)
    assert "rounding floor lies below the axis" in logaxis.cut_words(fig)
    plt.close(fig)


def test_figures_draw_the_median_the_verdicts_use():
    table = _two_curves(1.0).assign(mean=lambda t: 10 * t["median"])
    fig, ax = plt.subplots()
    plotting.plot_layer_curves(ax, table, "mu", hue="label", floor=False)
    line = next(line for line in ax.get_lines() if line.get_label() == "a")
    np.testing.assert_allclose(line.get_ydata(), table.loc[table["label"] == "a", "median"])
    assert plotting.centre_of("full_rank") == "mean"  # a share of samples is the indicator's mean
    plt.close(fig)


def test_a_curve_below_the_clamp_is_not_drawn_as_a_plateau_and_is_marked():
    import torch

    from rankcollapse.book.plotting import theory
    from rankcollapse.theory.dynamics import CollapseSummary

    falls = torch.tensor([10.0 ** (-12 * t) for t in range(8)], dtype=torch.float64).repeat(4, 1)  # to 1e-84
    run = CollapseSummary(radius=1, epsilon=0.1, mu_exact=falls, mu_direct=falls.clamp(min=1e-16),
                          floor=torch.full_like(falls, 1e-16), rates=torch.ones(4))
    fig = theory.summary_bands({"panel": {"complete": run}}, exact=True, y_min=1e-40)
    ax = fig.axes[0]
    curve = next(line for line in ax.get_lines() if line.get_label().startswith("complete"))
    drawn = np.asarray(curve.get_ydata(), dtype=float)
    assert np.isnan(drawn[4:]).all() and not np.isnan(drawn[:4]).any()  # 1e-48 and below: not drawn at 1e-40
    assert ax.get_ylim()[0] == pytest.approx(1e-40)
    assert any("falls below 1e-40" in text.get_text() for text in fig.legends[0].get_texts())
    plt.close(fig)


def test_masks_of_one_radius_and_rate_do_not_hide_each_other():
    from rankcollapse.book.plotting import theory

    table = pd.DataFrame({"radius": [2, 2, 1], "rate": [0.7, 0.7, 2.0]},
                         index=["strided", "random", "complete"])
    sweep = pd.DataFrame({"radius": [1, 2], "rate": [0.5, 0.2], "linear rate": [0.6, 0.25]}, index=[8, 4])
    fig = theory.rate_figure(table, sweep, 8.0)
    fig.canvas.draw()
    left = fig.axes[0]
    points = [c.get_offset_transform().transform(c.get_offsets())[0] for c in left.collections]
    assert np.linalg.norm(points[0] - points[1]) > 8  # pixels: the strided marker sat under the random one
    # drawn apart, their data stay at radius 2 (the complete mask's was read off the axis at 0.65)
    assert [c.get_offsets()[0][0] for c in left.collections] == [2, 2, 1]
    assert len([t for t in fig.axes[1].get_yticklabels() if t.get_text()]) >= 3  # one decade had one tick
    plt.close(fig)


def test_the_contrast_legend_reads_in_the_order_of_the_bars_and_zero_bars_show():
    from rankcollapse.book.plotting import theory

    contrast = pd.DataFrame({"mask": ["causal"] * 3, "W_V": ["orthogonal", "gaussian", "uniform"],
                             "not collapsed": [0.0, 0.05, 0.02], "low": [0.0, 0.03, 0.01],
                             "high": [0.02, 0.09, 0.05]})
    fig = theory.contrast_figure(contrast, 1e-8, 400)
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["$W_V$ orthogonal", "$W_V$ gaussian",
                                                          "$W_V$ uniform"]
    assert legend._ncols == 3  # one row: read left to right as the bars are
    # a fraction of 0 is said, not drawn as a sliver of a bar; its data name the mask and the interval
    assert [t.get_text() for t in fig.axes[0].texts] == ["0"]
    assert not any(c.get_linewidth()[0] >= 4 for c in fig.axes[0].collections if hasattr(c, "get_segments"))
    bars = drawn_table(fig)
    bars = bars[bars["kind"] == "bar"]
    assert bars["x"].tolist() == ["causal"] * 3 and bars["W_V"].tolist() == [
        "W_V orthogonal", "W_V gaussian", "W_V uniform"]
    assert bars["y_high"].tolist() == [0.02, 0.09, 0.05] and bars["y_low"].tolist() == [0.0, 0.03, 0.01]
    plt.close(fig)


def test_the_mask_design_symlog_axis_labels_a_negative_tick():
    from rankcollapse.book.plotting import beyond

    table = pd.DataFrame({"mask": ["complete", "causal window 4"], "edges": [64, 30], "radius": [1.0, 4.0],
                          "rate, pretrained": [0.8, -0.006]})
    fig = beyond.rate_radius_figure(table, {"complete": ("complete", None),
                                            "causal window 4": ("causal_sliding_window", 4)})
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert any(label.startswith(("-", "−")) for label in labels) and "0" in labels
    plt.close(fig)
