"""``rankcollapse run``: every bad input is rejected before anything runs, with the valid choices listed;
a good run writes the executed notebook and its figures; a run added to the book gets unique labels."""

import json

import pytest
import torch

from rankcollapse import cli, pages, runner


@pytest.fixture
def never_executes(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("execute_page must not be called for bad input")

    monkeypatch.setattr(runner, "execute_page", fail)


@pytest.mark.parametrize("argv, words", [
    (["run", "fig9"], "unknown page 'fig9'; pages are: setup, data, theorem1, theorem2, counterexample, equilibria, fig2"),
    (["run", "fig2", "-p", "n_heads", "4"], "unknown parameter 'n_heads'; this page's parameters are: model, window"),
    (["run", "fig2", "-p", "n_samples", "many"], "parameter 'n_samples' must be an integer (default 16), got 'many'"),
    (["run", "fig2", "-p", "n_samples", "2.5"], "parameter 'n_samples' must be an integer"),
    (["run", "fig2", "-p", "model", "3"], "parameter 'model' must be a string"),
    (["run", "fig2", "-p", "window", "40"], r"window must be an integer in [1, 31], got 40"),
    (["run", "fig2", "-p", "dtype", "float16"], "dtype must be one of 'float64', 'float32'; got 'float16'"),
    (["run", "fig3", "-p", "n_tokens", "1"], "n_tokens must be an integer in [2, 512], got 1"),
    (["run", "sample_size", "-p", "n_samples_small", "128"], "n_samples_small must be an integer in [1, 127]"),
    (["run", "skip_connections", "-p", "n_layers_deep", "0"], "n_layers_deep must be an integer in [1, 4096]"),
    (["run", "fig4", "--profile", "huge"], "unknown profile 'huge'; profiles are: default, paper"),
    (["run", "fig4", "--device", "tpu"], "device must be 'cpu' or 'cuda'"),
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
    assert parameters == {"model": "pkg:mpnet", "n_samples": 3000, "n_tokens": 128, "overlap": "sentence_starts",
                          "n_layers": 128, "seed": 2, "device": "cpu", "show_largest_stored": False}
    assert cli.plan_run("fig2", [("n_samples", "8")])[1] == {"n_samples": 8, "show_largest_stored": False}
    assert cli.plan_run("fig2")[1] == {}


def test_fig3_temperatures_are_a_parameter():
    assert cli.plan_run("fig3", [("temperatures", "[0.5, 2]")])[1] == {"temperatures": [0.5, 2],
                                                                      "show_largest_stored": False}
    with pytest.raises(ValueError, match="temperatures must be a finite number > 0"):
        cli.plan_run("fig3", [("temperatures", "[0.5, -2]")])


def test_pages_lists_the_registry(capsys):
    assert cli.main(["pages", "--profile", "paper"]) == 0
    assert capsys.readouterr().out.split() == list(pages.EXPERIMENT_PAGES)
    assert cli.main(["pages", "--profile", "huge"]) == 2


@pytest.mark.notebook
def test_run_writes_notebook_and_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_FIGURE_DIR", str(tmp_path / "unused"))  # main() sets it; restored after
    out = tmp_path / "run"
    assert cli.main(["run", "setup", "-p", "n_tokens", "10", "-p", "window", "3", "--output", str(out)]) == 0
    assert runner.read_glue(out / "setup.ipynb")["setup_radius_uni"] == 3  # ceil(9 / 3)
    assert {p.name for p in (out / "figures").iterdir()} >= {"fig-setup-masks.png", "fig-setup-masks.svg",
                                                              "fig-setup-masks.pdf", "fig-setup-masks.json"}
    target = cli.add_to_book(out / "setup.ipynb", "setup", tmp_path / "runs", "r1")
    text = "".join("".join(c["source"]) for c in json.loads(target.read_text())["cells"])
    assert "(sec-setup-r1)=" in text and ":name: fig-setup-masks-r1" in text and "(sec-setup)=" not in text
