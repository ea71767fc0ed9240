"""Shared test fixtures: the repository root, a temporary book to run figure exports in."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def book(tmp_path, monkeypatch) -> Path:
    """A temporary book root (``_toc.yml``) with the working directory in its ``book/`` folder."""
    (tmp_path / "_toc.yml").write_text("format: jb-book\n")
    page_dir = tmp_path / "book"
    page_dir.mkdir()
    monkeypatch.chdir(page_dir)
    monkeypatch.delenv("RANKCOLLAPSE_FIGURE_DIR", raising=False)
    return tmp_path
