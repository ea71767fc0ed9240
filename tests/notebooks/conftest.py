"""Notebook tests write their exported figures to a temporary folder, never into the book's _build."""

import pytest


@pytest.fixture(autouse=True)
def figure_dir(tmp_path, monkeypatch):
    folder = tmp_path / "figures"
    monkeypatch.setenv("RANKCOLLAPSE_FIGURE_DIR", str(folder))
    return folder
