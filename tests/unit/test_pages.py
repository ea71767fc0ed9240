"""The page registry: every page it lists exists with a parameters cell, every page of the table of
contents is registered, profiles fit the pages' parameters, and the package has no import circle."""

import ast
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from rankcollapse.book import registry
from rankcollapse.book import runner
from rankcollapse.book.pages import fig2

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "rankcollapse"
NOT_PAGES = {"book/intro", "book/bibliography", "book/reproduce", "book/gallery", "book/status"}


def _toc_files() -> set[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return {c["file"] for part in toc["parts"] for c in part["chapters"]}


def test_every_registered_page_exists_and_every_toc_page_is_registered():
    registered = {str(Path(p.source).with_suffix("")) for p in registry.PAGES.values()}
    assert registered == _toc_files() - NOT_PAGES
    for entry in registry.PAGES.values():
        assert runner.page_parameters(entry.path(ROOT)), entry.name


@pytest.mark.parametrize("name", list(registry.PAGES))
def test_defaults_and_profiles_pass_the_checks(name):
    entry = registry.PAGES[name]
    defaults = runner.page_parameters(entry.path(ROOT))
    for profile in registry.PROFILE_NAMES:
        overrides = registry.profile_parameters(name, profile)
        runner.check_parameter_types(defaults, overrides)
        assert registry.configure(name, {**defaults, **overrides})


def test_experiment_pages_keep_their_fixed_choices_and_take_the_readers_parameters():
    runs = registry.configure("fig3", {"temperatures": [0.5, 2], "n_samples": 3})
    config = runs["main"].config
    assert config.temperatures == (0.5, 2) and config.norms == ("none",) and config.n_samples == 3
    g1 = registry.configure("appendix_g1", {"temperatures": [0.5], "n_samples": 8, "seed": 3,
                                            "n_samples_seeds": 2, "n_weight_seeds": 2})
    assert g1["fig3"].config.temperatures == (0.5,) and g1["fig2"].config.temperatures == (None,)
    assert g1["fig2"].config.weights == ("initialized",) and g1["fig2"].config.norms == fig2.FIXED["norms"]
    assert sorted(g1) == ["fig2", "fig2_seed_0", "fig2_seed_1", "fig3", "fig3_seed_0", "fig3_seed_1"]
    replicate = g1["fig3_seed_1"].config  # the first samples, weight seed seed + 1, both inits, float64
    assert (replicate.temperatures, replicate.n_samples, replicate.seed, replicate.weight_seed,
            replicate.dtype) == ((0.5,), 2, 3, 4, "float64")
    assert replicate.weights == ("initialized", "initialized_nobias")
    with pytest.raises(ValueError, match="n_weight_seeds"):
        registry.configure("appendix_g1", {"n_samples_seeds": 2, "n_weight_seeds": 0})
    skip = registry.configure("skip_connections",
                              {"n_layers": 6, "n_layers_deep": 40, "show_largest_stored": True})
    assert skip["shallow"].config.n_layers == 6 and skip["deep"].config.n_layers == 40
    assert skip["deep"].config.weights == ("initialized",) and skip["shallow"].config.skips == (False, True)
    pair = registry.configure("sample_size", {"n_samples": 64, "n_samples_small": 8})
    assert pair["large"].page == pair["small"].page == "fig2"  # Fig. 2's very sweeps, stored as Fig. 2's
    assert replace(pair["small"].config, n_samples=64) == pair["large"].config == registry.configure(
        "fig2", {"n_samples": 64, "n_tokens": 32, "n_layers": 12})["main"].config
    assert pair["small"].config.n_samples == 8
    panels = registry.configure("pretrained_panels", {})
    assert panels["fig2"].page == "fig2" and panels["fig3"].page == "fig3" and g1["fig2"].page is None


@pytest.mark.parametrize("name, parameters, words", [
    ("fig3", {"temperatures": [0, 1]}, "temperatures must be a finite number > 0"),
    ("fig3", {"temperatures": []}, "temperatures must be a non-empty tuple"),
    ("fig2", {"n_layer": 3}, "unknown experiment parameter"),
    ("sample_size", {"n_samples": 8, "n_samples_small": 8},
     r"n_samples_small must be an integer in \[1, 7\]"),
    ("fig9", {}, "unknown page 'fig9'; pages are: verdicts, setup"),
    ("theorem1", {"temperature": -1.0}, "temperature must be a finite number > 0"),
])
def test_bad_parameters_are_refused_with_one_message(name, parameters, words):
    with pytest.raises(ValueError, match=words):
        registry.configure(name, parameters)


def test_paper_profile_lists_the_experiment_pages():
    assert registry.pages_with_profile("paper") == registry.EXPERIMENT_PAGES
    assert {"fig2", "sample_size", "appendix_g1"} <= set(registry.EXPERIMENT_PAGES)
    assert all(e.profiles["paper"]["n_samples"] == 3000 for e in registry.PAGES.values()
               # its long samples: about 1000 in the corpus; the theory's SAN (also under decay biases): 16
               # per weight seed
               if e.profiles and e.name not in ("sliding_window_model", "theory_san", "soft_locality"))
    assert registry.profile_parameters("theory_san", "paper")["n_samples"] == 16
    assert registry.profile_parameters("soft_locality", "paper")["n_samples"] == 16
    paper = registry.profile_parameters("sliding_window_model", "paper")
    assert paper["n_samples"] == registry.WINDOW_PAPER_SAMPLES


def _module_name(path: Path) -> str:
    """``src/rankcollapse/core/masks.py`` -> ``rankcollapse.core.masks`` (a package: its ``__init__``)."""
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """The rankcollapse modules ``path`` imports, at any depth of its code (``from a.b import c``: the
    module ``a.b.c`` when it is one, else ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rankcollapse"):
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                      for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("rankcollapse")}
    return {m for m in found if m in MODULES} - {_module_name(path)}


def test_no_import_circle_between_modules():
    graph = {name: _imports(path) for name, path in MODULES.items() if path.stem != "__init__"}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for dep in graph.get(module, ()):
            assert state.get(dep) != 1, "import circle: " + " -> ".join([*trail, module, dep])
            if dep not in state:
                visit(dep, [*trail, module])
        state[module] = 2

    assert len(graph) > 40  # every module of every layer
    for module in graph:
        if module not in state:
            visit(module, [])


def test_no_private_name_crosses_modules():
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rankcollapse"):
                private = [a.name for a in node.names
                           if a.name.startswith("_") and not a.name.startswith("__")]
                assert not private, f"{path.name} imports private {private} from {node.module}"
