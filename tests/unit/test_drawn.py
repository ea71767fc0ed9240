"""A figure's CSV download holds exactly the points it draws: checked against the arrays that were drawn."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette
from rankcollapse.book.plotting.drawn import COLUMNS, STYLE_COLUMNS, drawn_table


def _curves() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [{"label": name, "metric": "mu", "layer": t, "median": m, "q10": m / 2, "q90": m * 3}
            for name in ("pure attention", "LayerNorm D")
            for t, m in enumerate(rng.uniform(0.1, 1.0, 5), start=1)]
    return pd.DataFrame(rows)


def test_layer_curves_come_back_as_their_lines_and_bands():
    table = _curves()
    fig, ax = plt.subplots()
    plotting.plot_layer_curves(ax, table, "mu", centre="median", floor=False, log_x=False)
    ax.set_title("causal")
    drawn = drawn_table(fig)
    plt.close(fig)
    assert tuple(drawn.columns[:len(COLUMNS)]) == COLUMNS and set(drawn["panel_title"]) == {"causal"}
    assert tuple(drawn.columns[-len(STYLE_COLUMNS):]) == STYLE_COLUMNS
    for name, curve in table.groupby("label"):
        line = drawn[(drawn["series"] == name) & (drawn["kind"] == "line")]
        assert (line["x"].tolist() == curve["layer"].tolist()
                and line["y"].tolist() == pytest.approx(curve["median"].tolist()))
        band = drawn[(drawn["series"] == name) & (drawn["kind"] == "band")].sort_values("x")
        assert band["y_low"].tolist() == pytest.approx(curve["q10"].tolist())
        assert band["y_high"].tolist() == pytest.approx(curve["q90"].tolist())


def test_scatter_bars_images_and_reference_lines():
    fig, (left, right) = plt.subplots(1, 2)
    left.scatter([1.0, 2.0], [3.0, 4.0], label="masks")
    left.bar([0, 1], [0.25, 0.75], label="rank 1")
    left.axhline(0.5)  # a reference value, not data
    right.imshow(np.array([[1.0, 2.0], [3.0, 4.0]]), origin="lower", extent=(0, 2, 0, 2))
    drawn = drawn_table(fig)
    plt.close(fig)
    points = drawn[drawn["kind"] == "points"]
    assert (points[["x", "y"]].to_numpy().tolist() == [[1.0, 3.0], [2.0, 4.0]]
            and set(points["series"]) == {"masks"})
    assert drawn.loc[drawn["kind"] == "bar", ["x", "y"]].to_numpy().tolist() == [[0.0, 0.25], [1.0, 0.75]]
    cells = drawn[drawn["kind"] == "image cell"].set_index(["x", "y"])["value"]
    assert cells[(0.5, 0.5)] == 1.0 and cells[(1.5, 0.5)] == 2.0 and cells[(0.5, 1.5)] == 3.0  # origin lower
    assert 0.5 not in drawn.loc[drawn["kind"] == "line", "y"].tolist() and set(drawn["panel"]) == {0, 1}


def test_the_csv_names_every_dimension_it_draws_in_one_line_of_plain_text_per_field():
    """Fig. 2's CSV told its panels apart by index only (no initialized or pretrained column), with panel
    titles holding newlines and TeX."""
    rows = [{"label": norm, "weights": weights, "mask": "causal", "norm": norm, "metric": "mu", "layer": t,
             "median": 0.5 ** t, "q10": 0.4 ** t, "q90": 0.6 ** t}
            for weights in ("initialized", "pretrained") for norm in ("none", "unit") for t in range(1, 5)]
    fig = plotting.layer_curve_grid(pd.DataFrame(rows), "mu", col="mask", hue="label",
                                    titles={"initialized": "initialized:\nU(±1/√d)"})
    drawn = drawn_table(fig)
    plt.close(fig)
    lines = drawn[drawn["kind"] == "line"]
    assert set(zip(lines["weights"], lines["mask"], lines["norm"])) == {
        (w, "causal", n) for w in ("initialized", "pretrained") for n in ("none", "unit")}
    assert set(lines["colour"]) == {palette.MASK_STYLES["causal"].colour}
    assert set(lines["colour_encodes"]) == {"mask"}
    assert dict(zip(lines["norm"], lines["line_style"])) == {"none": "solid", "unit": "dashed"}
    assert set(lines["marker"]) == {palette.MASK_STYLES["causal"].marker}
    bands = drawn[drawn["kind"] == "band"]
    assert set(zip(bands["weights"], bands["norm"])) == set(zip(lines["weights"], lines["norm"]))
    text = drawn.select_dtypes(exclude="number").astype(str)
    assert not text.apply(lambda c: c.str.contains("\n|\\$", regex=True)).any().any()
    assert set(drawn["y_label"]) == {"μ(X)"} and set(drawn["x_label"]) == {"layer t"}
