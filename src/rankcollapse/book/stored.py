"""The stored runs a page shows: every part of a page at the largest scale at which all of them are stored
(:func:`largest_stored`), for a page whose ``show_largest_stored`` is true and for a page module that reads
another page's sweeps at their largest stored scale (the reviewers' page).

Used by: :mod:`rankcollapse.book.report` (``start_page``), :mod:`rankcollapse.book.pages.reviewers`,
:mod:`rankcollapse.book.origins` and :mod:`rankcollapse.book.cli` (through ``report.largest_stored``).
"""

from __future__ import annotations

from collections.abc import Mapping

from rankcollapse.book.shown import SCALE_PARAMETERS
from rankcollapse.experiments.config import check_table
from rankcollapse.experiments.store import ResultStore, StoredResult


def largest_stored(results: Mapping[str, StoredResult], store: ResultStore | None = None) -> dict[str, StoredResult]:
    """Every part of a page at the largest scale (samples x tokens, then model depth) at which all of them
    are stored, or ``results`` themselves.

    The scale is that of a stored run of the same experiment as the part ``main`` where a page has one, else
    the part with the most samples (equal in every parameter but SCALE_PARAMETERS). Every part moves to it; a
    part computed on another sample count than that part (a small-sample comparison, a page's controls) keeps
    its own sample count, except on a page whose registry entry ``grows_own_counts``: there those parts move
    to the largest sample count stored for all of them at that scale. So a page never mixes scales; a part
    stored at that scale only on another device is taken from there (a deep part from a GPU's device bundle
    beside a shallow one from a CPU).
    """
    # imported here: the registry imports the page modules, and the reviewers' page module imports this one
    from rankcollapse.book import registry

    store = store or ResultStore()
    anchor = (results["main"] if "main" in results else
              max(results.values(), key=lambda r: r.provenance["parameters"]["n_samples"])).provenance
    own = anchor["parameters"]
    grows = registry.page(anchor["page"]).grows_own_counts
    entries = store.entries(anchor["page"])

    def without(p: dict, names: tuple[str, ...]) -> dict:
        return {k: v for k, v in p.items() if k not in names}

    def size(record: dict) -> tuple[int, int]:
        return record["parameters"]["n_samples"] * record["parameters"]["n_tokens"], record.get("model_layers", 0)

    def at_scale(part: dict, scale: dict, count: int | None = None) -> dict:
        keep = {} if part["n_samples"] == own["n_samples"] else {"n_samples": count or part["n_samples"]}
        return {**part, **{k: v for k, v in scale.items() if k in part}, **keep}

    def counts(scale: dict) -> list[int | None]:
        """The sample counts to try for the parts on their own count, largest first (None: their own)."""
        if not grows:
            return [None]
        wanted = [without(at_scale(r.provenance["parameters"], scale), ("n_samples", "device"))
                  for r in results.values() if r.provenance["parameters"]["n_samples"] != own["n_samples"]]
        main = without(at_scale(own, scale), ("n_samples", "device"))  # never a part that is the main sweep
        stored = {r["parameters"]["n_samples"] for r in entries
                  if (p := without(r["parameters"], ("n_samples", "device"))) in wanted and p != main}
        return [*sorted(stored, reverse=True), None]

    larger = sorted((r for r in entries if without(r["parameters"], SCALE_PARAMETERS) == without(own, SCALE_PARAMETERS)
                     and (size(r) > size(anchor) or grows and size(r) == size(anchor))), key=size, reverse=True)
    for record in larger:
        scale = {k: record["parameters"][k] for k in SCALE_PARAMETERS if k in record["parameters"]}
        tried = counts(scale)
        if size(record) == size(anchor):  # the page's own scale: only a larger count than its parts' own
            tried = [c for c in tried[:-1] if c > max(r.provenance["parameters"]["n_samples"] for r in results.values()
                                                      if r.provenance["parameters"]["n_samples"] != own["n_samples"])]
        for count in tried:
            moved = {part: _on_any_device(store, r.provenance["page"], at_scale(r.provenance["parameters"], scale, count))
                     for part, r in results.items()}
            if all(r is not None for r in moved.values()):
                return moved
    return dict(results)


def _on_any_device(store: ResultStore, page: str, parameters: dict) -> StoredResult | None:
    """The stored result of these parameters, else of them on another device (cpu, cuda), else None."""
    for device in dict.fromkeys([parameters.get("device"), "cpu", "cuda"]):
        found = store.load(page, {**parameters, "device": device} if "device" in parameters else parameters,
                           check_table)
        if found is not None:
            return found
    return None
