"""The ``rankcollapse run`` line that recomputes a stored result, in the page's own parameters.

A stored result holds the parameters of one sweep (:func:`rankcollapse.experiments.config.stored_parameters`),
not those of the page that computed it: the mask-design page has no ``window`` (each zoo mask fixes its own),
the RMSNorm page a list ``windows``, the skip-connection page an ``n_layers_deep``. :func:`page_command` finds
page parameters whose configuration (:func:`rankcollapse.book.registry.configure`) stores exactly that result
and writes them as ``-p NAME VALUE`` (the values that differ from the page's parameters cell, and the scale
always). The store, which may not import the book, asks for it through
:func:`rankcollapse.experiments.store.register_command_builder` (:func:`register`), so its message for a
damaged result names a command that runs.

Used by: :mod:`rankcollapse.book.cli`, :mod:`rankcollapse.book.report`, tests/unit/test_cli_errors.py.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
from collections.abc import Iterator

from rankcollapse.experiments import store as rc_store
from rankcollapse.experiments.config import stored_parameters

SCALE = ("n_layers", "n_samples", "n_tokens")  # always written out: the defaults differ between pages
_DISPLAY_ONLY = ("show_largest_stored",)  # never part of a stored result


def value_text(value: object) -> str:
    """A value as ``-p`` takes it back (:func:`rankcollapse.book.cli.parse_value`): a string as itself when it
    does not read as a literal, everything else as its ``repr``.

    >>> value_text("pkg:mpnet"), value_text("12"), value_text([1, 2]), value_text(None)
    ('pkg:mpnet', "'12'", '[1, 2]', 'None')
    """
    if isinstance(value, str):
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return value
    return repr(value)


@functools.lru_cache(maxsize=None)
def _defaults(page: str) -> dict[str, object]:
    from rankcollapse.book import registry
    from rankcollapse.book.runner import page_parameters
    from rankcollapse.experiments.provenance import book_root

    return page_parameters(registry.page(page).path(book_root()))


def _stores(page: str, parameters: dict) -> set[tuple[str, str]]:
    """``{(store page, key)}`` of every sweep page ``page`` computes for ``parameters``; empty when
    refused."""
    return set(_stores_of(page, json.dumps(parameters, sort_keys=True)))


@functools.lru_cache(maxsize=4096)
def _stores_of(page: str, parameters: str) -> frozenset[tuple[str, str]]:
    from rankcollapse.book import registry

    try:
        runs = registry.stored_runs(page, json.loads(parameters))
        return frozenset((run.page or page, rc_store.result_key(run.page or page,
                                                                stored_parameters(run.config)))
                         for run in runs.values())
    except (ValueError, TypeError, AttributeError):
        return frozenset()


def _candidates(defaults: dict, stored: dict) -> Iterator[dict]:
    """Page parameters to try, most likely first: the stored value of every parameter the page shares with the
    result; then each of those back at its default (a value a part fixes, e.g. a window); then a page
    parameter the result does not name set to one of the result's values (``n_layers_deep`` from ``n_layers``,
    ``windows`` from ``window``), with that value's own name at its default or not."""
    shared = {k: stored[k] for k in defaults if k in stored and k not in _DISPLAY_ONLY}
    yield shared
    for name in shared:
        yield {k: v for k, v in shared.items() if k != name}
    for name, default in defaults.items():
        if name in stored or name in _DISPLAY_ONLY:
            continue
        for source, value in stored.items():
            value = [value] if isinstance(default, list) and not isinstance(value, list) else value
            if isinstance(value, bool) != isinstance(default, bool) or not isinstance(value, type(default)):
                continue
            yield {**shared, name: value}
            if source in shared:
                yield {**{k: v for k, v in shared.items() if k != source}, name: value}


def _full(defaults: dict, candidate: dict) -> dict:
    """A candidate over the page's defaults, showing exactly its own parameters (not the largest stored)."""
    full = {**defaults, **candidate}
    if "show_largest_stored" in full:
        full["show_largest_stored"] = False
    return full


