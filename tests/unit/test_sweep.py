"""Long sweeps (rankcollapse.experiments.sweep): two gloo ranks store the single-process result; a run killed
with SIGKILL and started again stores the uninterrupted result; the plan (size, time, memory) and the progress
bar show when asked and never in a Jupyter kernel; a budget that cannot hold one block is refused."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.book import cli
from rankcollapse.experiments.config import ExperimentConfig, stored_parameters
from rankcollapse.book import registry
from rankcollapse.experiments import checkpoints, plan, ranks, sweep
from rankcollapse.experiments.provenance import source_sha256
from rankcollapse.experiments.store import ResultStore

pytestmark = pytest.mark.models

ROOT = Path(__file__).resolve().parents[2]
# MiniLM, 4 x 16 tokens, 2 layers; Fig. 2's controls on 1 sample, one weight seed (its controls and
# pretrained_self)
TINY = {"model": "pkg:minilm", "n_samples": 4, "n_tokens": 16, "n_layers": 2, "n_samples_controls": 1,
        "n_weight_seeds": 1}
# Fig. 2's own
TINY_FIG4 = {k: v for k, v in TINY.items() if k not in ("n_samples_controls", "n_weight_seeds")}



def _compute(page: str, root: Path, **parameters):
    """The page's one sweep, computed (or loaded) in the store at ``root``."""
    run = registry.configure(page, parameters)["main"]
    return sweep.run_experiment(page, run.config, ResultStore(root))

