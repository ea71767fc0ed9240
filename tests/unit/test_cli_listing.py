"""What a user expects of the command line: ``--version``; ``pages PAGE`` (parameters, defaults, types,
ranges); ``results`` (every stored result, verified or damaged, and what each page shows at its defaults);
``--nproc`` on ``compute``; where the results went; a page that shows the largest stored run says so; every
run gets a folder of its own; the README names the extra models of the paper profile and every environment
variable the package reads."""

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from rankcollapse.book import cli, cli_listing
from rankcollapse.book import registry
from rankcollapse.book import runner
from rankcollapse.experiments import sweep
from rankcollapse.experiments.config import stored_parameters
from rankcollapse.experiments.store import ResultStore, result_key

ROOT = Path(__file__).resolve().parents[2]
STORE = ResultStore(ROOT / "results")


def test_version(capsys):
    from rankcollapse import __version__

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"rankcollapse {__version__}\n"


def test_pages_page_lists_parameters_with_defaults_types_and_ranges(capsys):
    assert cli.main(["pages", "fig2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fig2: Fig. 2: masks and LayerNorm (book/experiments/fig2.md)\n")
    assert "  window = 4  (an integer in [1, 31])\n      w: half-width of the sliding window" in out
    assert "  dtype = 'float64'  (a string; one of 'float64', 'float32')\n" in out
    assert "  show_largest_stored = True  (a boolean)\n" in out
    assert "profile paper: model = 'pkg:mpnet', n_samples = 3000" in out and "--nproc K" in out
    assert cli.main(["pages", "equilibria"]) == 0
    out = capsys.readouterr().out
    assert "  sweep_d_models = [2, 3, 4]  (a list, each entry an integer in [2, 6])\n" in out
    assert "  n_layers = 100  (an integer in [1, 100000])\n" in out and "--nproc" not in out


@pytest.mark.parametrize("name", list(registry.PAGES))
def test_pages_page_lists_every_parameter(name, capsys):
    assert cli.main(["pages", name]) == 0
    out = capsys.readouterr().out
    for parameter, default in runner.page_parameters(registry.page(name).path(ROOT)).items():
        assert f"\n  {parameter} = {default!r}  (" in out, parameter


def test_pages_of_an_unknown_page_is_one_line(capsys):
    assert cli.main(["pages", "fig9"]) == 2
    assert capsys.readouterr().err.startswith(
        "rankcollapse pages: error: unknown page 'fig9'; pages are: verdicts, setup")


def test_results_lists_every_stored_result(capsys):
    from rankcollapse.experiments import checkpoints

    assert cli.main(["results"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["page", "key", "scale", "layers", "model", "dtype", "device", "commit",
                                "time", "per-sample", "status"]
    keys = {(page, k) for page in STORE.pages() for k in STORE.keys(page)}
    unfinished = {(r["page"], r["key"]) for r in checkpoints.partial_runs(STORE)}  # listed with progress
    table = lines[1:lines.index("")] if "" in lines else lines[1:]  # the unfinished runs' own section below
    assert {tuple(line.split()[:2]) for line in table} == keys | unfinished
    fig2 = next(line for line in lines if line.startswith("fig2") and "3000 × 128" in line)
    assert fig2.split()[-1] == "verified" and "pkg:mpnet" in fig2 and "float32" in fig2
    per_sample = {tuple(line.split()[:2]): line.split()[-2] for line in table}
    for page, key in keys:  # "yes" where a samples file is stored beside the table
        samples = (STORE.root / page / f"{key}.samples.npz").is_file()
        assert per_sample[page, key] == ("yes" if samples else "–" if page == "data" else "no"), (page, key)
    assert per_sample["fig3", "12e763666a1a33b5"] == "yes"  # Fig. 3's 3000 x 128 run


def test_results_says_which_are_damaged(tmp_path, monkeypatch, capsys):
    key = STORE.keys("fig2")[0]
    (tmp_path / "fig2").mkdir()
    for suffix in (".csv.gz", ".json"):
        shutil.copyfile(STORE.root / "fig2" / f"{key}{suffix}", tmp_path / "fig2" / f"{key}{suffix}")
    (tmp_path / "fig2" / f"{key}.csv.gz").write_bytes(gzip.compress(b"edited\n"))
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    assert cli.main(["results", "fig2"]) == 2  # as every damaged stored result (README)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    (line,) = lines[1:lines.index("")]
    assert line.startswith(f"fig2  {key}") and "damaged: the table is not the one recorded" in line
    assert lines[-1].split()[:2] == ["fig2", "damaged"]  # what the page shows: nothing it can read
    assert err == "rankcollapse results: error: 1 of 1 stored results damaged (their status says why)\n"


def test_compute_takes_nproc(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(cli, "compute_page",
                        lambda page, parameters, nproc=1, show=True: seen.update(nproc=nproc))
    monkeypatch.setattr(cli_listing, "stored_parts", lambda page, parameters: {})
    assert cli.main(["compute", "fig2", "-p", "n_samples", "4", "--nproc", "2"]) == 0
    assert seen == {"nproc": 2}


def _default_fig2(results: Path, larger: bool = False) -> list[str]:
    """Copy Fig. 2's results at its defaults (its main sweep first, then its controls; and a larger stored run
    of it) into ``results``; their keys, in the page's order of parts."""
    defaults = runner.page_parameters(registry.page("fig2").path(ROOT))
    own = [result_key("fig2", stored_parameters(run.config))
           for run in registry.configure("fig2", defaults).values()]
    keys = own + [k for k in STORE.keys("fig2") if larger and
                  json.loads((STORE.root / "fig2" / f"{k}.json").read_text())["parameters"]["n_samples"]
                  == 128]
    (results / "fig2").mkdir(parents=True)
    for key in keys:
        for path in (STORE.root / "fig2").glob(f"{key}.*"):  # the table, its record and any per-sample values
            shutil.copyfile(path, results / "fig2" / path.name)
    return own


def test_results_says_what_each_page_shows_at_its_defaults(tmp_path, monkeypatch):
    """Per page, the scale the book shows at the parameters cell's defaults (the larger stored run once every
    part is stored at it) and the parts shown without per-sample values; "–" before the defaults are."""
    defaults = runner.page_parameters(registry.page("fig2").path(ROOT))
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "empty"))
    assert cli_listing.shown_table("fig2") == [{"page": "fig2", "scale": "–", "model": "–", "dtype": "–",
                                                "parts": "10", "without per-sample": "–"}]
    for larger in (False, True):
        results = tmp_path / f"larger-{larger}"
        _default_fig2(results, larger)
        monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(results))
        (row,) = cli_listing.shown_table("fig2")
        assert row["scale"] == ("128 × 32" if larger else f"{defaults['n_samples']} × {defaults['n_tokens']}")
        shown = registry.largest_stored(cli_listing.stored_parts("fig2", defaults), ResultStore(results))
        lacking = [part for part, r in shown.items() if not r.table_path.with_suffix("").with_suffix(
            ".samples.npz").is_file()]
        assert row["without per-sample"] == (", ".join(lacking) or "none")


def test_compute_says_the_result_was_already_stored(tmp_path, monkeypatch, capsys):
    own = _default_fig2(tmp_path)
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(sweep, "compute", lambda *a, **k: pytest.fail("nothing is computed"))
    assert cli.main(["compute", "fig2"]) == 0
    assert capsys.readouterr().out == "".join(f"already stored: {tmp_path / 'fig2' / key}.csv.gz\n"
                                              for key in own)


@pytest.mark.slow
@pytest.mark.models
def test_compute_says_where_it_stored_the_result(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("RANKCOLLAPSE_PROGRESS", "0")
    assert cli.main(["compute", "fig2", "-p", "n_samples", "2", "-p", "n_tokens", "8", "-p", "n_layers",
                     "1"]) == 0
    lines = capsys.readouterr().out.splitlines()  # the main sweep and its controls, each stored
    assert sorted(line for line in lines if line.startswith("stored: ")) == sorted(
        f"stored: {csv}" for csv in (tmp_path / "fig2").glob("*.csv.gz"))


def test_run_without_parameters_says_it_shows_the_largest_stored_run(tmp_path, monkeypatch, capsys):
    own = _default_fig2(tmp_path / "results", larger=True)
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("RANKCOLLAPSE_FIGURE_DIR", str(tmp_path / "unused"))  # main() sets it; restored after

    def execute(page, parameters, output, timeout=600):
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(json.dumps({"cells": []}))
        return output

    monkeypatch.setattr(runner, "execute_page", execute)
    assert cli.main(["run", "fig2", "--output", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("note: fig2 shows the largest stored run of this experiment (128 samples × "
                               "32 tokens, pkg:minilm, float64: ")
    assert lines[0].endswith("not its parameters cell's defaults; add -p show_largest_stored False to see "
                             "exactly the defaults")
    assert lines[-len(own):] == [f"already stored: {tmp_path / 'results' / 'fig2' / key}.csv.gz"
                                 for key in own]
    assert cli.main(["run", "fig2", "-p", "show_largest_stored", "False", "--output",
                     str(tmp_path / "out2")]) == 0
    assert not capsys.readouterr().out.startswith("note:")


def test_every_run_gets_a_folder_of_its_own(tmp_path):
    first = cli.new_run_folder(tmp_path / "runs", "setup", "20240101T000000Z")
    second = cli.new_run_folder(tmp_path / "runs", "setup", "20240101T000000Z")
    assert first.name == "setup-20240101T000000Z" and second.name == "setup-20240101T000000Z-2"
    assert first.is_dir() and second.is_dir()


def test_the_readme_names_the_extra_models_and_every_environment_variable():
    readme = (ROOT / "README.md").read_text()
    used = {m for path in (ROOT / "src").rglob("*.py")
            for m in re.findall(r"RANKCOLLAPSE_[A-Z_]+", path.read_text())}
    assert used and all(f"`{name}`" in readme for name in used), sorted(n for n in used
                                                                        if f"`{n}`" not in readme)
    assert re.search(r"paper profile.{0,200}requirements-models-extra\.txt", readme, re.S)
    for command in ("rankcollapse pages fig2", "rankcollapse results", "rankcollapse --version",
                    "rankcollapse compute fig2"):
        assert command in readme, command


def test_unfinished_runs_are_listed_with_their_progress_and_where_they_resume(monkeypatch):
    from rankcollapse.experiments import checkpoints

    runs = [{"page": "fig3", "key": "abc", "folder": "/cache/partial/fig3/abc-1234", "resumable": False,
             "done": 15, "units": 94, "commit": "31c684e1f00d-dirty", "started": "2026-12-04T17:25:53+00:00"},
            {"page": "fig2", "key": "def", "folder": "/cache/partial/fig2/def-5678", "resumable": True,
             "done": 3, "units": None, "commit": "0123456789ab", "started": ""}]
    monkeypatch.setattr(checkpoints, "partial_runs", lambda store: runs)
    rows = cli_listing.partial_table()
    assert [(r["page"], r["units done"], r["resume"]) for r in rows] == [
        ("fig3", "15 of 94", "nowhere: started from uncommitted code (delete the folder)"),
        ("fig2", "3 of ?", "here (same computing code)")]
    runs[0]["commit"] = "31c684e1f00d"
    resume = cli_listing.partial_table("fig3")[0]["resume"]
    assert resume == "in commit 31c684e1 without local changes (computing code changed)"
    assert [r["page"] for r in cli_listing.partial_table("fig2")] == ["fig2"]
    assert cli_listing.format_table(rows).splitlines()[0].split() == [
        "page", "key", "units", "done", "commit", "started", "resume", "folder"]


def test_results_shows_each_unfinished_run_with_its_scale_and_progress(tmp_path, monkeypatch, capsys):
    """A run with 3 of its 10 units finished (its record names its parameters) and one of the same result
    left by other computing code: rows of the store's listing, below its stored results."""
    from rankcollapse.experiments import checkpoints

    store = ResultStore(tmp_path)
    parameters = {"model": "pkg:minilm", "n_samples": 64, "n_tokens": 32, "n_layers": 12, "dtype": "float64",
                  "device": "cpu"}
    folder = checkpoints.partial_folder(store, "fig2", parameters)
    stale = folder.with_name(folder.name.rpartition("-")[0] + "-000000000000")
    for path in (*(folder / f"{u}.pt" for u in ("initialized-san-0-8", "pretrained-san-0-8",
                                                  "initialized-san-8-16")), stale / "initialized-san-0-8.pt"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    (folder / checkpoints.RUN_RECORD).write_text(json.dumps({"page": "fig2", "parameters": parameters,
                                                             "units": 10, "git_commit": "0123456789abcdef"}))
    (tmp_path / "fig2").mkdir()  # a page folder with nothing stored yet
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    assert cli.main(["results"]) == 0
    lines = capsys.readouterr().out.splitlines()
    key = result_key("fig2", parameters)
    rows = {" ".join(line.split()) for line in lines[1:lines.index("")]}
    assert rows == {f"fig2 {key} 64 × 32 12 pkg:minilm float64 cpu 01234567 – – partial 3/10 units, "
                    "resumable",
                    f"fig2 {key} – – – – – unknown – – partial 1/? units, not resumable by this code"}
    assert [r["status"] for r in cli_listing.results_table("fig3")] == []