def _recomputing(name: str, defaults: dict, stored: dict, wanted: tuple[str, str]) -> Iterator[dict]:
    """The candidates (:func:`_candidates`) under which page ``name`` stores the result ``wanted``, lazily."""
    return (c for c in _candidates(defaults, stored) if wanted in _stores(name, _full(defaults, c)))


_CONTEXT = ("model", "n_tokens", "n_layers", "dtype", "overlap", "seed", "device")  # shared by a page's parts


def _siblings(name: str, defaults: dict, store_page: str, stored: dict,
              wanted: tuple[str, str]) -> list[dict]:
    """For each other result stored under ``store_page`` in the same context (model, tokens, layers, dtype,
    ...): the page parameters (of ``name``) that recompute it, read from its own record's parameters -- where
    the parameters a damaged part leaves open (a control's main sample count, the weight seeds) are found."""
    store = rc_store.ResultStore()
    found = []
    for key in store.keys(store_page):
        try:
            record = json.loads(store.files(store_page, key)[1].read_text())
            other = record["parameters"]
            same = all(other.get(k) == stored.get(k) for k in _CONTEXT if k in stored or k in other)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
        if same and (store_page, key) != wanted:
            found += list(itertools.islice(_recomputing(name, defaults, other, (store_page, key)), 1))
    return found


def _missing(stores: set[tuple[str, str]]) -> int:
    """How many of ``stores`` the store lacks: what following a command would compute besides its result."""
    store = rc_store.ResultStore()
    return sum(not store.files(page, key)[1].is_file() for page, key in stores)


def page_parameters_of(store_page: str, stored: dict) -> tuple[str, dict] | None:
    """``(page, the reader's parameters)`` that recompute the result stored under ``store_page`` with the
    parameters ``stored``, or None when no page of the registry computes it. Of the candidates that do
    (also each combined with the parameters that recompute another stored result of that page, which fill in
    what the result leaves open), the one under which the page computes the fewest results the store lacks
    besides it, then the one with the fewest values off the page's defaults. A page that stores its own
    parameters (the data page's counts) recomputes them from those."""
    from rankcollapse.book import registry

    wanted = (store_page, rc_store.result_key(store_page, stored))
    names = [store_page] if store_page in registry.PAGES else []
    names += [n for n in registry.EXPERIMENT_PAGES if n not in names]
    for name in names:
        defaults = _defaults(name)
        found = list(_recomputing(name, defaults, stored, wanted))
        if found:
            siblings = _siblings(name, defaults, store_page, stored, wanted)
            combined = [{**other, **own} for own in found for other in siblings]
            scored = []
            for candidate in found + combined:
                full = _full(defaults, candidate)
                stores = _stores(name, full)
                if wanted in stores:
                    off = {k: v for k, v in full.items() if k in candidate and v != defaults[k]}
                    scored.append((_missing(stores - {wanted}), len(off), off))
            _, _, fewest = min(scored, key=lambda s: s[:2])
            full = _full(defaults, fewest)
            return name, {**{k: full[k] for k in SCALE if k in defaults}, **fewest}
        if name == store_page and name not in registry.EXPERIMENT_PAGES and set(stored) <= set(defaults):
            try:
                registry.configure(name, {**defaults, **stored})
            except (ValueError, TypeError):
                continue
            return name, {k: v for k, v in stored.items() if k in SCALE or v != defaults[k]}
    return None


def page_command(store_page: str, stored: dict) -> str | None:
    """The ``rankcollapse run`` line that recomputes a stored result, or None (the store's own line then).

    Its ``-p`` names are parameters of the page it names, in the order of the page's parameters cell with
    the scale last; reading them back gives exactly ``stored``.
    """
    found = page_parameters_of(store_page, stored)
    if found is None:
        return None
    page, parameters = found
    order = [k for k in _defaults(page) if k not in SCALE] + list(SCALE)
    pairs = [(k, value_text(parameters[k])) for k in order if k in parameters]
    return rc_store.run_command(page, pairs)


def register() -> None:
    """Have the results store build its recompute commands with :func:`page_command` (idempotent)."""
    rc_store.register_command_builder(page_command)
