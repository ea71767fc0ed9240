"""The package's layers (ARCHITECTURE.md), checked from the import graph of the source.

core <- {engine, theory} <- hf <- experiments <- verdicts <- book: a module imports only from its own layer
and the layers below it (every ``import`` counts, also those inside functions); only ``book`` imports the
plotting and notebook libraries or names a book page; ``core`` and ``engine`` import only torch, numpy and
the standard library; no module grows past the house size.
"""

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "rankcollapse"
BELOW = {  # layer -> the layers it may import (itself included)
    "core": {"core"},
    "engine": {"core", "engine"},
    "theory": {"core", "theory"},
    "hf": {"core", "engine", "theory", "hf"},
    "experiments": {"core", "engine", "theory", "hf", "experiments"},
    "verdicts": {"core", "engine", "theory", "hf", "experiments", "verdicts"},
    "book": {"core", "engine", "theory", "hf", "experiments", "verdicts", "book"},
}
BOOK_ONLY = {"matplotlib", "seaborn", "IPython", "myst_nb", "sphinx", "docutils", "papermill", "jupytext",
             "nbformat", "scrapbook"}
TORCH_ONLY = {"torch", "numpy"}  # the third-party imports core and engine may use
MAX_LINES = 420  # the house style's ~400 lines per module
PLAIN_WORDS = {"setup", "data", "counterexample", "equilibria"}  # page names that are also ordinary words


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _layer(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None  # None: the package root (__init__, __main__)


def _imports(path: Path) -> list[str]:
    """Every module name ``path`` imports (absolute), with ``from x import y`` as ``x.y`` for packages."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}: relative import; the package uses absolute imports only")
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _package_layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "rankcollapse" and len(parts) > 2 else None


def test_the_package_has_exactly_the_seven_layers():
    layers = {_layer(p) for p in _modules()} - {None}
    assert layers == set(BELOW)
    for layer in BELOW:
        assert (PACKAGE / layer / "__init__.py").is_file()


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_its_own_layer_and_those_below(path):
    layer = _layer(path)
    for name in _imports(path):
        target = _package_layer(name)
        if layer is None:
            assert path.name == "__main__.py" or target is None, f"the package root imports {name}"
        elif target is not None:
            assert target in BELOW[layer], f"{path.relative_to(PACKAGE)} ({layer}) imports {name} ({target})"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_third_party_imports_keep_to_their_layers(path):
    layer = _layer(path)
    third_party = {name.split(".")[0] for name in _imports(path)} - {"rankcollapse", "__future__"}
    third_party -= set(sys.stdlib_module_names)
    if layer != "book":
        assert not third_party & BOOK_ONLY, f"{path.relative_to(PACKAGE)} imports {third_party & BOOK_ONLY}"
    if layer in ("core", "engine"):
        assert third_party <= TORCH_ONLY, f"{path.relative_to(PACKAGE)} imports {third_party - TORCH_ONLY}"


def _page_names() -> set[str]:
    registry = ast.parse((PACKAGE / "book" / "registry.py").read_text())
    names = set()
    for node in ast.walk(registry):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Page" and node.args:
            names.add(node.args[0].value)
    return names


def test_only_the_book_layer_names_a_page():
    pages = _page_names() - PLAIN_WORDS
    assert {"fig2", "theorem1", "mask_design"} <= pages
    for path in _modules():
        if _layer(path) in ("book", None):
            continue
        strings = {n.value for n in ast.walk(ast.parse(path.read_text()))
                   if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not strings & pages, f"{path.relative_to(PACKAGE)} names the page(s) {sorted(strings & pages)}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_outgrows_the_house_size(path):
    n_lines = len(path.read_text().splitlines())
    assert n_lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {n_lines} lines (at most {MAX_LINES})"


MAX_LINE = 110  # characters in a line of code a person reads (pyproject.toml's ruff line-length)
_PYTHON_FILES = sorted(p for folder in ("src", "tests", "scripts", "benchmarks", "_ext", "results")
                       for p in (PACKAGE.parents[1] / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _PYTHON_FILES, ids=lambda p: str(p.relative_to(PACKAGE.parents[1])))
def test_every_line_of_code_is_at_most_the_house_width(path):
    long = [n for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) > MAX_LINE]
    assert not long, f"{path.relative_to(PACKAGE.parents[1])}: lines over {MAX_LINE} characters: {long[:10]}"
