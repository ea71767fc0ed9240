"""Upgrading a results store written by an earlier version of the package, in place
(:func:`upgrade_store`, run by ``results/upgrade_store.py``): tables stored as plain ``<key>.csv`` are
compressed to ``<key>.csv.gz`` (:mod:`rankcollapse.experiments.store`), records stored before the store
recorded its tables' SHA-256 and row count get them, and tables written with more digits than the store keeps
today are rewritten at :data:`rankcollapse.experiments.store.TABLE_DIGITS` (:func:`compact_tables`), and
per-sample values stored in an earlier encoding are rewritten in today's (:func:`compact_samples`).

Used by: ``results/upgrade_store.py``, tests/unit/test_results.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rankcollapse.experiments import sample_values
from rankcollapse.experiments.provenance import atomic_write
from rankcollapse.experiments.store import (PLAIN_SUFFIX, DamagedResultError, ResultStore, StoredResult,
                                            TableCheck, pack_table, read_table, table_text)


def upgrade_store(store: ResultStore, check: TableCheck) -> list[Path]:
    """Bring every result of ``store`` written by an earlier version to today's files, in place; returns the
    tables written.

    An uncompressed ``<key>.csv`` becomes ``<key>.csv.gz`` (after its bytes are checked against the recorded
    SHA-256; the plain file is removed only once the new one verifies). A record without ``table_sha256`` and
    ``table_rows`` (results stored before the store recorded them) gets them, after its CSV is checked to
    parse and to pass ``check`` (an experiment table's columns and configurations; tables with hashes are
    checked by them alone, as the data page's table of another shape is). Results already upgraded are left
    alone (``results/upgrade_store.py``).
    """
    written = []
    for page in store.pages():
        for key in store.keys(page):
            table_path, json_path = store.files(page, key)
            plain = table_path.with_name(key + PLAIN_SUFFIX)
            if table_path.is_file() or not (plain.is_file() and json_path.is_file()):
                store.verify(page, key)  # raises unless already upgraded: a half result, a damaged file
                plain.unlink(missing_ok=True)  # left by an upgrade stopped after writing the verified table
                continue
            data = plain.read_bytes()
            table = read_table(data)
            record = json.loads(json_path.read_text())
            if table is None:
                raise DamagedResultError(f"stored result {plain} is damaged: its table does not parse")
            if "table_sha256" not in record:
                check(table, record["parameters"])
                record = {**record, "table_sha256": hashlib.sha256(data).hexdigest(),
                          "table_rows": len(table)}
                text = json.dumps(record, indent=1, sort_keys=True, default=str) + "\n"
                atomic_write(json_path, lambda tmp: Path(tmp).write_text(text))
            elif hashlib.sha256(data).hexdigest() != record["table_sha256"]:
                raise DamagedResultError(f"stored result {plain} is damaged: the table is not the one "
                                         f"recorded (SHA-256 differs); not compressing it")
            atomic_write(table_path, lambda tmp: Path(tmp).write_bytes(pack_table(data)))
            store.verify(page, key)
            plain.unlink()
            written.append(table_path)
    return written


def compact_tables(store: ResultStore) -> list[Path]:
    """Rewrite every verified table of ``store`` stored with more digits than
    :data:`rankcollapse.experiments.store.TABLE_DIGITS` (``%.17g`` before 2026-12-07) as the store writes
    tables today (:func:`rankcollapse.experiments.store.table_text`), in place, its record's SHA-256 anew
    (rows unchanged); a table already in today's form is left alone. Returns the tables written."""
    written = []
    for page in store.pages():
        for key in store.keys(page):
            result = store.verify(page, key)
            data = table_text(result.table)
            json_path = store.files(page, key)[1]
            record = json.loads(json_path.read_text())
            if hashlib.sha256(data).hexdigest() == record["table_sha256"]:
                continue
            record["table_sha256"] = hashlib.sha256(data).hexdigest()
            text = json.dumps(record, indent=1, sort_keys=True, default=str) + "\n"
            atomic_write(result.table_path, lambda tmp: Path(tmp).write_bytes(pack_table(data)))
            atomic_write(json_path, lambda tmp: Path(tmp).write_text(text))
            store.verify(page, key)
            written.append(result.table_path)
    return written


def record_article_groups(store: ResultStore) -> list[Path]:
    """Give every stored result whose per-sample values lack each sample's article (stored before
    :func:`rankcollapse.experiments.sample_values.article_groups` was recorded) its groups, in place: the
    samples are drawn again with the result's own parameters (the model's tokenizer is needed), checked
    against the recorded ``sample_ids_sha256``, and the values rewritten with their groups (its SHA-256
    recorded anew); a result whose draw cannot be checked is left alone. Returns the per-sample files
    written.
    """
    from rankcollapse.experiments.models import text_samples

    written = []
    for page in store.pages():
        for key in store.keys(page):
            result = store.verify(page, key)
            if result.samples is None or result.samples.groups is not None:
                continue
            p = result.provenance["parameters"]
            drawn = text_samples(p["model"], p["n_samples"], p["n_tokens"], p["seed"], p["overlap"])
            if hashlib.sha256(drawn.input_ids.numpy().tobytes()).hexdigest() != \
                    result.provenance.get("sample_ids_sha256"):
                continue  # another tokenizer or corpus than the one it was computed with
            groups = sample_values.article_groups(drawn.sample_ids)
            written.append(_rewrite_samples(store, result, sample_values.SampleValues(
                result.samples.labels, result.samples.values, groups)))
    return written


def compact_samples(store: ResultStore) -> list[Path]:
    """Rewrite every verified result's per-sample values stored in an earlier encoding (float32 logs or
    values) in today's (:data:`rankcollapse.experiments.sample_values.ENCODING`), in place, its record's
    SHA-256 anew; values already in today's form are left alone. Returns the per-sample files written."""
    written = []
    for page in store.pages():
        for key in store.keys(page):
            result = store.verify(page, key)
            path = result.table_path.with_name(key + sample_values.SAMPLES_SUFFIX)
            if result.samples is not None and \
                    sample_values.stored_encoding(path.read_bytes()) != sample_values.ENCODING:
                written.append(_rewrite_samples(store, result, result.samples))
    return written


def _rewrite_samples(store: ResultStore, result: StoredResult, samples: sample_values.SampleValues) -> Path:
    """Store ``samples`` as ``result``'s per-sample values, its record's ``samples_sha256`` anew, atomically
    file by file, and verify the result; returns the per-sample file."""
    packed = sample_values.to_bytes(samples)
    samples_path = result.table_path.with_name(result.key + sample_values.SAMPLES_SUFFIX)
    json_path = store.files(result.provenance["page"], result.key)[1]
    record = {**json.loads(json_path.read_text()), "samples_sha256": hashlib.sha256(packed).hexdigest()}
    atomic_write(samples_path, lambda tmp: Path(tmp).write_bytes(packed))
    text = json.dumps(record, indent=1, sort_keys=True, default=str) + "\n"
    atomic_write(json_path, lambda tmp: Path(tmp).write_text(text))
    store.verify(result.provenance["page"], result.key)
    return samples_path
