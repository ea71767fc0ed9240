"""The fonts a PDF uses, for the tests that the book's figure PDFs embed TrueType fonts, never Type 3
(tests/unit/test_figure_fonts.py: a figure exported now; tests/site/test_book_pdf.py: every figure the built
site links)."""

from __future__ import annotations

from pypdf import PdfReader


def pdf_font_subtypes(path) -> dict[str, str]:
    """``{base font name: subtype}`` of every font a PDF's pages use (``/Type3``, ``/TrueType``, …)."""
    fonts = {}
    for page in PdfReader(path).pages:
        for font in (page.get("/Resources") or {}).get("/Font", {}).values():
            font = font.get_object()
            fonts[str(font.get("/BaseFont", font.get("/Name", "?")))] = str(font["/Subtype"])
    return fonts
