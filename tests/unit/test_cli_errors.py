"""``rankcollapse run``/``compute`` fail in one sentence, never a traceback: a damaged stored result (the
page's own, or the larger stored run it shows), an output path that is a file, a cell past ``--timeout``,
Ctrl-C (which says that the same command resumes), options a page does not take, long values, a repeated
``-p``; the recompute command of every stored result runs; models given as a relative folder or a hub id
without an owner."""

import gzip
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rankcollapse.book import cli
from rankcollapse.book import registry, report, runner
from rankcollapse.experiments import ranks, sweep
from rankcollapse.experiments.config import stored_parameters
from rankcollapse.experiments.store import ResultStore, recompute_command, result_key

ROOT = Path(__file__).resolve().parents[2]
STORE = ResultStore(ROOT / "results")


@pytest.fixture
def never_executes(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("execute_page must not be called")

    monkeypatch.setattr(runner, "execute_page", fail)


def _run(argv, capsys):
    """``cli.main(argv)``: (exit status, stdout, stderr lines)."""
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err.splitlines()


def _one_sentence(err_lines, words, prog="rankcollapse run"):
    assert err_lines, "nothing on stderr"
    assert err_lines[0].startswith(f"{prog}: error: ") and words in err_lines[0], err_lines
    assert not any("Traceback" in line for line in err_lines), err_lines


def _copy(results: Path, page: str, *keys: str) -> None:
    (results / page).mkdir(parents=True, exist_ok=True)
    for key in keys:
        for path in (STORE.root / page).glob(f"{key}.*"):  # the table, its record and any per-sample values
            shutil.copyfile(path, results / page / path.name)


def _fig2_store(tmp_path, monkeypatch) -> tuple[Path, str]:
    """A store with Fig. 2's own results at its defaults (the main sweep and its controls) and a larger stored
    run of it (128 x 32), damaged."""
    defaults = runner.page_parameters(registry.page("fig2").path(ROOT))
    own = [result_key("fig2", stored_parameters(run.config))
           for run in registry.configure("fig2", defaults).values()]
    larger = next(r["key"] for r in map(lambda k: json.loads((STORE.root / "fig2" / f"{k}.json").read_text()),
                                        STORE.keys("fig2"))
                  if r["parameters"]["n_samples"] == 128 and r["parameters"]["n_tokens"] == 32)
    results = tmp_path / "results"
    _copy(results, "fig2", *own, larger)
    table = results / "fig2" / f"{larger}.csv.gz"
    table.write_bytes(gzip.compress(gzip.decompress(table.read_bytes()) + b"garbage\n"))
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(results))
    return results, larger


def test_a_damaged_larger_stored_run_is_one_sentence_before_the_notebook(tmp_path, monkeypatch, capsys,
                                                                          never_executes):
    results, larger = _fig2_store(tmp_path, monkeypatch)
    status, out, err = _run(["run", "fig2", "--output", str(tmp_path / "out")], capsys)
    assert status == 2
    _one_sentence(err, f"stored result {results / 'fig2' / larger}.csv.gz is damaged: the table is not the "
                       f"one recorded")
    assert err[1].startswith(f"Recompute it: delete {results / 'fig2' / larger}.* and run: "
                             f"rankcollapse run fig2 ")


@pytest.mark.slow
@pytest.mark.notebook
def test_a_damaged_result_met_in_the_notebook_is_one_sentence(tmp_path, monkeypatch, capsys):
    """Should the kernel meet the damage (here: the command line's own look is skipped), papermill's error
    becomes the same sentence."""
    results, larger = _fig2_store(tmp_path, monkeypatch)
    monkeypatch.setattr(report, "largest_stored", lambda r, store=None: dict(r))  # in this process only
    status, out, err = _run(["run", "fig2", "--output", str(tmp_path / "out")], capsys)
    assert status == 2
    _one_sentence(err, f"stored result {results / 'fig2' / larger}.csv.gz is damaged")
    assert len(err) == 2 and err[1].startswith("Recompute it: ")


def test_output_that_is_a_file_is_refused(tmp_path, capsys, never_executes):
    (tmp_path / "afile").write_text("")
    status, out, err = _run(["run", "setup", "--output", str(tmp_path / "afile")], capsys)
    assert status == 2 and len(err) == 1
    _one_sentence(err, f"--output must be a folder, and {tmp_path / 'afile'} is a file")


