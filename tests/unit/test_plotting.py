"""Figure export writes every format atomically with its provenance in the metadata; TF32 stays off."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch
from PIL import Image

from legibility import screen_text_px

from rankcollapse.core import masks
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette


def test_export_figure_writes_formats_with_parameters(book):
    fig, ax = plt.subplots()
    plotting.draw_mask(ax, masks.causal_sliding_window_mask(6, 2), "uni-directional")
    assert "radius r = 3" in ax.get_title()
    paths = plotting.export_figure(fig, "fig-test-masks", {"n_tokens": 6, "window": 2})
    plt.close(fig)
    assert {p.name for p in paths.values()} == {f"fig-test-masks.{e}"
                                                for e in ("png", "svg", "pdf", "json", "csv")}
    drawn = pd.read_csv(paths["csv"])  # the mask's cells as drawn: 1 where token i attends to token j
    assert (drawn.loc[drawn["kind"] == "image cell", "value"].sum()
            == masks.causal_sliding_window_mask(6, 2).sum())
    assert all(p.parent == book / "_build" / "figures" for p in paths.values())
    record = json.loads(paths["json"].read_text())
    # the whole record: tests/unit/test_provenance.py
    assert record["parameters"] == {"n_tokens": 6, "window": 2}
    png_text = Image.open(paths["png"]).text
    assert json.loads(png_text["Description"])["parameters"]["window"] == 2
    assert '"window": 2' in paths["svg"].read_text()
    assert paths["pdf"].read_bytes().startswith(b"%PDF")
    assert not list(paths["png"].parent.glob(".*"))  # no temporary files left behind


def test_draw_floor_keeps_floor_visible_on_log_axis():
    fig, ax = plt.subplots()
    ax.semilogy([0, 1, 2], [1.0, 1e-3, 1e-6])
    plotting.draw_floor(ax, 1e-13)
    low, high = ax.get_ylim()
    assert low < 1e-13 < 1e-6 < high
    plt.close(fig)


def test_tf32_is_off_after_import():
    import rankcollapse  # noqa: F401

    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cudnn.allow_tf32 is False


def _tidy_table():
    """A tiny tidy experiments table: 2 weights x 3 masks x 2 norms, mu and floor over 4 layers."""
    import pandas as pd

    rows = []
    for weights in ("initialized", "pretrained"):
        for mask in ("complete", "causal", "sliding_window"):
            for norm in ("none", "unit"):
                for layer in range(5):
                    mu = 10.0 ** (-3 * layer) if mask == "complete" else 1.0 / (1 + layer)
                    for metric, value in (("mu", max(mu, 1e-13)), ("floor", 1e-13)):
                        rows.append(dict(weights=weights, mask=mask, norm=norm, layer=layer, metric=metric,
                                         mean=value, median=value, q10=value / 2, q90=value * 2))
    return pd.DataFrame(rows)


def test_layer_curve_grid_is_column_wide_wrapped_and_legible():
    plotting.set_theme()
    fig = plotting.layer_curve_grid(_tidy_table(), "mu", titles={"initialized": "init"})
    axes = [ax for ax in fig.get_axes() if ax.has_data()]
    assert len(axes) == 6  # 2 weights x 3 masks; the empty fourth cell of each block is removed
    assert len({round(ax.get_position().x0, 3) for ax in axes}) == 2  # at most two columns
    assert fig.get_figwidth() == pytest.approx(plotting.COLUMN_WIDTH_IN)
    assert axes[0].get_ylabel() == r"$\mu(X)$"
    # one legend for the whole figure, in the last block's empty cell
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.get_axes() if ax.get_legend())]
    assert len(legends) == 1 and not legends[0].axes.has_data()
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert labels[:2] == ["pure attention", "+ LayerNorm D (unit norm)"]  # the norms, once each
    # crosses on the complete mask
    assert "dtype floor" in labels and any("of its floor" in label for label in labels)
    info = plotting.legibility(fig)
    assert info["min_font_pt"] >= 11 and info["inline_dpi"] == plotting.SCREEN_DPI
    shown = screen_text_px(info["min_font_pt"], info["inline_dpi"], info["width_in"] * info["inline_dpi"],
                           plotting.COLUMN_PX)
    assert shown >= plotting.MIN_TEXT_PX
    for ax in axes:  # the shared y range spans every panel's curves and the shaded floor
        low, high = ax.get_ylim()
        assert low < 1e-13 and high >= 2.0
    plt.close(fig)


def test_legibility_finds_the_smallest_visible_text():
    fig, ax = plt.subplots()
    ax.set_title("big", fontsize=14)
    ax.text(0.5, 0.5, "tiny", fontsize=4)
    ax.text(0.5, 0.5, "hidden", fontsize=2, visible=False)
    ax.tick_params(labelsize=8)
    assert plotting.legibility(fig)["min_font_pt"] == 4
    plt.close(fig)


def test_screen_text_px_scales_with_the_shown_width():
    assert screen_text_px(9, 144, 1000, 500) == pytest.approx(9.0)
    with pytest.raises(ValueError, match="shown_px"):
        screen_text_px(9, 110, 1000, 0)


def test_axis_label_uses_math_and_names_allowed_metrics():
    assert plotting.axis_label("relative_mu") == r"$\mu(X)\,/\,\|X\|_F$"
    assert plotting.axis_label("sigma_min") == r"$\sigma_{\min}(X)$"
    with pytest.raises(ValueError, match="metric must be one of"):
        plotting.axis_label("mu_typo")


def test_panel_grid_wraps_and_removes_unused_cells():
    fig, axes = plotting.panel_grid(3)
    assert len(axes) == 3 and len(fig.get_axes()) == 3
    assert fig.get_figwidth() == pytest.approx(plotting.COLUMN_WIDTH_IN)
    plt.close(fig)
    with pytest.raises(ValueError, match="n_panels and max_cols"):
        plotting.panel_grid(0)


def test_export_records_legibility_and_svg_keeps_text(book):
    plotting.set_theme()
    fig, axes = plotting.panel_grid(2)
    axes[0].set_title("selectable")
    paths = plotting.export_figure(fig, "fig-test-text", {})
    plt.close(fig)
    record = json.loads(paths["json"].read_text())
    assert (record["legibility"]["min_font_pt"] > 0
            and record["legibility"]["inline_dpi"] == plotting.SCREEN_DPI)
    assert ">selectable<" in paths["svg"].read_text()  # svg.fonttype none: text, not glyph paths


def test_grid_with_long_labels_stays_in_the_column_and_keeps_colours():
    import io

    plotting.set_theme()
    table = _tidy_table()
    table["norm"] = table["norm"].map({"none": "pure attention, 32 samples, a long label",
                                       "unit": "+ LayerNorm D (unit norm), 512 samples"})
    table = table[~((table["weights"] == "pretrained") & (table["norm"].str.startswith("pure")))]
    fig = plotting.layer_curve_grid(table, "mu")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi, bbox_inches="tight")
    # shown at its natural size: text stays legible
    assert Image.open(buffer).width <= plotting.COLUMN_PX * 1.05
    for ax in fig.get_axes()[:2]:  # the complete and causal panels: every curve in its mask's colour
        mask = "complete" if ax.get_title() == "complete" else "causal"
        assert {line.get_color() for line in ax.get_lines() if not line.get_label().startswith("_")} == {
            palette.MASK_STYLES[mask].colour}
    plt.close(fig)


def test_label_outer_labels_the_lowest_panel_of_a_short_column():
    fig, axes = plotting.panel_grid(3, sharex=True, sharey=True)
    for ax in axes:
        ax.set_xlabel("layer")
        ax.set_ylabel("mu")
    plotting.label_outer(axes, 2)
    fig.canvas.draw()
    visible = [[t.get_visible() and bool(t.get_text()) for t in ax.get_xticklabels()] for ax in axes]
    assert not any(visible[0]) and any(visible[1]) and any(visible[2])  # panel 2 has no panel below it
    assert [ax.xaxis.label.get_visible() for ax in axes] == [False, True, True]
    assert [ax.yaxis.label.get_visible() for ax in axes] == [True, False, True]
    plt.close(fig)


def _one_curve(values, norm_value: float, exact: float = 0.0):
    """One pure-attention curve: mu = values * norm, relative_mu = values, their floors, the exact flag."""
    import numpy as np
    import pandas as pd

    eps = float(np.finfo(np.float64).eps)
    rows = []
    for layer, v in enumerate(values):
        for metric, value in (("mu", v * norm_value), ("relative_mu", v), ("norm", norm_value),
                              ("floor", eps * norm_value), ("relative_floor", eps), ("exact", exact)):
            rows.append(dict(weights="initialized", variant="SAN", mask="causal", norm="none", label="pure",
                             layer=layer, metric=metric, mean=value, median=value, q10=value, q90=value))
    return pd.DataFrame(rows)


def _floor_line(ax) -> float:
    flat = [line.get_ydata()[0] for line in ax.get_lines() if len(set(line.get_ydata())) == 1]
    assert len(flat) == 1
    return float(flat[0])


def test_relative_mu_panel_draws_eps_not_eps_times_norm():
    import numpy as np

    eps = float(np.finfo(np.float64).eps)
    table = _one_curve([10.0 ** -k for k in range(6)], norm_value=1e3)
    fig, ax = plt.subplots()
    plotting.plot_layer_curves(ax, table, "relative_mu", hue="label")
    assert _floor_line(ax) == pytest.approx(eps)
    fig, ax = plt.subplots()
    plotting.plot_layer_curves(ax, table, "mu", hue="label")
    assert _floor_line(ax) == pytest.approx(eps * 1e3)
    plt.close("all")


def test_exactly_tracked_curves_below_the_floor_are_not_flagged():
    below = [10.0 ** -(4 * k) for k in range(8)]  # reaches 1e-28, far below eps
    crosses = []
    for exact in (0.0, 1.0):
        fig, ax = plt.subplots()
        plotting.plot_layer_curves(ax, _one_curve(below, 1.0, exact), "relative_mu", hue="label")
        scatters = [c for c in ax.collections if isinstance(c, matplotlib.collections.PathCollection)]
        crosses.append(sum(len(c.get_offsets()) for c in scatters))
    assert crosses[0] >= 3 and crosses[1] == 0
    plt.close("all")
