"""Browser tests of the experiment pages in the built site: figures render with their weights named,
glued numbers appear (no raw roles), the scale note is shown, and the reproduce page lists the store."""

import re

import pytest

pytestmark = pytest.mark.site

PAGES = {
    "book/experiments/fig2.html": ["fig-fig2-mu", "fig-fig2-relative"],
    "book/experiments/fig3.html": ["fig-fig3-mu"],
    "book/experiments/fig4.html": ["fig-fig4-geometry"],
    "book/experiments/appendix_g1.html": ["fig-appendix-g1-fig2", "fig-appendix-g1-fig3"],
    "book/response/sample_size.html": ["fig-sample-size-mu", "fig-sample-size-ratio"],
    "book/response/skip_connections.html": ["fig-skip-connections-mu"],
    "book/response/pretrained_panels.html": ["fig-pretrained-panels-fig2", "fig-pretrained-panels-fig3"],
}


@pytest.mark.parametrize("url", list(PAGES))
def test_experiment_page_renders(site_page, js_errors, url):
    site_page.goto(url)
    for label in PAGES[url]:
        figure = site_page.locator(f"figure#{label}")
        assert figure.count() == 1, label
        assert figure.locator("img").evaluate("i => i.complete && i.naturalWidth > 0")
        assert re.search(r"Fig\. \d+", figure.locator("figcaption").inner_text())
    body = site_page.locator("main").inner_text()
    assert "Scale of this run:" in body and "computed on" in body
    assert "{glue" not in body and "glue:text" not in body
    assert js_errors == []


def test_fig2_names_the_model_and_the_floor(site_page):
    site_page.goto("book/experiments/fig2.html")
    body = " ".join(site_page.locator("main").text_content().split())  # collapsed blocks too
    assert re.search(r"not the paper.s BERT-base", body) and re.search(r"all-(MiniLM-L6|mpnet-base)-v2", body)
    # LayerNorm at the complete mask against its floor: a multiple of it, or below it (underflowed to 0)
    assert re.search(r"against a rounding floor of \d\.\de-\d\d: that is ([\d.]+ times|exactly 0, below) its "
                     r"rounding floor", body)


def test_reproduce_page_lists_the_store_and_figure_downloads(site_page, js_errors):
    site_page.goto("book/reproduce.html")
    body = site_page.locator("main").inner_text()
    assert "rankcollapse run fig2 --profile paper --device cuda" in body
    for page in ("fig2", "fig3", "fig4", "appendix_g1", "sample_size", "skip_connections"):
        assert page in site_page.locator("main table").first.inner_text()
    site_page.goto("book/gallery.html")  # every figure's downloads: under it, and in the gallery
    href = site_page.locator("a[href*='fig-fig2-mu.json']").first.get_attribute("href")
    record = site_page.request.get(site_page.url.rsplit("/", 1)[0] + "/" + href).json()
    assert "result" in record["parameters"] and record["parameters"]["n_tokens"] >= 8
    assert js_errors == []
