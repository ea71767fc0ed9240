"""Notebook tests write their exported figures to a temporary folder, never into the book's _build; the
``figure_text_px`` fixture measures how large their text reads on the page."""

import json

import pytest
from PIL import Image

from legibility import screen_text_px
from rankcollapse.book.plotting.common import COLUMN_PX


@pytest.fixture(autouse=True)
def figure_dir(tmp_path, monkeypatch):
    folder = tmp_path / "figures"
    monkeypatch.setenv("RANKCOLLAPSE_FIGURE_DIR", str(folder))
    return folder


@pytest.fixture
def figure_text_px(figure_dir):
    """A function: the on-screen height (px) of the smallest text of every figure exported to
    ``figure_dir``, by stem, at the book's 672 px column (the site test's measure, from the exported PNG:
    its width at the inline dpi is the width of the glued image)."""

    def measure() -> dict[str, float]:
        sizes = {}
        for sidecar in sorted(figure_dir.glob("*.json")):
            info = json.loads(sidecar.read_text())["legibility"]
            with Image.open(sidecar.with_suffix(".png")) as png:
                natural = png.width * info["inline_dpi"] / info["png_dpi"]
            sizes[sidecar.stem] = screen_text_px(info["min_font_pt"], info["inline_dpi"], natural,
                                                 min(natural, COLUMN_PX))
        return sizes

    return measure