def _environment(results: Path, block: int) -> dict[str, str]:
    src = str(Path(sweep.__file__).resolve().parents[2])
    return {**os.environ, "RANKCOLLAPSE_RESULTS_DIR": str(results), sweep.BLOCK_ENV: str(block),
            "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]), ranks.PROGRESS_ENV: "0"}


def _pairs(parameters: dict) -> list[str]:
    return [a for name, value in parameters.items() for a in ("-p", name, repr(value))]


def _stored(root: Path, page: str) -> tuple[pd.DataFrame, dict, Path]:
    """The main result stored under ``root/page`` (the one with the most samples: Fig. 2's controls run on
    fewer): table, provenance, CSV path."""
    csv = max(sorted((root / page).glob("*.csv.gz")),
              key=lambda path: json.loads(_record(path).read_text())["parameters"]["n_samples"])
    table = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    return table, json.loads(_record(csv).read_text()), csv


def _record(table: Path) -> Path:
    """The JSON record beside a stored table ``<key>.csv.gz``."""
    return table.with_name(table.name.removesuffix(".csv.gz") + ".json")


@pytest.mark.slow
def test_two_gloo_ranks_store_the_single_process_result(tmp_path, monkeypatch):
    """fig4 (SAN + the pretrained and initialized full transformer, every metric), float64: samples sharded
    over 2 CPU ranks (torchrun, gloo) in blocks of 1, gathered to rank 0, equal to one process to 1e-12."""
    monkeypatch.setenv(sweep.BLOCK_ENV, "1")
    single = _compute("fig4", tmp_path / "single", **TINY_FIG4)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               "-m", "rankcollapse", "compute", "fig4", *_pairs(TINY_FIG4)]
    done = subprocess.run(command, cwd=ROOT, env=_environment(tmp_path / "dist", 1), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    table, provenance, csv = _stored(tmp_path / "dist", "fig4")
    assert csv.name == f"{single.key}.csv.gz"  # the same key
    assert provenance["world_size"] == 2 and single.provenance["world_size"] == 1
    assert {k: v for k, v in provenance.items() if k in ("weight_sha256", "sample_ids_sha256", "depth")} == \
        {k: v for k, v in single.provenance.items() if k in ("weight_sha256", "sample_ids_sha256", "depth")}
    expected = pd.read_csv(single.table_path, keep_default_na=False, na_values=[""])
    assert set(table["variant"]) == {"SAN", "full transformer"}
    pd.testing.assert_frame_equal(table, expected, check_exact=False, rtol=1e-12, atol=1e-12)
    assert not (tmp_path / "dist" / "partial").exists()


def test_the_full_transformers_geometry_is_kept_per_sample_and_gives_fig4_its_intervals(tmp_path):
    """fig4 (geometry with the full transformer): σ_min and mean |cos| are kept per sample for the two
    full-transformer curves only (NaN for the SAN curves), their medians are the table's (to the stored
    form's 0.03 %), and the page's three comparative claims get an interval around their estimate."""
    from rankcollapse.book.pages import fig4
    from rankcollapse.experiments.sample_values import GEOMETRY_METRICS

    result = _compute("fig4", tmp_path, **TINY_FIG4)
    stored = ResultStore(tmp_path).verify("fig4", result.key)
    full = (stored.samples.labels["variant"] == "full transformer").to_numpy()
    assert full.sum() == 2
    for metric in GEOMETRY_METRICS:
        values = stored.samples.values[metric]  # [curve, layer + 1, sample]
        assert np.isnan(values[~full]).all() and np.isfinite(values[full]).all()
        for weights in ("initialized", "pretrained"):
            rows = stored.table.query(f"metric == '{metric}' and variant == 'full transformer' "
                                      f"and weights == '{weights}'").sort_values("layer")
            curve = stored.samples.curve(metric, weights=weights, variant="full transformer")
            np.testing.assert_allclose(np.median(curve, axis=-1), rows["median"], rtol=3e-4)
    changes = fig4.claims(stored)[1:]
    assert len(changes) == 3
    for row in changes:
        text = row.cells[0].words
        low, high = (float(x) for x in text.rpartition("[")[2].rstrip("])").split(", "))
        estimate = float(row.cells[0].text.removeprefix("×").split(" ")[0])
        assert low <= estimate <= high, text


@pytest.mark.slow
def test_a_run_killed_halfway_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    """SIGKILL after the first checkpoints: no result is left; the same command again finishes with a
    table identical to an uninterrupted run's and deletes its checkpoints."""
    parameters = {**TINY, "n_samples": 8}
    env = _environment(tmp_path / "killed", 1)
    command = [sys.executable, "-m", "rankcollapse", "compute", "fig2", *_pairs(parameters)]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    partial = tmp_path / "killed" / "partial" / "fig2"
    deadline = time.monotonic() + 900
    finished = lambda: sorted(p.name for p in partial.glob("*/*.pt")  # noqa: E731
                              if not p.name.startswith("."))
    # not the writer's temporaries
    while len(finished()) < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()[-3000:]
    left = finished()  # a kill mid-write leaves a temporary, which resume ignores
    assert 3 <= len(left) < 16, left  # killed halfway through 8 blocks x 2 weight sources
    assert not list((tmp_path / "killed" / "fig2").glob("*.[cj]s*"))  # no CSV, no JSON: no result at all
    killed_seconds = sum(torch.load(p, weights_only=True)["seconds"] for p in partial.glob("*/*.pt")
                         if not p.name.startswith("."))

    again = subprocess.run(command, cwd=ROOT, env={**env, ranks.PROGRESS_ENV: "1"}, capture_output=True,
                           text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming, {len(left)} of 16 units" in again.stderr
    assert not (tmp_path / "killed" / "partial").exists()

    monkeypatch.setenv(sweep.BLOCK_ENV, "1")
    uninterrupted = _compute("fig2", tmp_path / "whole", **parameters)
    resumed, record, csv = _stored(tmp_path / "killed", "fig2")
    assert csv.name == f"{uninterrupted.key}.csv.gz"
    assert (record["source_sha256"] == source_sha256()
            and record["git_commit"] == uninterrupted.provenance["git_commit"])
    assert record["units_resumed"] == len(left) and uninterrupted.provenance["units_resumed"] == 0
    assert record["compute_time_s"] > killed_seconds > 0  # the killed session's units count, and the new ones
    assert 0 < uninterrupted.provenance["compute_time_s"] <= uninterrupted.provenance["wall_time_s"]
    expected = pd.read_csv(uninterrupted.table_path, keep_default_na=False, na_values=[""])
    pd.testing.assert_frame_equal(resumed, expected, check_exact=True)


class _KernelStream:
    """Stands in for ipykernel's stderr (what a notebook cell writes to in the book build)."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


_KernelStream.__module__ = "ipykernel.iostream"


@pytest.mark.slow
def test_plan_and_progress_show_when_asked_and_never_in_a_kernel(tmp_path, capsys, monkeypatch):
    with ranks.progress(True):
        result = _compute("fig2", tmp_path / "asked", **TINY)
    err = capsys.readouterr().err
    size = ("fig2: 4 samples x (2 initialized + 2 pretrained) layers x 12 configurations "
            "= 192 sample.layer.configs")
    assert size in err
    assert "expected time" in err and "sample.layer.configs/s per process" in err
    assert re.search(r"expected time of the layers (under 1 s|\S+ \S+ or less) \(loading the model", err)
    assert "curves settled on their floor stop sooner" in err  # settle on by default
    assert "GiB per process" in err and "available" in err
    assert "24/24" in err and "block.config" in err  # the bar: 1 block x 2 weight sources x 12 configurations
    assert result.provenance["block_samples"] == 4  # the device's block, capped at the samples there are

    monkeypatch.setenv(ranks.PROGRESS_ENV, "1")
    kernel = _KernelStream()
    monkeypatch.setattr(sys, "stderr", kernel)
    assert not ranks.reporting()
    with ranks.progress(True):
        _compute("fig2", tmp_path / "kernel", **TINY)
    assert kernel.text == ""
    monkeypatch.undo()
    monkeypatch.setenv(ranks.PROGRESS_ENV, "0")
    assert not ranks.reporting()
    _compute("fig2", tmp_path / "quiet", **TINY)
    assert capsys.readouterr().err == ""


def test_a_budget_that_cannot_hold_one_block_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(plan.BUDGET_ENV, "1000")
    with pytest.raises(ValueError, match=r"memory budget \(1,000 bytes, \$RANKCOLLAPSE_MEMORY_BUDGET\) "
                                         r"cannot hold one block: one sample of 16 tokens at width 384 in "
                                         r"float64 needs"):
        _compute("fig2", tmp_path, **TINY)
    assert not (tmp_path / "fig2").exists()

    def fail(*args, **kwargs):
        raise AssertionError("the page must not be executed after a refusal")

    monkeypatch.setattr("rankcollapse.book.runner.execute_page", fail)
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "store"))  # --output must lie outside it
    assert cli.main(["run", "fig2", *_pairs(TINY), "--output", str(tmp_path / "run")]) == 2
    assert "rankcollapse run: error: the memory budget" in capsys.readouterr().err


def test_units_cover_every_sample_once_and_checkpoints_belong_to_their_parameters(tmp_path):
    config = ExperimentConfig(n_samples=10, full_transformer=True)
    plan = sweep.units(config, 4)
    assert ([(u.start, u.stop) for u in plan if u.weights == "pretrained" and not u.full]
            == [(0, 4), (4, 8), (8, 10)])
    assert len(plan) == 3 * 2 * 2 and len({u.name for u in plan}) == len(plan)
    # [layer + 1, config, sample]: plan[0] holds 4 samples
    metrics = {"mu": torch.arange(12.0).reshape(3, 1, 4)}
    checkpoints.Checkpoints(tmp_path, {"n_samples": 10}).save(plan[0], metrics, 2.5)
    loaded, seconds = checkpoints.Checkpoints(tmp_path, {"n_samples": 10}).load(plan[0])
    assert torch.equal(loaded["mu"], metrics["mu"]) and seconds == 2.5
    assert checkpoints.Checkpoints(tmp_path, {"n_samples": 11}).load(plan[0]) is None
    assert checkpoints.Checkpoints(None, {"n_samples": 10}).load(plan[0]) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{plan[0].name}.pt"]  # atomic: no temporary left


def test_a_rank_that_finished_waits_at_the_gather_longer_than_the_default_half_hour(monkeypatch):
    """The process group is joined with GATHER_TIMEOUT (days), not torch's 30 minutes: an idle rank of an
    unevenly split run is not ended while the others still compute."""
    import datetime

    joined = {}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(ranks.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(ranks.dist, "init_process_group", lambda **kwargs: joined.update(kwargs))
    assert ranks.init_distributed("cpu")
    assert joined == {"backend": "gloo", "timeout": ranks.GATHER_TIMEOUT}
    assert ranks.GATHER_TIMEOUT >= datetime.timedelta(days=1)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_the_ranks_share_every_unit_once_and_the_costly_san_units_evenly(world):
    """Fig. 4's plan (SAN and full-transformer units of two weight sources, 12 blocks): every unit on exactly
    one rank, and each rank's SAN units of each weight source within one of an even share."""
    plan = sweep.units(ExperimentConfig(n_samples=24, full_transformer=True), 2)
    shards = [sweep.shard(plan, rank, world) for rank in range(world)]
    assert sorted(u.name for s in shards for u in s) == sorted(u.name for u in plan)
    for weights in ("initialized", "pretrained"):
        counts = [sum(not u.full and u.weights == weights for u in s) for s in shards]
        assert max(counts) - min(counts) <= 1, counts


@pytest.mark.parametrize("variable, value, words", [
    (sweep.BLOCK_ENV, "0", "RANKCOLLAPSE_BLOCK_SAMPLES must be an integer >= 1, got '0'"),
    (plan.BUDGET_ENV, "lots", "RANKCOLLAPSE_MEMORY_BUDGET must be a number of bytes >= 1, got 'lots'"),
    (sweep.SETTLE_ENV, "-1", "RANKCOLLAPSE_SETTLE_LAYERS must be a number of layers >= 0, got '-1'"),
])
def test_bad_settings_name_the_variable(variable, value, words, monkeypatch):
    monkeypatch.setenv(variable, value)
    read = {sweep.BLOCK_ENV: sweep.block_samples, sweep.SETTLE_ENV: sweep.settle_layers}
    with pytest.raises(ValueError, match=words):
        read.get(variable, lambda c: plan.memory_budget())(ExperimentConfig())


def test_nproc_must_be_a_positive_integer(capsys):
    assert cli.main(["run", "fig2", "--nproc", "0"]) == 2
    assert "nproc must be an integer in [1, 4096], got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_rankcollapse_run_computes_first_then_renders_the_stored_result(tmp_path, monkeypatch, capsys):
    """``rankcollapse run fig2 --profile paper`` at a reduced size: plan and progress on stderr, one stored
    result, and the executed page loads it instead of computing again."""
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("RANKCOLLAPSE_FIGURE_DIR", str(tmp_path / "unused"))  # main() sets it; restored after
    monkeypatch.delenv(ranks.PROGRESS_ENV, raising=False)
    small = {"model": "pkg:minilm", "n_samples": 4, "n_tokens": 32,  # 12 layers: the page checks its claims
             "n_samples_controls": 1, "n_weight_seeds": 1}
    argv = ["run", "fig2", "--profile", "paper", *_pairs(small), "--output", str(tmp_path / "run")]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert ("fig2: 4 samples x (12 initialized + 6 pretrained) layers x 12 configurations" in err
            and "24/24" in err)
    table, provenance, _ = _stored(tmp_path / "results", "fig2")
    assert provenance["parameters"]["overlap"] == "sentence_starts" and set(table["n_samples"]) == {4}
    assert "loaded from the results store" in (tmp_path / "run" / "fig2.ipynb").read_text()


def test_overflowed_states_are_refused_naming_configuration_layer_and_dtype():
    labels = [{"weights": "pretrained", "variant": "SAN", "mask": "causal", "window": None, "norm": "none"},
              {"weights": "pretrained", "variant": "SAN", "mask": "causal", "window": None, "norm": "rms"}]
    norm = torch.ones(31, 2, 4, dtype=torch.float64)  # [layer + 1, config, sample]
    rank = torch.full((31, 2, 4), 128)  # integer metrics are always finite
    sweep.check_finite({"norm": norm, "numerical_rank": rank}, labels, "float32")  # finite: nothing to say
    norm[18:, 0, 2] = float("inf")
    norm[25:, 0, :] = float("nan")
    with pytest.raises(ValueError, match=r"^weights pretrained, variant SAN, mask causal, norm none: norm is "
                                         r"not finite from layer 18 on \(the hidden states left float32's "
                                         r"range: they overflowed, or underflowed\); run it with -p dtype "
                                         r"float64$"):
        sweep.check_finite({"norm": norm, "numerical_rank": rank}, labels, "float32")
    with pytest.raises(ValueError, match=r"left float64's range: they overflowed, or underflowed\)$"):
        sweep.check_finite({"norm": norm}, labels, "float64")


# ---------------------------------------------------------------- stale results, the memory check, the store


def _tiny_bert(folder: Path) -> str:
    """A seeded 2-layer BERT of width 32 with MiniLM's tokenizer (so it encodes the text), saved to
    ``folder``."""
    import transformers

    from rankcollapse.hf.load import load_tokenizer

    tokenizer = load_tokenizer("pkg:minilm")
    config = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        transformers.AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _said(capsys) -> list[str]:
    """The lines on stderr since the last look, less Hugging Face's progress bars of loading a model."""
    return [line for line in capsys.readouterr().err.splitlines()
            if line and not line.startswith("Loading weights")]


def _quiet_store(monkeypatch, root: Path) -> None:
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(root))
    monkeypatch.setenv(ranks.PROGRESS_ENV, "0")


@pytest.mark.slow
def test_a_local_model_whose_files_changed_is_computed_again_never_loaded(tmp_path, monkeypatch, capsys):
    """The result key holds only the folder's path: rewritten weights (halved), an edited tokenizer file, or a
    result that recorded no hash of the folder's files are computed again with one line saying why."""
    from safetensors.torch import load_file, save_file

    spec = _tiny_bert(tmp_path / "model")
    _quiet_store(monkeypatch, tmp_path / "results")
    calls, real = [], sweep.compute
    monkeypatch.setattr(sweep, "compute", lambda *a, **k: calls.append(1) or real(*a, **k))
    argv = ["compute", "fig2", *_pairs({**TINY, "model": spec})]
    parts = len(registry.configure("fig2", {**TINY, "model": spec}))  # Fig. 2's main sweep and its controls
    assert cli.main(argv) == 0 and len(calls) == parts
    before, first, csv = _stored(tmp_path / "results", "fig2")
    assert len(first["model_files_sha256"]) == len(first["tokenizer_sha256"]) == 64
    capsys.readouterr()

    weights = tmp_path / "model" / "model.safetensors"
    save_file({k: v / 2 for k, v in load_file(weights).items()}, weights, metadata={"format": "pt"})
    assert cli.main(argv) == 0 and len(calls) == 2 * parts
    after, second, _ = _stored(tmp_path / "results", "fig2")
    assert [line for line in _said(capsys) if str(csv) in line] == [(
        f"fig2: not using the stored result {csv}: the folder's config or weight files changed since it was "
        f"computed (model_files_sha256 {first['model_files_sha256'][:16]}... -> "
        f"{second['model_files_sha256'][:16]}...); computing it again")]
    assert second["weight_sha256"] != first["weight_sha256"] and not after.equals(before)
    assert cli.main(argv) == 0 and len(calls) == 2 * parts and _said(capsys) == []  # unchanged: loaded

    config = tmp_path / "model" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "model_max_length": 64}))
    assert cli.main(argv) == 0 and len(calls) == 3 * parts
    assert "the tokenizer files changed since it was computed (tokenizer_sha256 " in capsys.readouterr().err

    record = json.loads(_record(csv).read_text())
    del record["model_files_sha256"]  # as a result stored before the folder's files were hashed
    _record(csv).write_text(json.dumps(record))
    assert cli.main(argv) == 0 and len(calls) == 3 * parts + 1  # the main part's record only
    assert f"it records no model_files_sha256 of the folder {spec}" in capsys.readouterr().err


