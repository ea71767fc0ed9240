"""``rankcollapse run``: every bad input is rejected before anything runs, with the valid choices listed;
a good run writes the executed notebook and its figures; a run added to the book gets unique labels."""

import contextlib
import io
import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glue import read_glue

from rankcollapse.book import cli
from rankcollapse.book import registry
from rankcollapse.book import runner


@pytest.fixture
def never_executes(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("execute_page must not be called for bad input")

    monkeypatch.setattr(runner, "execute_page", fail)


@pytest.mark.parametrize("argv, words", [
    (["run", "fig9"], "unknown page 'fig9'; pages are: verdicts, setup, data, theorem1, theorem2, "
                      "counterexample, equilibria, fig2"),
    (["run", "fig2", "-p", "n_heads", "4"], "unknown parameter 'n_heads'; this page's parameters are: "
                                            "model, window"),
    (["run", "fig2", "-p", "n_samples", "many"], "parameter 'n_samples' must be an integer (default 16), "
                                                 "got 'many'"),
    (["run", "fig2", "-p", "n_samples", "2.5"], "parameter 'n_samples' must be an integer"),
    (["run", "fig2", "-p", "model", "3"], "parameter 'model' must be a string"),
    (["run", "fig2", "-p", "window", "40"], r"window must be an integer in [1, 31], got 40"),
    (["run", "fig2", "-p", "dtype", "float16"], "dtype must be one of 'float64', 'float32'; got 'float16'"),
    (["run", "fig3", "-p", "n_tokens", "1"], "n_tokens must be an integer in [2, 8192], got 1"),
    (["run", "sample_size", "-p", "n_samples_small", "128"],
     "n_samples_small must be an integer in [1, 127]"),
    (["run", "skip_connections", "-p", "n_layers_deep", "0"],
     "n_layers_deep must be an integer in [1, 4096]"),
    (["run", "fig4", "--profile", "huge"], "unknown profile 'huge'; profiles are: default, paper"),
    (["run", "fig4", "--device", "tpu"], "device must be 'cpu' or 'cuda'"),
    (["run", "fig2", "--device", "cuda:abc"], "device must be 'cpu' or 'cuda', got 'cuda:abc'"),
    (["run", "fig2", "-p", "model", "pkg:unknown"], "got 'pkg:unknown' (no such packaged model)"),
    (["run", "fig3", "-p", "model", "/nonexistent"], "got '/nonexistent' (no such folder, and not a hub id)"),
    (["run", "fig4", "-p", "model", "not a model"], "model must be a packaged model (pkg:minilm, pkg:mpnet"),
])
def test_bad_input_is_rejected_before_running(argv, words, capsys, never_executes):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rankcollapse run: error: ") and words in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when CUDA is absent")
def test_cuda_without_a_gpu_is_rejected(capsys, never_executes):
    assert cli.main(["run", "fig2", "--device", "cuda"]) == 2
    assert "CUDA is not available here" in capsys.readouterr().err


def test_paper_profile_sets_the_paper_scale():
    path, parameters = cli.plan_run("appendix_g1", [("seed", "2")], profile="paper", device="cpu")
    assert path.name == "appendix_g1.md" and path.is_file()
    assert parameters == {"model": "pkg:mpnet", "n_samples": 3000, "n_tokens": 128,
                          "overlap": "sentence_starts", "n_layers": 128, "seed": 2, "device": "cpu",
                          "dtype": "float32", "n_samples_seeds": 4, "show_largest_stored": False}
    assert cli.plan_run("fig2", [("n_samples", "8")])[1] == {"n_samples": 8, "show_largest_stored": False}
    assert cli.plan_run("fig2")[1] == {}


def test_fig3_temperatures_are_a_parameter():
    assert cli.plan_run("fig3", [("temperatures", "[0.5, 2]")])[1] == {"temperatures": [0.5, 2],
                                                                      "show_largest_stored": False}
    with pytest.raises(ValueError, match="temperatures must be a finite number > 0"):
        cli.plan_run("fig3", [("temperatures", "[0.5, -2]")])


def test_pages_lists_the_registry(capsys):
    assert cli.main(["pages", "--profile", "paper"]) == 0
    assert capsys.readouterr().out.split() == list(registry.EXPERIMENT_PAGES)
    assert cli.main(["pages", "--profile", "huge"]) == 2


