"""Browser tests of the built site: pages load, figures render, glued numbers and citations appear."""

import re

import pytest

pytestmark = pytest.mark.site


def test_setup_page_figure_glue_and_citation(site_page, js_errors, repo_root):
    site_page.goto("book/setup.html")
    figure = site_page.locator("figure#fig-setup-masks")
    assert figure.count() == 1
    img = figure.locator("img")
    assert img.evaluate("i => i.complete && i.naturalWidth > 0")
    caption = figure.locator("figcaption").inner_text()
    assert re.search(r"Fig\. \d+(\.\d+)?", caption)
    # glued numbers: N = 16 tokens and the radius of the uni-directional window, ceil(15 / 3) = 5
    assert re.search(r"N\s*=\s*\\?\)?\s*16", caption) or "16" in caption
    assert "uni-directional window radius 5" in " ".join(caption.split())
    body = site_page.locator("main").inner_text()
    assert "Zhang and Sennrich, 2019" in body  # {cite:p} rendered through sphinxcontrib-bibtex
    assert site_page.locator("div.figure-downloads[data-figure='fig-setup-masks'] "
                             "a[href$='fig-setup-masks.svg']").count() == 1
    site_page.screenshot(path=str(repo_root / "_build" / "screenshot-setup.png"), full_page=True)
    assert js_errors == []


def test_downloadable_figure_carries_provenance(site_page):
    site_page.goto("book/setup.html")
    href = site_page.locator("div.figure-downloads[data-figure='fig-setup-masks'] "
                             "a[href$='.json']").get_attribute("href")
    response = site_page.request.get(site_page.url.rsplit("/", 1)[0] + "/" + href)
    assert response.ok
    record = response.json()
    assert record["parameters"]["n_tokens"] == 16 and len(record["git_commit"]) >= 7


def test_intro_links_to_setup_and_bibliography_lists_the_paper(site_page, js_errors):
    site_page.goto("book/intro.html")
    assert "Wu et al., 2024" in site_page.locator("main").inner_text()
    site_page.locator("main a[href*='setup.html']").first.click()
    site_page.wait_for_load_state("load")
    assert site_page.url.endswith("book/setup.html#sec-setup") or "setup.html" in site_page.url
    site_page.goto("book/bibliography.html")
    assert ("On the Role of Attention Masks and LayerNorm in Transformers"
            in site_page.locator("main").inner_text())
    assert js_errors == []