def test_the_memory_check_refuses_from_the_shapes_before_building_layers_or_drawing_samples(
        tmp_path, monkeypatch, capsys):
    """4096 layers x 5000 samples needs ~69 GiB: refused from the shapes alone, so the refusal allocates
    nothing (it used to build 4096 float64 layers, ~20 GB, before saying so)."""
    from rankcollapse.hf import extract

    def never(*args, **kwargs):
        raise AssertionError("nothing may be built or drawn before the memory check")

    for owner, name in ((sweep, "random_layers"), (extract, "extract_layers"), (sweep, "text_samples")):
        monkeypatch.setattr(owner, name, never)
    monkeypatch.setattr(plan, "available_memory", lambda device: 2**30)  # tight, whatever the machine
    _quiet_store(monkeypatch, tmp_path)
    argv = ["compute", "fig2", "-p", "n_layers", "4096", "-p", "n_samples", "5000", "-p", "n_tokens", "16"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "rankcollapse compute: error: fig2 needs about 69.22 GiB per process but 1.00 GiB are available on "
        "cpu; use fewer samples or layers, or a larger machine")
    assert not tmp_path.joinpath("fig2").exists() and not tmp_path.joinpath("partial").exists()


def test_a_read_only_store_is_refused_before_the_first_unit(tmp_path, monkeypatch, capsys):
    """The store's folder, its page folder, or a folder that cannot take a file (a read-only mount): one
    sentence before anything is computed, not an OSError after the first unit."""
    def never(*args, **kwargs):
        raise AssertionError("no unit may be computed in a store that cannot be written")

    monkeypatch.setattr(sweep._Work, "compute", never)
    root = tmp_path / "results"
    _quiet_store(monkeypatch, root)
    argv = ["compute", "fig2", *_pairs(TINY)]
    words = (", so nothing was computed; make it writable, or set RANKCOLLAPSE_RESULTS_DIR to a writable "
             "folder")
    (root / "fig2").mkdir(parents=True)
    try:
        for folder in (root, root / "fig2"):
            folder.chmod(0o555)
            assert cli.main(argv) == 2
            assert capsys.readouterr().err.splitlines()[-1] == (
                f"rankcollapse compute: error: the results store cannot be written: {folder} is read-only "
                f"(mode 555){words}")
            folder.chmod(0o755)
    finally:
        for folder in (root, root / "fig2"):
            folder.chmod(0o755)
    import tempfile

    def read_only_mount(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only_mount)
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"rankcollapse compute: error: the results store cannot be written: {root / 'fig2'} is not writable "
        f"(Read-only file system){words}")