@pytest.mark.slow
@pytest.mark.notebook
def test_run_writes_notebook_and_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_FIGURE_DIR", str(tmp_path / "unused"))  # main() sets it; restored after
    out = tmp_path / "run"
    assert cli.main(["run", "setup", "-p", "n_tokens", "10", "-p", "window", "3", "--output", str(out)]) == 0
    assert read_glue(out / "setup.ipynb")["setup_radius_uni"] == 3  # ceil(9 / 3)
    assert {p.name for p in (out / "figures").iterdir()} >= {"fig-setup-masks.png", "fig-setup-masks.svg",
                                                              "fig-setup-masks.pdf", "fig-setup-masks.json"}
    target = cli.add_to_book(out / "setup.ipynb", "setup", tmp_path / "runs", "r1")
    text = "".join("".join(c["source"]) for c in json.loads(target.read_text())["cells"])
    assert "(sec-setup-r1)=" in text and ":name: fig-setup-masks-r1" in text and "(sec-setup)=" not in text


PAGE_DEFAULTS = {name: runner.page_parameters(p.path(cli.repo_root())) for name, p in registry.PAGES.items()}
PROFILE_NAMES = list(registry.PROFILE_NAMES)
ODD_TEXTS = ["None", "True", "[]", "()", "{}", "{[1]: 2}", "1e999", "-1", "nan", "'a'", "[" * 150 + "]" * 150,
             "9" * 5000, "pkg:minilm", "pkg:unknown", "/nonexistent", "owner/name", "~nosuchuser/x", "~\x00",
             "cuda", "cuda:abc", "", " ", "\n"]
values = st.one_of(st.integers(-3, 200).map(str), st.integers().map(str), st.floats().map(repr),
                   st.text(max_size=12), st.sampled_from(ODD_TEXTS), st.sampled_from(ODD_TEXTS),
                   st.lists(st.one_of(st.integers(), st.floats(), st.booleans(), st.none(),
                                      st.text(max_size=4)),
                            max_size=4).map(repr))
profiles = st.one_of(st.just("default"), st.sampled_from(PROFILE_NAMES), st.text(max_size=6))
device_names = st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:abc", "cuda:-1", "tpu", "", "cpu:1"])
devices = st.one_of(st.none(), device_names, device_names, st.text(max_size=6))


@st.composite
def runs(draw):
    """A page (mostly a real one), parameters (mostly its own names, sometimes unknown ones), profile,
    device."""
    real = st.sampled_from(sorted(PAGE_DEFAULTS))
    page = draw(st.one_of(real, real, real, st.text(max_size=8)))
    defaults = PAGE_DEFAULTS.get(page) or {"n": 0}
    pairs = []
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.one_of(st.sampled_from(sorted(defaults)), st.text(max_size=8)))
        # its default, or any
        pairs.append((name, draw(st.one_of(st.just(repr(defaults.get(name))), values))))
    return page, pairs, draw(profiles), draw(devices)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=runs())
def test_any_input_is_planned_or_refused_in_one_line(run, never_executes):
    """Arbitrary page names, parameter names, values (numbers, lists, text), profiles and devices: plan_run
    returns, or raises one ValueError in one line; when it refuses, ``rankcollapse run`` exits 2 with exactly
    that line on stderr (values starting with '-' aside: argparse reads them as options)."""
    page, pairs, profile, device = run
    try:
        cli.plan_run(page, pairs, profile, device)
    except ValueError as err:
        assert str(err) and "\n" not in str(err)
        given = [page, *(x for pair in pairs for x in pair), profile, *([] if device is None else [device])]
        if any(x.startswith("-") for x in given):
            return
        argv = ["run", page, *(x for name, value in pairs for x in ("-p", name, value)), "--profile", profile]
        argv += [] if device is None else ["--device", device]
        err_out = io.StringIO()
        with contextlib.redirect_stderr(err_out), contextlib.redirect_stdout(io.StringIO()):
            assert cli.main(argv) == 2
        assert err_out.getvalue() == f"rankcollapse run: error: {err}\n"


@pytest.mark.parametrize("value", ODD_TEXTS)
def test_odd_values_of_every_fig2_parameter_are_planned_or_refused_in_one_line(value):
    for name in PAGE_DEFAULTS["fig2"]:
        try:
            cli.plan_run("fig2", [(name, value)])
        except ValueError as err:
            assert str(err) and "\n" not in str(err), (name, value)


def test_compute_uses_the_page_defaults_under_the_readers_parameters(monkeypatch):
    seen = {}
    monkeypatch.setattr(registry, "compute", lambda name, **parameters: seen.update(parameters))
    assert cli.compute_page("fig3", {"n_samples": 3}, show=False)
    assert seen["temperatures"] == [0.015625, 1.0, 64.0] and seen["n_samples"] == 3
