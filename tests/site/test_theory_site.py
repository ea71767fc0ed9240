"""Browser tests of the theory chapter: the counterexample's Fig. 1 renders with its glued numbers."""

import re

import pytest

from rankcollapse.book.plotting.common import COLUMN_PX

pytestmark = pytest.mark.site


def _loaded(figure) -> bool:
    return figure.locator("img").evaluate("i => i.complete && i.naturalWidth > 0")


def test_counterexample_figure_renders_with_glued_numbers(site_page, js_errors, repo_root):
    site_page.goto("book/theory/counterexample.html")
    figure = site_page.locator("figure#fig-counterexample-fig1")
    assert figure.count() == 1 and _loaded(figure)
    width = figure.locator("img").evaluate("i => i.naturalWidth")
    # the two-panel figure, column-wide (not a placeholder)
    assert 0.9 * COLUMN_PX < width <= 1.15 * COLUMN_PX
    caption = " ".join(figure.locator("figcaption").inner_text().split())
    assert re.search(r"Fig\. \d+(\.\d+)*", caption)
    assert "3 of the 6 pictured starts keep full rank" in caption
    assert re.search(r"meets at a star, at most \d\.\de[+-]\d+ apart", caption)
    body = " ".join(site_page.locator("main").inner_text().split())
    assert "-0.2585" in body and "-0.9660" in body  # B, glued from the fixed-point analysis
    assert re.search(r"a fraction 0\.1\d{3} \(95% Wilson interval 0\.\d{4}–0\.\d{4}\)", body)
    assert site_page.locator("#prop-counterexample").count() == 1  # the proposition block and its anchor
    assert site_page.locator("div.figure-downloads[data-figure='fig-counterexample-fig1'] "
                             "a[href$='fig-counterexample-fig1.svg']").count() == 1
    for other in ("fig-counterexample-basins", "fig-counterexample-rotation"):
        assert _loaded(site_page.locator(f"figure#{other}"))
    figure.screenshot(path=str(repo_root / "_build" / "screenshot-counterexample-fig1.png"))
    assert js_errors == []


def test_theorem1_closing_note_lists_every_mask(site_page, js_errors):
    site_page.goto("book/theory/theorem1.html")
    assert _loaded(site_page.locator("figure#fig-theorem1-masks"))
    body = " ".join(site_page.locator("main").inner_text().split())
    for name in ("complete", "causal", "sliding_window", "causal_sliding_window", "strided", "dilated_window",
                 "global_window", "random"):
        assert name in body
    assert "does not apply: no center node" in body
    assert re.search(r"the causal mask collapses at 0\.\d{3} per layer \(radius 1\)", body)
    assert js_errors == []