@pytest.mark.slow
def test_a_corrupt_checkpoint_is_named_moved_aside_and_its_unit_computed_again(tmp_path, monkeypatch, capsys):
    """A truncated checkpoint (it used to raise PytorchStreamReader's error on every re-run; torch's own words
    depend on where the file was cut) and one whose metrics were changed after writing: one warning line each,
    moved to <name>.corrupt, recomputed."""
    monkeypatch.setenv(sweep.BLOCK_ENV, "2")
    monkeypatch.setenv(ranks.PROGRESS_ENV, "0")
    config = registry.configure("fig2", TINY)["main"].config
    partial = checkpoints.partial_folder(ResultStore(tmp_path), "fig2", stored_parameters(config))
    whole, _ = sweep.compute(config, label="fig2", partial=partial)  # 2 blocks x 2 weight sources, all kept
    truncated, edited = partial / "pretrained-san-2-4.pt", partial / "initialized-san-0-2.pt"
    truncated.write_bytes(truncated.read_bytes()[:truncated.stat().st_size // 2])
    record = torch.load(edited, weights_only=True)
    record["metrics"]["mu"][1] *= 2
    torch.save(record, edited)
    capsys.readouterr()
    again, extra = sweep.compute(config, label="fig2", partial=partial)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and extra["units_resumed"] == 2
    assert re.fullmatch(rf"warning: checkpoint {re.escape(str(edited))} is corrupt \(its metrics are not "
                        rf"those it was written with\); moved it to initialized-san-0-2\.pt\.corrupt and "
                        rf"computing its unit again", lines[0])
    assert re.fullmatch(rf"warning: checkpoint {re.escape(str(truncated))} is corrupt \(.+\); moved it to "
                        rf"pretrained-san-2-4\.pt\.corrupt and "
                        rf"computing its unit again", lines[1])
    pd.testing.assert_frame_equal(again, whole, check_exact=True)
    for path in (truncated, edited):
        assert path.with_name(path.name + ".corrupt").is_file() and torch.load(path, weights_only=True)
    assert sweep.compute(config, label="fig2", partial=partial)[1]["units_resumed"] == 4  # all good again
    assert capsys.readouterr().err == ""


def test_the_measured_throughput_is_scaled_to_the_runs_sequence_length(tmp_path, monkeypatch):
    """The benchmark measures at 128 tokens; a 32-token run does about a quarter of the work per sample.layer
    (the plan predicted 44 s for a run that took 6 s when it ignored the token count)."""
    from rankcollapse import engine

    table = {"cpu-2|float64|384": {"units_per_s": 100.0, "n_tokens": 128, "measured_utc": "then"}}
    (tmp_path / "throughput.json").write_text(json.dumps(table))
    monkeypatch.setattr(plan, "THROUGHPUT_FILE", tmp_path / "throughput.json")
    monkeypatch.setattr(plan, "device_kind", lambda device: "cpu-2")
    work = sweep._Work(ExperimentConfig(n_tokens=32, dtype="float64"))  # MiniLM: width 384
    rate, source = plan.measured_throughput(work, torch.device("cpu"), 4, 2**30)
    expected = 100.0 * engine.attention_flop(384, 128) / engine.attention_flop(384, 32)
    assert rate == pytest.approx(expected) and 3.5 < rate / 100.0 < 4.5
    assert "scaled to 32 tokens" in source


@pytest.mark.slow
def test_units_of_other_computing_code_are_named_never_used_and_removed_once_stored(tmp_path, monkeypatch,
                                                                                    capsys):
    """A run's finished units wait beside its store (three of its four units left by a killed run) and are
    listed with their progress; units left by other computing code are named with the commit to resume them
    in, never used, and removed with the run's own once the result is stored."""
    monkeypatch.setenv(sweep.BLOCK_ENV, "2")
    monkeypatch.setenv(ranks.PROGRESS_ENV, "0")
    store = ResultStore(tmp_path / "results")
    config = registry.configure("fig2", TINY)["main"].config
    partial = checkpoints.partial_folder(store, "fig2", stored_parameters(config))
    assert partial.parent.parent == store.root / "partial"  # beside the store's page folders
    sweep.compute(config, label="fig2", partial=partial, run={"page": "fig2", "git_commit": "1234567890ab"})
    (partial / "pretrained-san-2-4.pt").unlink()  # killed before its last unit
    other = partial.with_name(partial.name.rpartition("-")[0] + "-0123456789ab")  # older code's units
    other.mkdir()
    (other / "initialized-san-0-2.pt").write_bytes(b"x")
    (other / checkpoints.RUN_RECORD).write_text(json.dumps({"git_commit": "feedface0000"}))
    runs = {r["folder"]: r for r in checkpoints.partial_runs(store)}
    # 2 blocks x 2
    assert (runs[partial]["done"], runs[partial]["units"], runs[partial]["resumable"]) == (3, 4, True)
    assert runs[partial]["commit"] == "1234567890ab" and runs[partial]["parameters"]["n_samples"] == 4
    assert (runs[other]["resumable"], runs[other]["commit"]) == (False, "feedface0000")
    assert store.pages() == []  # partial/ is no page

    capsys.readouterr()
    result = sweep.run_experiment("fig2", config, store)
    assert result.provenance["units_resumed"] == 3
    assert "check out feedface0000 to resume them" in capsys.readouterr().err
    assert not partial.exists() and not other.exists()  # other code's units: superseded once stored
    assert not (store.root / "partial").exists() and store.pages() == ["fig2"]
