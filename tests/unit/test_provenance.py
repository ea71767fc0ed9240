"""One provenance record for figures and results; the book root; the atomic writer; the results store and
the command line need no plotting stack."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from rankcollapse.book.plotting import common as plotting
from rankcollapse.experiments import provenance
from rankcollapse.experiments.store import ResultStore

RECORD_FIELDS = {"parameters", "rankcollapse_version", "torch_version", "python_version", "git_commit",
                 "created_utc", "hardware"}


def test_book_root_is_found_from_below_and_required(book, tmp_path_factory, monkeypatch):
    assert provenance.book_root() == book
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    with pytest.raises(provenance.NoBookError, match=r"no book \(_toc.yml\) at or above .*: run from inside "
                       r"the book, or set RANKCOLLAPSE_RESULTS_DIR to a results store"):
        provenance.book_root()
    assert issubclass(provenance.NoBookError, FileNotFoundError)  # what callers outside the book catch


def test_figures_and_results_carry_the_same_record(book):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    ax.set_xlabel("layer")  # a figure needs text: its export records the smallest font (legibility)
    figure = json.loads(plotting.export_figure(fig, "fig-test-line", {"n": 2})["json"].read_text())
    plt.close(fig)
    result = ResultStore(book / "results").load_or_compute(
        "fig2", {"n": 2},
        lambda: (pd.DataFrame({"layer": [0], "mean": [1.0]}), {"dtype": "float64"})).provenance
    assert set(figure) == RECORD_FIELDS | {"legibility", "data"} and RECORD_FIELDS <= set(result)
    assert figure["data"] == []  # the stored results a figure draws: none given here
    assert figure["parameters"] == result["parameters"] == {"n": 2}
    for field in RECORD_FIELDS - {"parameters", "created_utc"}:
        assert figure[field] == result[field], field
    assert figure["git_commit"] == "unknown"  # the temporary book is not a git repository


def test_git_commit_outside_git_is_unknown(tmp_path):
    assert provenance.git_commit(tmp_path) == "unknown"


def test_atomic_write_leaves_no_temporaries_and_no_half_file(tmp_path):
    target = tmp_path / "sub" / "a.json"
    provenance.atomic_write(target, lambda tmp: open(tmp, "w").write("{}"))
    assert target.read_text() == "{}" and oct(target.stat().st_mode & 0o777) == "0o644"

    def broken(tmp):
        open(tmp, "w").write("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        provenance.atomic_write(target, broken)
    assert target.read_text() == "{}" and [p.name for p in target.parent.iterdir()] == ["a.json"]


@pytest.mark.parametrize("module", ["rankcollapse.experiments.store", "rankcollapse.book.cli",
                                    "rankcollapse.experiments.provenance"])
def test_store_and_command_line_do_not_import_the_plotting_stack(module):
    code = (f"import sys, {module}; print(sorted(m for m in "
            "('matplotlib', 'seaborn', 'rankcollapse.book.plotting.common') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_source_hash_follows_the_package_code_only(tmp_path):
    """Checkpoints survive commits that change no code: the hash reads the package's .py files only."""
    package = tmp_path / "rankcollapse"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    first = provenance.package_sha256(package)
    (tmp_path / "page.md").write_text("prose")
    (package / "notes.txt").write_text("not code")
    assert provenance.package_sha256(package) == first
    (package / "a.py").write_text("x = 2\n")
    assert provenance.package_sha256(package) != first
    assert len(first) == 64


def test_the_units_hash_follows_the_computing_code_not_the_pages_verdicts_or_theory(tmp_path, monkeypatch):
    """A copy of the package: an edit under book/ (a page module), verdicts/ or theory/ keeps the checkpoints'
    code hash (so it orphans no unit), while the whole source's hash changes; an edit under engine/ or
    experiments/ changes it."""
    import shutil

    package = tmp_path / "rankcollapse"
    shutil.copytree(Path(provenance.__file__).resolve().parents[1], package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(provenance, "__file__", str(package / "experiments" / "provenance.py"))
    compute, source = provenance.compute_sha256.__wrapped__, provenance.source_sha256.__wrapped__
    first, whole = compute(), source()
    assert first == provenance.compute_sha256()  # a faithful copy of the code this process loaded
    for name in ("book/pages/fig2.py", "verdicts/rules.py", "theory/dynamics.py"):
        with (package / name).open("a") as handle:
            handle.write("# edited\n")
        assert compute() == first and source() != whole, name
        whole = source()
    for name in ("engine/run.py", "experiments/sweep.py"):
        with (package / name).open("a") as handle:
            handle.write("# edited\n")
        assert compute() != first, name
        first = compute()


def test_the_source_hash_names_the_code_loaded_not_the_files_edited_since(tmp_path, monkeypatch):
    """A long run records the hash of the code it runs: later calls in the process return the first one."""
    loaded = provenance.source_sha256()
    assert loaded == provenance.package_sha256(Path(provenance.__file__).resolve().parents[1])
    (tmp_path / "a.py").write_text("edited = True\n")
    # as if every file changed
    monkeypatch.setattr(provenance, "__file__", str(tmp_path / "experiments" / "provenance.py"))
    assert provenance.source_sha256() == loaded


def _full_disk(tmp):
    with open(tmp, "w") as handle:
        handle.write("half")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_names_the_file_and_leaves_nothing_half_written(tmp_path, monkeypatch):
    """One sentence naming the file (a ValueError too, so the command line prints it as one line), the
    temporary file removed, the old file untouched; a result whose record cannot be written leaves no
    table."""
    target = tmp_path / "a.csv"
    target.write_text("old")
    with pytest.raises(provenance.WriteError) as err:
        provenance.atomic_write(target, _full_disk)
    assert str(err.value) == (f"could not write {target} (No space left on device); "
                              "nothing was left half-written")
    assert isinstance(err.value, ValueError) and isinstance(err.value, OSError)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.csv"]

    store = ResultStore(tmp_path / "results")
    # the JSON, written after the CSV
    monkeypatch.setattr(Path, "write_text", lambda self, text: _full_disk(self))
    with pytest.raises(provenance.WriteError, match=r"could not write .*\.json \(No space left on device\)"):
        store.save("fig2", {"n": 1}, pd.DataFrame({"layer": [0], "mean": [1.0]}), {})
    assert list((tmp_path / "results" / "fig2").iterdir()) == [] and store.load("fig2", {"n": 1}) is None


def test_a_checkpoint_on_a_full_disk_names_the_file(tmp_path, monkeypatch):
    """torch.save reports a full disk as ``RuntimeError: ... unexpected pos``: named as the write it is."""
    import torch

    from rankcollapse.experiments.checkpoints import Checkpoints, Unit

    def full(record, path):
        Path(path).write_bytes(b"PK half")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")

    monkeypatch.setattr(torch, "save", full)
    unit = Unit("initialized", False, 0, 2)
    with pytest.raises(provenance.WriteError) as err:
        Checkpoints(tmp_path, {"n": 1}).save(unit, {"mu": torch.zeros(3, 1, 2)}, 1.0)
    assert str(err.value) == (f"could not write {tmp_path / unit.name}.pt (torch.save failed: "
                              f"[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598; "
                              f"is the disk full?); nothing was left half-written")
    assert list(tmp_path.iterdir()) == []