@pytest.mark.slow
@pytest.mark.notebook
def test_a_cell_past_the_timeout_is_one_sentence(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rankcollapse", "run", "setup", "--timeout", "1", "--output",
                           str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == ["rankcollapse run: error: setup ran longer than --timeout 1 s "
                                        "(computing and the notebook together); give a larger --timeout, "
                                        "or none"]


def test_ctrl_c_says_the_same_command_resumes(monkeypatch, capsys, never_executes):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "compute_page", interrupted)
    try:
        status, out, err = _run(["compute", "fig2", "-p", "n_samples", "4"], capsys)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped as a KeyboardInterrupt (a traceback)")
    assert status == 130
    assert [line for line in err if line] == [
        "rankcollapse compute: interrupted; run the same command again to resume from its checkpoints"]


def _interruptible() -> None:
    """In the child: SIGINT at its default, so Python turns it into KeyboardInterrupt, also when these tests
    run under a shell that ignores SIGINT for its background jobs (a child inherits the ignoring)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.models
def test_ctrl_c_during_a_sweep_exits_130_in_one_line(tmp_path):
    env = {**os.environ, "RANKCOLLAPSE_RESULTS_DIR": str(tmp_path / "results"), sweep.BLOCK_ENV: "1",
           ranks.PROGRESS_ENV: "0"}
    command = [sys.executable, "-m", "rankcollapse", "run", "fig2", "-p", "n_samples", "8", "-p", "n_tokens",
               "16", "-p", "n_layers", "2", "--output", str(tmp_path / "out")]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=_interruptible)
    partial = tmp_path / "results" / "partial"
    deadline = time.monotonic() + 120
    while not list(partial.glob("**/*.pt")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if process.poll() is not None:
        pytest.skip("the sweep finished before it could be interrupted")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and err.splitlines()[-1] == (  # after transformers' weight-loading bar
        "rankcollapse run: interrupted; run the same command again to resume from its checkpoints")


@pytest.mark.slow
@pytest.mark.notebook
def test_ctrl_c_while_the_notebook_runs_exits_130_in_one_line(tmp_path):
    command = [sys.executable, "-m", "rankcollapse", "run", "theorem1", "--output", str(tmp_path / "out")]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_interruptible)
    assert process.stdout.readline().startswith("running theorem1 ")  # the notebook starts
    time.sleep(3)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert [line for line in err.splitlines() if line] == [  # no checkpoints promised
        "rankcollapse run: interrupted; theorem1 keeps no checkpoints, so nothing was kept; the same command "
        "starts it again"]


# --------------------------------------------------------------- the recompute command of every stored result


def _stored_results():
    for folder in sorted(p for p in STORE.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for key in STORE.keys(folder.name):
            yield folder.name, key


@pytest.mark.parametrize("store_page, key", list(_stored_results()))
def test_the_recompute_command_of_every_stored_result_runs_and_reproduces_it(store_page, key):
    record = json.loads((STORE.root / store_page / f"{key}.json").read_text())
    stored = record["parameters"]
    if str(stored.get("device", "cpu")).startswith("cuda"):
        pytest.skip("computed on a GPU (the device bundle): its recompute command asks for CUDA, absent here")
    words = shlex.split(recompute_command(store_page, record))
    assert words[:2] == ["rankcollapse", "run"] and len(words[3:]) % 3 == 0, words
    page, pairs = words[2], [(words[i + 1], words[i + 2]) for i in range(3, len(words), 3)]
    assert all(words[i] == "-p" for i in range(3, len(words), 3)), words
    defaults = runner.page_parameters(registry.page(page).path(ROOT))
    assert {name for name, _ in pairs} <= set(defaults), (page, pairs)
    _, parameters = cli.plan_run(page, pairs)
    full = {**defaults, **parameters}
    configs = registry.stored_runs(page, full)
    if page in registry.EXPERIMENT_PAGES:
        keys = {result_key(run.page or page, stored_parameters(run.config)) for run in configs.values()}
        assert key in keys, (page, pairs)
    else:  # a page storing its own parameters (the data page's counts)
        assert {k: full[k] for k in stored} == stored


def test_a_damaged_result_names_its_pages_command(tmp_path):
    key = next(k for k in STORE.keys("mask_design")
               if json.loads((STORE.root / "mask_design" / f"{k}.json").read_text())["parameters"]["window"]
               != 1)
    _copy(tmp_path, "mask_design", key)
    (tmp_path / "mask_design" / f"{key}.csv.gz").write_bytes(gzip.compress(b"edited\n"))
    with pytest.raises(ValueError) as err:
        ResultStore(tmp_path).verify("mask_design", key)
    command = str(err.value).splitlines()[1].split(" and run: ")[1]
    assert command.startswith("rankcollapse run mask_design ") and "-p window" not in command


# ---------------------------------------------------------------- options and values


@pytest.mark.parametrize("argv, words", [
    (["run", "theorem1", "--nproc", "2"], "--nproc applies to the experiment pages (fig2, "),
    (["compute", "equilibria", "--nproc", "2"], "--nproc applies to the experiment pages"),
    (["run", "theorem1", "--profile", "paper"],
     "page 'theorem1' has no 'paper' profile; the pages with one: fig2"),
    (["run", "theorem2", "--device", "cpu"], "--device applies to the pages with a device parameter"),
    (["run", "setup", "--timeout", "-5"],
     "--timeout must be a positive number of seconds (fractions allowed), got -5"),
    (["run", "setup", "--timeout", "0"],
     "--timeout must be a positive number of seconds (fractions allowed), got 0"),
    (["run", "fig2", "-p", "n_samples", "8", "-p", "n_samples", "16"],
     "parameter 'n_samples' is given twice (-p n_samples 8 and -p n_samples 16); give it once"),
    (["run", "mask_design", "-p", "n_tokens", "8"],
     "n_tokens must be an integer in [9, 8192] on this page (its zoo holds windows of up to 8 tokens), "
     "got 8"),
])
def test_options_a_page_does_not_take_are_refused(argv, words, capsys, never_executes):
    status, out, err = _run(argv, capsys)
    assert status == 2 and len(err) == 1
    _one_sentence(err, words, prog=f"rankcollapse {argv[0]}")


@pytest.mark.parametrize("name, value", [("model", "a" * 50_000), ("n_samples", "9" * 50_000),
                                         ("dtype", "f" * 50_000), ("window", repr(list(range(20_000))))])
def test_a_long_value_is_cut_short(name, value, capsys, never_executes):
    status, out, err = _run(["run", "fig2", "-p", name, value], capsys)
    assert status == 2 and len(err) == 1
    _one_sentence(err, "…")
    assert len(err[0]) < 600, len(err[0])


@pytest.mark.skipif(torch.cuda.device_count() > 1, reason="this machine has a cuda:1")
def test_a_cuda_device_is_named_as_given(capsys, never_executes):
    status, out, err = _run(["run", "fig2", "--device", "cuda:1"], capsys)
    assert status == 2
    _one_sentence(err, "device 'cuda:1' was asked for but ")


def test_every_parameters_cell_reads_under_papermill():
    """papermill parses each line of a parameters cell (an '=' in a comment defeats it: 'Unable to parse')."""
    import jupytext
    from papermill.translators import PythonTranslator

    for name, entry in registry.PAGES.items():
        notebook = jupytext.read(entry.path(ROOT))
        cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
        assert [p.name for p in PythonTranslator.inspect(cell)] == list(
            runner.page_parameters(entry.path(ROOT))), name


def test_a_relative_model_folder_is_the_working_directorys(tmp_path, monkeypatch):
    from transformers import BertConfig

    folder = tmp_path / "mymodel"
    folder.mkdir()
    BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64).to_json_file(
        folder / "config.json")
    monkeypatch.chdir(tmp_path)
    _, parameters = cli.plan_run("fig2", [("model", "mymodel")])
    assert parameters["model"] == str(folder)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache, offline."""
    from huggingface_hub import constants

    from rankcollapse.hf import load

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    load._spec_max_tokens.cache_clear()
    yield tmp_path / "hub"
    load._spec_max_tokens.cache_clear()


def test_a_hub_id_without_an_owner_is_taken_from_the_cache(hub_cache):
    from transformers import BertConfig

    snapshot = hub_cache / "models--bert-base-uncased" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (hub_cache / "models--bert-base-uncased" / "refs").mkdir()
    (hub_cache / "models--bert-base-uncased" / "refs" / "main").write_text("0123abcd")
    BertConfig().to_json_file(snapshot / "config.json")
    assert cli.plan_run("fig2", [("model", "bert-base-uncased")])[1]["model"] == "bert-base-uncased"


def test_an_uncached_hub_id_offline_fails_at_once(hub_cache, capsys, never_executes):
    started = time.monotonic()
    status, out, err = _run(["run", "fig2", "-p", "model", "bert-base-uncased"], capsys)
    assert status == 2 and len(err) == 1 and time.monotonic() - started < 10
    _one_sentence(err, f"model 'bert-base-uncased' is not in the Hugging Face cache ({hub_cache}) and the "
                       f"hub")


def test_the_sigterm_handler_is_put_back(capsys):
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["run", "setup", "--timeout", "-5"]) == 2
    assert signal.getsignal(signal.SIGTERM) == before
