"""Progress that survives a change of machine: a run's finished units wait beside its store, in
``<store>/partial/``, which git tracks (the book's ``results/partial/`` is not ignored); committed, they
travel with the repository, and the same run in a fresh clone with an empty cache computes only the missing
units, stores the uninterrupted run's table byte for byte and deletes them."""

import subprocess
from pathlib import Path

import pytest

from rankcollapse.book import cli, registry
from rankcollapse.experiments import checkpoints, ranks, sweep
from rankcollapse.experiments.config import stored_parameters
from rankcollapse.experiments.store import ResultStore

ROOT = Path(__file__).resolve().parents[2]
# MiniLM, Fig. 2's main sweep: 4 samples x 16 tokens, 2 layers; in blocks of 2: 2 blocks x 2 weight sources
TINY = {"model": "pkg:minilm", "n_samples": 4, "n_tokens": 16, "n_layers": 2, "n_samples_controls": 1,
        "n_weight_seeds": 1}


def _git(folder: Path, *args: str) -> str:
    """``git ARGS`` in ``folder`` (its own identity, no user configuration), its stdout."""
    command = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org",
               "-c", "commit.gpgsign=false", *args]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, check=True).stdout


def test_the_books_unit_files_are_not_ignored_by_git():
    """The book's store keeps its units in results/partial/, which must reach a commit."""
    for name in ("unit.pt", "initialized-san-0-64.pt", checkpoints.RUN_RECORD):
        path = f"results/partial/fig2/0123456789abcdef-x/{name}"
        done = subprocess.run(["git", "check-ignore", "--no-index", "-v", path], cwd=ROOT,
                              capture_output=True, text=True)
        assert done.returncode == 1, f"{path} is ignored: {done.stdout}"  # 1: not ignored; 0: ignored


@pytest.mark.slow
@pytest.mark.models
def test_committed_units_resume_in_a_fresh_clone_with_an_empty_cache(tmp_path, monkeypatch, capsys):
    """Interrupted after its first unit, committed (store and partial/), cloned: the clone's run computes only
    the three missing units, lists the run's progress before, and stores the uninterrupted run's table (byte
    for byte) and deletes the units."""
    monkeypatch.setenv(sweep.BLOCK_ENV, "2")
    monkeypatch.setenv(ranks.PROGRESS_ENV, "0")
    config = registry.configure("fig2", TINY)["main"].config
    computed, original, interrupt = [], sweep._Work.compute, True

    def compute(work, unit, budget):  # the units computed; while interrupt, any after the first raises
        if computed and interrupt:
            raise KeyboardInterrupt
        computed.append(unit.name)
        return original(work, unit, budget)

    monkeypatch.setattr(sweep._Work, "compute", compute)
    first = tmp_path / "first"
    (first / "results").mkdir(parents=True)
    (first / "results" / "README.md").write_text("a results store\n")
    _git(first, "init", "-q")
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(first / "results"))
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path / "first-cache"))
    with pytest.raises(KeyboardInterrupt):
        sweep.run_experiment("fig2", config)
    folder = checkpoints.partial_folder(ResultStore(), "fig2", stored_parameters(config))
    assert computed == ["initialized-san-0-2"] and sorted(p.name for p in folder.iterdir()) == [
        "initialized-san-0-2.pt", checkpoints.RUN_RECORD]
    _git(first, "add", "results")
    _git(first, "commit", "-q", "-m", "the first unit")
    assert f"results/partial/fig2/{folder.name}/initialized-san-0-2.pt" in _git(first, "ls-files")

    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(first), str(clone))
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(clone / "results"))
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path / "empty-cache"))
    capsys.readouterr()
    assert cli.main(["results"]) == 0
    assert "partial 1/4 units, resumable" in capsys.readouterr().out
    interrupt, computed[:] = False, []
    resumed = sweep.run_experiment("fig2", config)
    assert computed == ["pretrained-san-0-2", "initialized-san-2-4", "pretrained-san-2-4"]
    assert resumed.provenance["units_resumed"] == 1
    assert resumed.table_path.is_relative_to(clone / "results")
    assert not (clone / "results" / "partial").exists()  # the result replaced its units

    whole = sweep.run_experiment("fig2", config, ResultStore(tmp_path / "whole"))
    assert len(computed) == 3 + 4 and whole.key == resumed.key
    assert resumed.table_path.read_bytes() == whole.table_path.read_bytes()
    samples = lambda result: result.table_path.with_name(f"{result.key}.samples.npz")  # noqa: E731
    assert samples(resumed).read_bytes() == samples(whole).read_bytes()
