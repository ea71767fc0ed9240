"""The claims a page showed, recorded when it was built, so that the verdicts page and the intro list every
page's claims without computing them a second time (the theory pages and the reviewers' page compute for
minutes; Fig. 2's controls take half a minute of bootstrap).

:func:`rankcollapse.book.report.present` records, after showing a page that states claims, its claims tables
under ``<book root>/_build/claims/<page>-<key>.json``. The key (:func:`claims_key`) is a hash of the page,
its parameters, the helper package's source (:func:`rankcollapse.experiments.provenance.source_sha256`) and
the results store's records (every stored result's hashes, :func:`store_state`): a record is read only for
exactly the page, parameters, code and stored results that made it, so it is what the page shows, or it is
not read (:func:`recorded_claims` gives None and the claims are computed again). The book's pages are read
in the order of their paths (book/experiments/... and book/theory/... before book/intro and book/verdicts),
so in a build that executes every page the records are there when the verdicts page looks for them.

Used by: :func:`rankcollapse.book.report.present`, :func:`rankcollapse.book.registry.claims_at_defaults`;
tests/unit/test_verdicts_page.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from rankcollapse.experiments.provenance import NoBookError, atomic_write, book_root, source_sha256
from rankcollapse.experiments.store import ResultStore, canonical_parameters
from rankcollapse.verdicts.claims import Cell, Claim

RECORDS = Path("_build") / "claims"  # under the book root


def store_state(store: ResultStore | None = None) -> str:
    """A hash of the results store's records (each stored result's parameters, provenance and table hash):
    it changes when a result is added, removed or replaced."""
    root = (store or ResultStore()).root
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.json")) if root.is_dir() else []:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def claims_key(name: str, parameters: Mapping[str, object], store: ResultStore | None = None) -> str:
    """The key of page ``name``'s claims at ``parameters`` with this code and this results store."""
    text = json.dumps({"page": name, "parameters": canonical_parameters(dict(parameters)),
                       "source": source_sha256(), "store": store_state(store)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _path(name: str, key: str, root: Path | None) -> Path:
    return (root or book_root()) / RECORDS / f"{name}-{key}.json"


def record_claims(name: str, parameters: Mapping[str, object], claims: Mapping[str, list[Claim]],
                  root: Path | None = None) -> Path | None:
    """Record the claims page ``name`` showed at ``parameters``; the record's path, or None (no claims, or no
    book here: a page run outside one)."""
    if not claims:
        return None
    try:
        path = _path(name, claims_key(name, parameters), root)
    except NoBookError:
        return None
    record = {"page": name, "claims": {prefix: [dataclasses.asdict(c) for c in rows]
                                       for prefix, rows in claims.items()}}
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(record, ensure_ascii=False, indent=1)))
    return path


def recorded_claims(name: str, parameters: Mapping[str, object],
                    root: Path | None = None) -> dict[str, list[Claim]] | None:
    """The claims recorded for page ``name`` at ``parameters`` with this code and results store, or None
    when there is no such record (or it cannot be read as claims)."""
    path = _path(name, claims_key(name, parameters), root)
    try:
        record = json.loads(path.read_text())
        return {prefix: [Claim(**{**row, "cells": tuple(Cell(**cell) for cell in row["cells"])})
                         for row in rows]
                for prefix, rows in record["claims"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None
