"""Progress that survives a change of machine: a run's finished units wait beside its store, in
``<store>/partial/``, which git tracks (the book's ``results/partial/`` is not ignored); committed, they
travel with the repository, and the same run in a fresh clone with an empty cache computes only the missing
units, stores the uninterrupted run's table byte for byte and deletes them."""

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

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
    for name in ("unit.pt", "initialized-san-0-64.pt", "initialized-san-0-64.npz", checkpoints.RUN_RECORD):
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


def test_packed_units_read_back_within_half_a_step_of_their_log_and_flags_exactly(tmp_path, capsys):
    """``pack_units``: the exact checkpoint replaced by a packed one about a tenth of its size, read back
    with each value's log within half a step (its range over the unit's samples / 131,064), and exactly the
    0/1 flags, a constant, NaN padding and a metric with negative values; a damaged packed checkpoint is
    moved aside with one warning; one of another run's parameters is not used."""
    unit = checkpoints.Unit("initialized", False, 0, 64)
    generator = torch.Generator().manual_seed(0)
    mu = torch.exp(torch.randn(5, 3, 64, generator=generator, dtype=torch.float64) * 4)  # ±10 decades
    mu[4, 2] = float("nan")  # a shallower stack's padding
    metrics = {"mu": mu, "exact": (mu > 1).double(), "relative_floor": torch.full_like(mu, 2.0**-52),
               "shift": torch.randn(5, 3, 64, generator=generator, dtype=torch.float64)}
    saved = checkpoints.Checkpoints(tmp_path, {"n_samples": 64})
    saved.save(unit, metrics, 1.5)
    exact = (tmp_path / f"{unit.name}.pt").stat().st_size
    [(path, before, after)] = checkpoints.pack_units(tmp_path)
    assert path == tmp_path / f"{unit.name}.npz" and before == exact and after < 0.5 * before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # the exact one replaced, no temporary
    loaded = checkpoints.Checkpoints(tmp_path, {"n_samples": 64})
    values, seconds = loaded.load(unit)
    assert seconds == 1.5 and loaded.packed == {unit.name} and checkpoints._finished(tmp_path) == 1
    for name in ("exact", "relative_floor", "shift"):
        assert torch.equal(values[name], metrics[name]), name
    logs, back = torch.log(metrics["mu"]), torch.log(values["mu"])
    half_step = (logs.nan_to_num(-np.inf).amax(-1) - logs.nan_to_num(np.inf).amin(-1)) / 131064
    finite = torch.isfinite(logs)
    assert torch.equal(torch.isnan(back), torch.isnan(logs))
    assert ((back - logs).abs() <= half_step[..., None] * (1 + 1e-9) + 1e-12)[finite].all()
    assert not torch.equal(values["mu"], metrics["mu"])  # lossy: it is a packed form, not a copy
    assert checkpoints.Checkpoints(tmp_path, {"n_samples": 65}).load(unit) is None
    path.write_bytes(path.read_bytes()[: after // 2])
    assert checkpoints.Checkpoints(tmp_path, {"n_samples": 64}).load(unit) is None
    assert f"checkpoint {path} is corrupt" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{path.name}.corrupt"]


@pytest.mark.slow
@pytest.mark.models
def test_a_run_resumes_from_packed_units_and_says_so(tmp_path, monkeypatch, capsys):
    """Interrupted after its first unit, packed by ``rankcollapse results --pack``: the run computes the
    other units, stores a result whose record counts the packed unit, and whose table is the uninterrupted
    run's within 1e-4 (not byte for byte)."""
    monkeypatch.setenv(sweep.BLOCK_ENV, "2")
    monkeypatch.setenv(ranks.PROGRESS_ENV, "0")
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "results"))
    config = registry.configure("fig2", TINY)["main"].config
    original = sweep._Work.compute

    def first_only(work, unit, budget):
        if list(checkpoints.partial_folder(ResultStore(), "fig2", stored_parameters(config)).glob("*.pt")):
            raise KeyboardInterrupt
        return original(work, unit, budget)

    monkeypatch.setattr(sweep._Work, "compute", first_only)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_experiment("fig2", config)
    monkeypatch.setattr(sweep._Work, "compute", original)
    capsys.readouterr()
    assert cli.main(["results", "--pack"]) == 0
    out = capsys.readouterr().out
    assert "packed 1 units of " in out and "partial 1/4 units, resumable" in out
    resumed = sweep.run_experiment("fig2", config)
    assert resumed.provenance["units_resumed"] == resumed.provenance["units_resumed_packed"] == 1
    whole = sweep.run_experiment("fig2", config, ResultStore(tmp_path / "whole"))
    assert "units_resumed_packed" not in whole.provenance
    a, b = pd.read_csv(resumed.table_path), pd.read_csv(whole.table_path)
    stats = ["mean", "median", "q10", "q90", "min", "max"]
    assert a.drop(columns=[*stats, "std"]).equals(b.drop(columns=[*stats, "std"]))
    assert np.allclose(a[stats], b[stats], rtol=1e-4, atol=0, equal_nan=True)
    assert ((a["std"] - b["std"]).abs() <= 1e-4 * b["mean"].abs()).where(b["std"].notna(), True).all()
    assert resumed.table_path.read_bytes() != whole.table_path.read_bytes()
