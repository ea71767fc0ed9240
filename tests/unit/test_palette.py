"""One visual language for every figure of the book: the palette's table (a colour and a marker per mask, a
line style per norm, greys for everything else) and every page's figures, drawn from the stored results as
their pages draw them and read back from their data download (:func:`drawn.drawn_table`), held to it.

Before the palette, the Theorem 1 page drew the same masks in three colour maps, Fig. 2 coloured by norm and
Fig. 7.4 by mask, Fig. 3 drew temperatures in mask colours; no figure's data said which colour meant what."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.colors import to_rgb
from palette_rule import one_colour_per_mask, problems

from rankcollapse.book import registry, report
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting import palette
from rankcollapse.book.plotting.drawn import drawn_table
from rankcollapse.book.runner import page_parameters
from rankcollapse.core.masks import MASK_NAMES, PAPER_MASKS
from rankcollapse.core.norms import NORM_NAMES

# they compute (the theory pages, the data and large-models pages) or draw many sweeps: over 3 s each
SLOW = {"theorem1", "theorem2", "counterexample", "equilibria", "reviewers", "data", "large_models", "fig2",
        "pretrained_panels"}


def test_every_mask_has_its_own_colour_and_marker_and_every_norm_its_own_line_style():
    assert set(palette.MASK_STYLES) == {*MASK_NAMES, "model"} and set(palette.NORM_STYLES) == set(NORM_NAMES)
    styles = list(palette.MASK_STYLES.values())
    assert len({s.colour for s in styles}) == len(styles) and len({s.marker for s in styles}) == len(styles)
    assert len({repr(s) for s in palette.NORM_STYLES.values()}) == len(palette.NORM_STYLES)
    with pytest.raises(ValueError, match="mask must be one of"):
        palette.mask_style("diagonal")
    with pytest.raises(ValueError, match="norm must be one of"):
        palette.norm_style("batchnorm")


def _luminance(colour: str) -> float:
    return sum(w * c for w, c in zip((0.2126, 0.7152, 0.0722), to_rgb(colour)))


def test_the_papers_masks_stay_apart_in_lightness_or_hue_and_none_is_grey():
    """Okabe-Ito's colours for the paper's four masks and the no-mixing control: no two of them the same in
    both hue and lightness, none of them a grey (the greys belong to the other series)."""
    colours = [palette.MASK_STYLES[m].colour for m in (*PAPER_MASKS, "self")]
    assert not any(max(to_rgb(c)) - min(to_rgb(c)) < 0.1 for c in colours)
    for i, a in enumerate(colours):
        for b in colours[i + 1:]:
            apart = abs(_luminance(a) - _luminance(b)) > 0.05 or max(
                abs(x - y) for x, y in zip(to_rgb(a), to_rgb(b))) > 0.4
            assert apart, (a, b)


def test_non_mask_series_take_greys_in_their_dimensions_order_never_a_masks_colour():
    greys = palette.non_mask_colours([64.0, None, 1 / 64, 1.0])
    assert list(greys) == [1 / 64, 1.0, 64.0, None]  # darkest the smallest, the missing value last
    lightness = [to_rgb(c)[0] for c in greys.values()]
    assert lightness == sorted(lightness) and len(set(lightness)) == 4
    assert not set(greys.values()) & palette.MASK_COLOURS and "#000000" not in greys.values()


def _rows(**columns) -> pd.DataFrame:
    """A tidy table of one layer, a row per combination given column-wise."""
    return pd.DataFrame({"metric": "mu", "layer": 1, "median": 1.0, **columns})


def test_the_colour_encodes_the_mask_unless_the_curves_of_a_panel_differ_in_something_else():
    fig2 = palette.curve_styles(_rows(mask=["causal", "causal", "complete"], norm=["none", "unit", "none"],
                                      label=["pure", "LN", "pure"]), ["mask", "label"])
    assert {s.colour for k, s in fig2.items() if k[0] == "causal"} == {palette.MASK_STYLES["causal"].colour}
    assert fig2[("causal", "LN")].linestyle == palette.NORM_STYLES["unit"]
    fig3 = palette.curve_styles(_rows(mask="causal", temperature=[1 / 64, 1.0, 64.0], label=["a", "b", "c"]),
                                "label")
    assert {s.dims["colour_encodes"] for s in fig3.values()} == {"temperature"}
    assert not {s.colour for s in fig3.values()} & palette.MASK_COLOURS
    skip = palette.curve_styles(_rows(mask=["complete", "complete", "model"], norm=["none", "none", "model"],
                                      skip=[False, True, True], label=["pure", "+ skip", "full"]), "label")
    assert skip["full"].colour == palette.MASK_STYLES["model"].colour
    assert to_rgb(skip["pure"].colour)[0] < to_rgb(skip["+ skip"].colour)[0] - 0.3  # clearly apart: two greys
    entries = palette.style_entries(skip)
    assert list(entries) == ["no skip connection", "+ skip connection", "full transformer"]


def _page_figures(name: str, repo_root):
    """Page ``name``'s figures as its ``show`` draws them from the stored results, as (stem, figure)."""
    parameters = page_parameters(registry.page(name).path(repo_root))
    results = registry.compute(name, **parameters)
    if parameters.get("show_largest_stored", False):
        results = report.largest_stored(results)
    return [(f.stem, f.figure) for f in registry.show(name, results, parameters).figures]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in sorted(registry.PAGES)])
def test_every_figure_of_a_page_keeps_the_books_visual_language(name, repo_root):
    plotting.set_theme()
    tables, found = {}, []
    for stem, fig in _page_figures(name, repo_root):
        tables[stem] = drawn_table(fig)
        plt.close(fig)
        found += problems(tables[stem], stem)
    assert not found, "\n".join(found)
    assert all(len(colours) == 1 for colours in one_colour_per_mask(tables).values())


def test_the_rule_finds_a_mask_in_another_colour_a_grey_less_series_and_a_wrong_line_style():
    good = pd.DataFrame({"kind": ["line", "line"], "series": ["a", "b"], "mask": ["causal", "causal"],
                         "norm": ["none", "unit"], "colour": [palette.MASK_STYLES["causal"].colour] * 2,
                         "colour_encodes": ["mask", "mask"], "marker": ["s", "s"],
                         "line_style": ["solid", "dashed"]})
    assert problems(good, "fig") == []
    bad = good.assign(colour=["#0072b2", palette.MASK_STYLES["causal"].colour], line_style=["solid", "solid"])
    found = problems(bad, "fig")
    assert any("mask causal drawn in ['#0072b2']" in f for f in found)
    assert any("norm unit drawn ['solid'], not dashed" in f for f in found)
    silent = good.assign(colour_encodes=[None, "temperature"], colour=["#d55e00", "#e69f00"])
    found = problems(silent, "fig")
    assert any("say not what their colour encodes" in f for f in found)
    assert any("no mask drawn in colours ['#e69f00']" in f for f in found)
    assert problems(good.drop(columns=["colour", "colour_encodes", "marker", "line_style"]), "fig") == [
        "fig: the data name no colours (columns colour, colour_encodes, marker, line_style missing)"]
