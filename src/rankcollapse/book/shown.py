"""What a page shows: the :class:`Shown` record a page module's ``show`` returns, the stored runs it shows
(at the largest scale stored for all of them, :func:`largest_stored`), and the words every computed page
shares around its results: their scale (:func:`scale_words`, :func:`scale_note`), the banner when a stored
larger run is shown (:func:`banner`), the stored results a figure draws (:func:`figure_data`), a theory
page's closing check (:func:`check_note`) and its checked statements as claims rows (:func:`checked_claim`).

Nothing here glues or displays: :func:`rankcollapse.book.report.present` glues a :class:`Shown` into its page.

Used by: every page module's ``show`` (:mod:`rankcollapse.book.pages`), :mod:`rankcollapse.book.report`,
:mod:`rankcollapse.book.plotting.results`, :mod:`rankcollapse.book.registry` (``PAPER_SCALE``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from matplotlib.figure import Figure

from rankcollapse.book.runner import CHECK_HEADING
from rankcollapse.experiments.table import check_table
from rankcollapse.experiments.store import (TABLE_SUFFIX, ResultStore, StoredResult, compute_seconds,
                                           run_command)
from rankcollapse.verdicts.claims import FAILS, HOLDS, Cell, Claim

# Parameters that change a run's scale but not what it computes: a stored run that differs only in these
# is the same experiment, larger or smaller.
SCALE_PARAMETERS = ("model", "n_samples", "n_tokens", "overlap", "device", "dtype")
# The authors' response: 3000 samples of 128 tokens on a BERT-base-sized model (ours: MPNet, 12 x 768), in
# the dtype the stored paper-scale runs were computed in (float32; a page whose runs are float64 says so)
PAPER_SCALE = {"model": "pkg:mpnet", "n_samples": 3000, "n_tokens": 128, "overlap": "sentence_starts",
               "dtype": "float32"}


@dataclass
class ShownFigure:
    """A figure a page shows: glued under ``stem`` with ``-`` made ``_``, exported as ``stem`` with the
    cite block's ``parameters`` and the stored results ``data`` it draws (:func:`figure_data`); with
    ``notes``, its computed notes (:func:`rankcollapse.book.plotting.overlap.notes_block`: a collapsed block
    for under the figure) are glued under the key + ``_notes``."""

    stem: str
    figure: Figure
    parameters: dict
    data: list[dict] | None = None
    notes: bool = False

    @property
    def key(self) -> str:
        """The glue key: the stem with ``-`` made ``_``."""
        return self.stem.replace("-", "_")


@dataclass
class Shown:
    """Everything a page shows beside its prose, by glue key: ``values`` (numbers and words, pasted with
    ``{glue:text}``), ``markdown`` (pasted with ``{glue:md}``), ``claims`` (per prefix, glued as the claims
    table ``<prefix>_claims`` and its headline ``<prefix>_headline``), ``tables`` (data frames or styled
    tables, pasted with ``{glue}``) and ``figures``."""

    values: dict[str, object] = field(default_factory=dict)
    markdown: dict[str, str] = field(default_factory=dict)
    claims: dict[str, list[Claim]] = field(default_factory=dict)
    tables: dict[str, object] = field(default_factory=dict)
    figures: list[ShownFigure] = field(default_factory=list)


def config_figures(figures: Mapping[str, Figure], config: object) -> list[ShownFigure]:
    """Figures of a page that computes in its own module, by stem, each citing the page's config (a dataclass)
    as its parameters."""
    return [ShownFigure(stem, figure, asdict(config)) for stem, figure in figures.items()]


def prefixed(prefix: str, values: Mapping[str, object]) -> dict[str, object]:
    """``values`` under the glue keys ``<prefix>_<name>``.

    >>> prefixed("fig4", {"scale": "16 samples"})
    {'fig4_scale': '16 samples'}
    """
    return {f"{prefix}_{name}": value for name, value in values.items()}


def figure_data(results: Iterable[StoredResult]) -> list[dict[str, str]]:
    """The stored results a figure draws, each with the commit that computed it (a figure's cite block and
    JSON record name these beside the commit that rendered the page)."""
    return [{"result": f"results/{r.provenance['page']}/{r.provenance['key']}{TABLE_SUFFIX}",
             "computed_at_commit": str(r.provenance.get("git_commit", "unknown"))} for r in results]


def combined_parameters(results: Iterable[StoredResult]) -> dict[str, object]:
    """One parameter set for a figure drawn from several stored runs (the mask-design zoo): the values they
    share, and for each parameter they differ in, the sorted distinct values over all of them."""
    records = [r.provenance["parameters"] for r in results]
    combined: dict[str, object] = {}
    for name in sorted({n for p in records for n in p}):
        values = [p.get(name) for p in records]
        if all(v == values[0] for v in values):
            combined[name] = values[0]
        else:
            flat = [x for v in values for x in (v if isinstance(v, list) else [v]) if x is not None]
            if any(isinstance(x, (list, dict)) for x in flat):  # e.g. mask_options' (keyword, value) pairs
                flat = [json.dumps(x) for x in flat]
            combined[name] = sorted(set(map(str, flat)) if any(isinstance(x, str) for x in flat)
                                    else set(flat))
    return combined


# ---------------------------------------------------------------- the stored runs a page shows


def anchor(results: Mapping[str, StoredResult]) -> StoredResult:
    """The part whose scale a page's parts move to (:func:`largest_stored`): ``main`` where a page has one,
    else the part with the most samples."""
    return (results["main"] if "main" in results else
            max(results.values(), key=lambda r: r.provenance["parameters"]["n_samples"]))


def largest_stored(results: Mapping[str, StoredResult], store: ResultStore | None = None,
                   grows: bool = False) -> dict[str, StoredResult]:
    """Every part of a page at the largest scale (samples x tokens, then model depth) at which all of them
    are stored, or ``results`` themselves.

    The scale is that of a stored run of the same experiment as the part ``main`` where a page has one (Fig. 2
    beside its controls), else the part with the most samples (equal in every parameter but SCALE_PARAMETERS).
    Every part moves to it; a part computed in another dtype than that part keeps its dtype, and a part not
    stored in the scale's dtype is taken in its own where it is stored so (the skip page's deep bias-free
    seeds: always float64, beside a float32 run, also when the page's own dtype is float64); a part computed
    on another sample count than that part (the sample-size page's small sample, Fig. 2's controls) keeps its
    own sample count, except with ``grows`` (the registry entry's ``grows_own_counts``, Fig. 2:
    :func:`rankcollapse.book.report.largest_stored` passes it): there those parts move to the largest sample
    count stored for all of them at that scale. So a page never mixes scales; a part stored at that scale
    only on another device is taken from there (the skip-connection page's deep, initialized part from a
    GPU's device bundle, its shallow part with the pretrained layers from a CPU)."""
    store = store or ResultStore()
    first = anchor(results).provenance
    own = first["parameters"]
    entries = store.entries(first["page"])

    def without(p: dict, names: tuple[str, ...]) -> dict:
        return {k: v for k, v in p.items() if k not in names}

    def size(record: dict) -> tuple[int, int]:
        return (record["parameters"]["n_samples"] * record["parameters"]["n_tokens"],
                record.get("model_layers", 0))

    def at_scale(part: dict, scale: dict, count: int | None = None) -> dict:
        keep = {} if part["n_samples"] == own["n_samples"] else {"n_samples": count or part["n_samples"]}
        if part.get("dtype") != own.get("dtype"):  # a part computed in its own dtype keeps it
            keep["dtype"] = part["dtype"]
        return {**part, **{k: v for k, v in scale.items() if k in part}, **keep}

    def counts(scale: dict) -> list[int | None]:
        """The sample counts to try for the parts on their own count, largest first (None: their own)."""
        if not grows:
            return [None]
        free = ("n_samples", "device", "dtype")
        wanted = [without(at_scale(r.provenance["parameters"], scale), free)
                  for r in results.values() if r.provenance["parameters"]["n_samples"] != own["n_samples"]]
        main = without(at_scale(own, scale), free)  # never a part that is the main sweep
        stored = {r["parameters"]["n_samples"] for r in entries
                  if (p := without(r["parameters"], free)) in wanted and p != main}
        return [*sorted(stored, reverse=True), None]

    larger = sorted((r for r in entries
                     if without(r["parameters"], SCALE_PARAMETERS) == without(own, SCALE_PARAMETERS)
                     and (size(r) > size(first) or grows and size(r) == size(first))), key=size, reverse=True)
    for record in larger:
        scale = {k: record["parameters"][k] for k in SCALE_PARAMETERS if k in record["parameters"]}
        tried = counts(scale)
        if size(record) == size(first):  # the page's own scale: only a larger count than its parts' own
            tried = [c for c in tried[:-1]
                     if c > max(r.provenance["parameters"]["n_samples"] for r in results.values()
                                if r.provenance["parameters"]["n_samples"] != own["n_samples"])]
        for count in tried:
            moved = {part: _in_any_dtype(store, r.provenance["page"],
                                         at_scale(r.provenance["parameters"], scale, count),
                                         r.provenance["parameters"].get("dtype"))
                     for part, r in results.items()}
            if all(r is not None for r in moved.values()):
                return moved
    return dict(results)


def _in_any_dtype(store: ResultStore, page: str, parameters: dict,
                  own_dtype: str | None) -> StoredResult | None:
    """The stored result of these parameters on any device (:func:`_on_any_device`), else of them in the
    part's ``own_dtype`` (a dtype its page fixes), else None."""
    found = _on_any_device(store, page, parameters)
    if found is None and own_dtype is not None and parameters.get("dtype") != own_dtype:
        found = _on_any_device(store, page, {**parameters, "dtype": own_dtype})
    return found


def _on_any_device(store: ResultStore, page: str, parameters: dict) -> StoredResult | None:
    """The stored result of these parameters, else of them on another device (cpu, cuda), else None."""
    for device in dict.fromkeys([parameters.get("device"), "cpu", "cuda"]):
        found = store.load(page, {**parameters, "device": device} if "device" in parameters else parameters,
                           check_table)
        if found is not None:
            return found
    return None



# ---------------------------------------------------------------- scale, banner, checks


def scale_words(result: StoredResult) -> str:
    """The run's scale in a few words, as a share of the response's 3000 samples x 128 tokens.

    E.g. ``"32 samples x 128 tokens (1 % of the response's 3000 samples), MPNet, CPU, float32"``.
    """
    p = result.provenance
    params = p["parameters"]
    paper = PAPER_SCALE
    share = 100 * params["n_samples"] / paper["n_samples"]
    n_tokens = params["n_tokens"]
    tokens = ("" if n_tokens == paper["n_tokens"] else f", {n_tokens} of {paper['n_tokens']} tokens"
              if n_tokens < paper["n_tokens"]
              else f", {n_tokens} tokens where the response has {paper['n_tokens']}")
    model = p["model_description"].split(" (")[0].split("/")[-1]
    return (f"{params['n_samples']} samples × {params['n_tokens']} tokens ({share:.3g} % of the response's "
            f"{paper['n_samples']} samples{tokens}), {model}, {p['device'].upper()}, {params['dtype']}")


def scale_note(result: StoredResult) -> str:
    """One sentence under a figure: scale, model, hardware, time and commit of the result, and where it is."""
    p = result.provenance
    origin = "loaded from the results store" if result.loaded else "computed by this build"
    packed = (f", {p['units_resumed_packed']} of them packed: their values within about 1e-4 of the computed"
              if p.get("units_resumed_packed") else "")
    resumed = (f", over several sessions ({p['units_resumed']} units resumed from checkpoints{packed})"
               if p.get("units_resumed") else "")
    return (f"Scale of this run: {scale_words(result)}; pretrained model {p['model_description']} "
            f"(`{p['parameters']['model']}`, depth {p['model_layers']}); computed on {p['hardware']} in "
            f"{seconds_words(compute_seconds(p))}{resumed} at commit {p['git_commit'][:12]}; {origin} "
            f"(`results/{result.table_path.parent.name}/{result.table_path.name}`).")


def banner(name: str, parameters: Mapping[str, object], results: Mapping[str, StoredResult]) -> str:
    """A note for the top of a page when it shows a stored run other than its parameters cell's; else ""."""
    asked = {k: v for k, v in parameters.items() if k in SCALE_PARAMETERS}
    shown = next(iter(results.values())).provenance["parameters"]
    differs = {k: shown[k] for k in asked if k in shown and shown[k] != asked[k]}
    if not differs:
        return ""
    what = ", ".join(f"{k} = {shown[k]!r}" for k in differs)
    return (f"**This page shows the largest stored run of this experiment** ({what}), not the "
            f"parameters cell's values; run `{run_command(name)}` with `-p show_largest_stored False` to "
            f"see exactly the cell's parameters.")


def seconds_words(seconds: float) -> str:
    """A computation time in words, the same on every line of a page: ``"under 1 s"`` or ``"2693 s"``.

    >>> seconds_words(0.2), seconds_words(2693.4)
    ('under 1 s', '2693 s')
    """
    return "under 1 s" if seconds < 0.5 else f"{seconds:.0f} s"


def check_note(checks: Iterable[tuple[bool, str]]) -> str:
    """The closing check of a theory page for the claims a run confirms only when it is deep (or large)
    enough: ``(holds, what this run shows instead, with its numbers)`` per claim. Markdown saying that all
    hold, or listing each that does not (e.g. "not converged at this depth ..."), where an assert would stop
    the page with an empty AssertionError."""
    failed = [words for holds, words in checks if not holds]
    if not failed:
        return "All of these checks hold on this run."
    return f"{CHECK_HEADING}\n\n" + "\n".join(f"- {words}" for words in failed)


def checked_claim(holds: bool, claim: str, source: str, measured: str, number: str,
                  cells: Iterable[Cell] = ()) -> Claim:
    """A statement a theory page checks on its run, as a claims row: it holds or does not hold on this run
    (``holds``), with what decides it (``measured``), the number and the cells."""
    return Claim(claim, source, measured, HOLDS if holds else FAILS, number, tuple(cells))
