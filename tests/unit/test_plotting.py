"""Figure export writes every format atomically with its provenance in the metadata; TF32 stays off."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from PIL import Image

from rankcollapse import masks, plotting


def test_export_figure_writes_formats_with_parameters(book):
    fig, ax = plt.subplots()
    plotting.draw_mask(ax, masks.causal_sliding_window_mask(6, 2), "uni-directional")
    assert "radius r = 3" in ax.get_title()
    paths = plotting.export_figure(fig, "fig-test-masks", {"n_tokens": 6, "window": 2})
    plt.close(fig)
    assert {p.name for p in paths.values()} == {f"fig-test-masks.{e}" for e in ("png", "svg", "pdf", "json")}
    assert all(p.parent == book / "_build" / "figures" for p in paths.values())
    record = json.loads(paths["json"].read_text())
    assert record["parameters"] == {"n_tokens": 6, "window": 2}  # the whole record: tests/unit/test_provenance.py
    png_text = Image.open(paths["png"]).text
    assert json.loads(png_text["Description"])["parameters"]["window"] == 2
    assert '"window": 2' in paths["svg"].read_text()
    assert paths["pdf"].read_bytes().startswith(b"%PDF")
    assert not list(paths["png"].parent.glob(".*"))  # no temporary files left behind


def test_draw_floor_keeps_floor_visible_on_log_axis():
    fig, ax = plt.subplots()
    ax.semilogy([0, 1, 2], [1.0, 1e-3, 1e-6])
    plotting.draw_floor(ax, 1e-13)
    low, high = ax.get_ylim()
    assert low < 1e-13 < 1e-6 < high
    plt.close(fig)


def test_tf32_is_off_after_import():
    import rankcollapse  # noqa: F401

    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cudnn.allow_tf32 is False
