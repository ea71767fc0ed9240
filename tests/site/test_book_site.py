"""Browser tests of the site infrastructure: every page loads cleanly, math renders offline, the launch and
download buttons point at files that exist, the book's PDF holds every figure, the execution-status page and
the reproduce page's table."""

from __future__ import annotations

import hashlib

from pathlib import Path

import nbformat
import pytest
import yaml

from booksite import NOTEBOOK_DIR, NOTEBOOKS_BRANCH
from bookpdf import PDF_NAME

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPOSITORY = CONFIG["repository"]["url"].removeprefix("https://github.com/")
BRANCH = CONFIG["repository"]["branch"]


def _toc_pages() -> list[str]:
    """Every page of the book, in table-of-contents order (docnames such as ``book/setup``)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    found = [toc["root"]]

    def walk(node) -> None:
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc.get("parts", []))
    return found


PAGES = _toc_pages()
NOTEBOOK_PAGES = [p for p in PAGES if (ROOT / f"{p}.md").read_text().startswith("---\njupytext:")]


def _wait_for_math(page) -> int:
    """Wait until MathJax has typeset the page; the number of rendered formulas."""
    if page.locator(".math").count() == 0:
        return 0
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                           timeout=30_000)
    page.evaluate("() => MathJax.startup.promise")
    return page.locator("mjx-container").count()


@pytest.mark.parametrize("docname", PAGES)
def test_page_loads_without_console_errors_and_renders_its_math(site_page, js_errors, docname):
    site_page.goto(f"{docname}.html")
    formulas = site_page.locator(".math").count()
    assert _wait_for_math(site_page) >= formulas  # every formula typeset by the site's own MathJax
    for script in site_page.locator("script[src*='mathjax']").all():
        assert script.get_attribute("src").startswith("../" * docname.count("/") + "_static/mathjax/")
    assert "THEBE_JS_URL" not in site_page.content()
    assert js_errors == []


def test_math_renders_offline_on_the_setup_page(site_page, repo_root):
    requested: list[str] = []
    site_page.on("request", lambda request: requested.append(request.url))
    site_page.goto("book/setup.html")
    assert _wait_for_math(site_page) >= 20
    assert site_page.locator("mjx-container[jax='CHTML']").count() >= 20
    assert not any("cdn.jsdelivr" in url or "mathjax" in url and "127.0.0.1" not in url for url in requested)
    site_page.locator("mjx-container").nth(5).scroll_into_view_if_needed()
    site_page.screenshot(path=str(repo_root / "_build" / "screenshot-math-offline.png"))


@pytest.mark.parametrize("docname", NOTEBOOK_PAGES)
def test_launch_and_download_buttons_point_at_existing_files(site_page, docname):
    site_page.goto(f"{docname}.html")
    base = site_page.url.rsplit("/", 1)[0] + "/"

    notebook_href = site_page.locator(".btn-download-notebook-button").get_attribute("href")
    assert notebook_href.endswith(f"{NOTEBOOK_DIR}/{docname}.ipynb")
    assert site_page.request.get(base + notebook_href).ok
    notebook = nbformat.read(SITE / NOTEBOOK_DIR / f"{docname}.ipynb", as_version=4)
    assert notebook.cells[0].metadata["tags"] == ["install-book"]
    assert 'find_spec("rankcollapse") is None' in notebook.cells[0].source
    assert any(cell.get("outputs") for cell in notebook.cells[1:])  # the build's outputs travel with it

    pdf_href = site_page.locator(".btn-download-book-pdf-button").get_attribute("href")
    assert site_page.request.get(base + pdf_href).ok

    binder_href = site_page.locator("a[href*='mybinder.org']").get_attribute("href")
    assert binder_href == f"https://mybinder.org/v2/gh/{REPOSITORY}/{BRANCH}?urlpath=lab/tree/{docname}.md"
    assert (ROOT / f"{docname}.md").is_file() and (ROOT / "binder" / "postBuild").is_file()

    colab_href = site_page.locator("a[href*='colab.research.google.com']").get_attribute("href")
    assert colab_href == (f"https://colab.research.google.com/github/{REPOSITORY}/blob/{NOTEBOOKS_BRANCH}/"
                          f"{docname}.ipynb")  # the workflow publishes _notebooks/ on that branch


def test_every_executed_page_has_an_exported_notebook():
    executed = sorted(p.relative_to(ROOT / "_build" / "jupyter_execute").with_suffix("").as_posix()
                      for p in (ROOT / "_build" / "jupyter_execute").rglob("*.ipynb"))
    exported = sorted(p.relative_to(SITE / NOTEBOOK_DIR).with_suffix("").as_posix()
                      for p in (SITE / NOTEBOOK_DIR).rglob("*.ipynb"))
    assert set(NOTEBOOK_PAGES) <= set(exported) and set(exported) <= set(executed)


def test_pdf_exists_and_holds_every_figure_of_the_site(site_page):
    from pypdf import PdfReader

    pdf = SITE / PDF_NAME
    assert pdf.is_file(), f"{pdf} is missing: run `python _ext/bookpdf.py` after the HTML build"
    reader = PdfReader(pdf)
    assert len(reader.pages) > 10
    in_pdf, previous = 0, set()
    for page in reader.pages:  # a figure taller than a page is drawn on two: count it once
        drawn = {hashlib.sha256(image.data).hexdigest() for image in page.images}
        in_pdf += len(page.images) - len(drawn & previous)
        previous = drawn
    in_site = 0
    for docname in PAGES:
        site_page.goto(f"{docname}.html")
        in_site += site_page.locator("article.bd-article img").evaluate_all(
            "imgs => imgs.filter(i => !/\\.svg($|\\?)/.test(i.getAttribute('src'))).length")
    assert in_site > 10 and in_pdf == in_site, (f"{in_pdf} images in the PDF, "
                                                f"{in_site} raster figures in the site")
    text = "".join(page.extract_text() for page in reader.pages)
    assert "howpublished" in text, "the figures' cite blocks are printed collapsed (no BibTeX in the PDF)"
    site_page.goto("book/intro.html")
    assert site_page.locator(f"article.bd-article a[href$='{PDF_NAME}']").count() == 1


def test_execution_status_page_lists_every_notebook_as_passed(site_page, js_errors):
    site_page.goto("book/status.html")
    rows = site_page.locator("main table.book-status tbody tr")
    documents = {rows.nth(i).locator("td a").first.get_attribute("href").split("#")[0]
                 for i in range(rows.count())}
    assert {Path(p).name for p in NOTEBOOK_PAGES} <= {Path(d).stem for d in documents}
    statuses = site_page.locator("main table.book-status tbody tr td:nth-child(3)").all_inner_texts()
    assert statuses and set(statuses) == {"ran without error"}  # words (tests/site/test_site_details.py)
    methods = set(site_page.locator("main table.book-status tbody tr td:nth-child(2)").all_inner_texts())
    assert methods <= {"executed", "from the cache"}
    assert js_errors == []


@pytest.mark.parametrize("width", [1280, 390])
def test_reproduce_table_fits_its_column_without_duplicate_rows(site_page, width, repo_root):
    site_page.set_viewport_size({"width": width, "height": 900})
    site_page.goto("book/reproduce.html")
    table = site_page.locator("main table").first
    rows = table.locator("tbody tr").all_inner_texts()
    assert len(rows) == len(set(rows)) > 5
    fits = table.evaluate("t => t.getBoundingClientRect().width <= t.closest('.cell_output').clientWidth + 1")
    box = table.locator("xpath=ancestor::div[contains(@class, 'output')][1]")
    scroll_cue = box.evaluate("o => ['auto', 'scroll'].includes(getComputedStyle(o).overflowX) && "
                              "getComputedStyle(o).backgroundImage.includes('gradient')")
    if width == 1280:
        assert fits, "the results table is wider than the text column at 1280 px"
    else:
        assert fits or scroll_cue, ("a table wider than a phone's column scrolls, with a cue "
                                    "(_static/booksite.css)")
    assert site_page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    table.scroll_into_view_if_needed()
    site_page.screenshot(path=str(repo_root / "_build" / f"screenshot-reproduce-table-{width}.png"))
