"""The book's exported figure PDFs embed TrueType fonts (Type 42 in matplotlib's words), never Type 3 fonts,
which conference checks reject (``plotting.common.set_theme``: ``pdf.fonttype`` 42)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from pdffonts import pdf_font_subtypes

from rankcollapse.book.plotting import common as plotting


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
