"""The PDF printer's bookmarks and page numbers (_ext/bookpdf.py), on a small PDF with named destinations as
Chromium writes them; the printed book itself: tests/site/test_book_pdf.py."""

import io
import sys
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
import bookpdf  # noqa: E402


def _pdf(destinations: dict[str, int], n_pages: int = 4) -> bytes:
    writer = PdfWriter()
    for _ in range(n_pages):
        writer.add_blank_page(595, 842)
    for name, page in destinations.items():
        writer.add_named_destination(name, page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _outline(pdf: bytes) -> list[tuple[int, str, int]]:
    return bookpdf.bookmarks(PdfReader(io.BytesIO(pdf)))


def _heading(level: int, title: str, id: str, part: str | None = None) -> dict:
    """A heading as bookpdf.HEADINGS_JS returns it."""
    return {"level": level, "title": title, "id": id, "part": part}


def test_bookmarks_nest_the_root_page_then_parts_pages_and_sections():
    pdf = _pdf({"book": 0, "why": 0, "document-a": 1, "a-one": 1, "a-one-x": 2, "a-two": 2,
                "document-b": 3, "b-intro": 3, "b-one": 3})
    headings = [_heading(1, "The book", "book"), _heading(2, "Why", "why"),
                _heading(2, "1. A", "document-a", "Theory"), _heading(3, "1.1 A one", "a-one", "Theory"),
                _heading(4, "1.1.1 deeper", "a-one-x", "Theory"), _heading(3, "1.2 A two", "a-two", "Theory"),
                _heading(2, "2. B", "document-b", "Experiments"),
                _heading(4, "under B, not under A's section", "b-intro", "Experiments"),
                _heading(3, "2.1 B one", "b-one", "Experiments"),
                _heading(3, "not printed", "nowhere", "Experiments")]  # no destination: left out
    assert _outline(bookpdf.add_outline(pdf, headings)) == [
        (0, "The book", 0), (1, "Why", 0),
        (0, "Theory", 1), (1, "1. A", 1), (2, "1.1 A one", 1), (3, "1.1.1 deeper", 2), (2, "1.2 A two", 2),
        (0, "Experiments", 3), (1, "2. B", 3), (2, "under B, not under A's section", 3), (2, "2.1 B one", 3)]


def test_chapter_pages_count_from_one():
    assert bookpdf.chapter_pages(_pdf({"document-book/setup": 2, "fig-x": 0})) == {
        "document-book/setup": 3, "fig-x": 1}


def test_a_heading_that_moves_by_a_page_prints_no_number_and_more_is_refused():
    numbered = {"document-book/setup": 3, "sec-a": 302, "sec-b": 40}
    assert bookpdf.unsettled(numbered, {"document-book/setup": 3, "sec-a": 303, "sec-b": 40}) == ["sec-a"]
    assert bookpdf.unsettled({**numbered, "sec-a": ""}, {"document-book/setup": 3, "sec-a": 302,
                                                         "sec-b": 40}) == []
    with pytest.raises(RuntimeError, match="did not settle.*1 entries moved \\(sec-b\\)"):
        bookpdf.unsettled(numbered, {"document-book/setup": 3, "sec-a": 302, "sec-b": 42})  # two pages
    shifted = {name: 100 + i for i, name in enumerate("abcd")}
    with pytest.raises(RuntimeError, match="4 entries moved"):
        bookpdf.unsettled(shifted, {name: page + 1 for name, page in shifted.items()})
