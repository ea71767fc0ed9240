"""The book's exported figure PDFs embed TrueType fonts (Type 42 in matplotlib's words), never Type 3 fonts,
which conference checks reject (``plotting.common.set_theme``: ``pdf.fonttype`` 42)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from pypdf import PdfReader

from rankcollapse.book.plotting import common as plotting


def pdf_font_subtypes(path) -> dict[str, str]:
    """``{base font name: subtype}`` of every font a PDF's pages use (``/Type3``, ``/TrueType``, …)."""
    fonts = {}
    for page in PdfReader(path).pages:
        for font in (page.get("/Resources") or {}).get("/Font", {}).values():
            font = font.get_object()
            fonts[str(font.get("/BaseFont", font.get("/Name", "?")))] = str(font["/Subtype"])
    return fonts


def test_an_exported_figure_pdf_embeds_truetype_fonts_and_no_type3(book):
    plotting.set_theme()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0.5], label="μ / ‖X‖_F")  # text with glyphs outside Latin-1
    ax.set(title="complete mask", xlabel="layer")
    ax.legend()
    paths = plotting.export_figure(fig, "fig-test-fonts", {})
    plt.close(fig)
    subtypes = pdf_font_subtypes(paths["pdf"])
    assert subtypes, "the figure PDF uses no font at all"
    assert "/Type3" not in subtypes.values(), subtypes
    assert set(subtypes.values()) <= {"/TrueType", "/Type0"}, subtypes  # Type 42: TrueType, CID-keyed
