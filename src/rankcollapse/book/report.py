"""What a page shows around its results: how every computed page opens (:func:`start_page`: its
parameters and what it shows), its standard figures, the scale sentence, the banner when a stored larger
run is shown, and the re-run block.

Pages stay thin: one call opens the page (:func:`start_page`), one per figure (:func:`glue_layer_figure`,
:func:`glue_geometry_figure`); numbers and claims come from the page's module (:mod:`rankcollapse.book.pages`),
words and numbers are glued (:func:`glue_values`, :func:`glue_claims`, :func:`glue_markdown`).

Used by: every computed page, book/reproduce.md (through the registry).
"""

from __future__ import annotations

import json

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd
from IPython.display import Markdown
from myst_nb import glue

from rankcollapse.book import recompute
from rankcollapse.book import registry as pages
from rankcollapse.book.labels import MASK_LABELS, mask_title
from rankcollapse.book.plotting import common as plotting
from rankcollapse.book.plotting.overlap import caption_notes
from rankcollapse.book.runner import CHECK_HEADING, page_parameters
from rankcollapse.core.masks import WINDOWED_MASKS
from rankcollapse.core.norms import NORM_LABELS
from rankcollapse.experiments.table import check_table
from rankcollapse.experiments.provenance import book_root
from rankcollapse.experiments.store import TABLE_SUFFIX, ResultStore, StoredResult, compute_seconds, run_command
from rankcollapse.verdicts import claims as rc_claims

recompute.register()  # a damaged result met by a page names the command, in its page's parameters, that recomputes it

# Parameters that change a run's scale but not what it computes: a stored run that differs only in these
# is the same experiment, larger or smaller.
_SCALE_PARAMETERS = ("model", "n_samples", "n_tokens", "overlap", "device", "dtype")


# ---------------------------------------------------------------- the results a page shows


def start_page(name: str, namespace: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """What every computed page does first: the book's plot theme, its parameters and what it shows.

    The parameters are the current values of the names of page ``name``'s ``parameters`` cell (read from
    the page file), taken from the notebook's ``namespace`` after papermill injected a reader's values.
    What it shows, by part (:func:`rankcollapse.book.registry.compute`): an experiment page's results,
    computed (or loaded) for exactly these parameters, then, when its ``show_largest_stored`` is true, its
    parts at the largest scale stored (:func:`largest_stored`); for a page that computes in its own module,
    ``{"main": Computed(config, result, seconds)}`` (:class:`rankcollapse.book.registry.Computed`).
    """
    plotting.set_theme()
    names = page_parameters(pages.page(name).path(book_root()))
    parameters = {k: namespace[k] for k in names}
    results = pages.compute(name, **parameters)
    if parameters.get("show_largest_stored", False):
        results = largest_stored(results)
    return parameters, results


def largest_stored(results: Mapping[str, StoredResult], store: ResultStore | None = None) -> dict[str, StoredResult]:
    """Every part of a page at the largest scale (samples x tokens, then model depth) at which all of them
    are stored, or ``results`` themselves.

    The scale is that of a stored run of the same experiment as the part ``main`` where a page has one (Fig. 2
    beside its controls), else the part with the most samples (equal in every parameter but _SCALE_PARAMETERS).
    Every part moves to it; a part computed on another sample count than that part (the sample-size page's
    small sample, Fig. 2's controls) keeps its own sample count, except on a page whose registry entry
    ``grows_own_counts`` (Fig. 2): there those parts move to the largest sample count stored for all of them
    at that scale. So a page never mixes scales; a part stored at that scale only on another device is taken
    from there (the skip-connection page's deep, initialized part from a GPU's device bundle, its shallow part
    with the pretrained layers from a CPU).
    """
    store = store or ResultStore()
    anchor = (results["main"] if "main" in results else
              max(results.values(), key=lambda r: r.provenance["parameters"]["n_samples"])).provenance
    own = anchor["parameters"]
    grows = pages.page(anchor["page"]).grows_own_counts
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

    larger = sorted((r for r in entries if without(r["parameters"], _SCALE_PARAMETERS) == without(own, _SCALE_PARAMETERS)
                     and (size(r) > size(anchor) or grows and size(r) == size(anchor))), key=size, reverse=True)
    for record in larger:
        scale = {k: record["parameters"][k] for k in _SCALE_PARAMETERS if k in record["parameters"]}
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


# ---------------------------------------------------------------- words


def _temperature_label(temperature: float | None) -> str:
    """``d_QK = 1/64`` style words for a temperature (NaN or None = the layer's own scaling).

    >>> _temperature_label(1 / 64), _temperature_label(64.0), _temperature_label(None)
    ('d_QK = 1/64', 'd_QK = 64', 'own scaling')
    """
    if temperature is None or temperature != temperature:
        return "own scaling"
    return f"d_QK = 1/{1 / temperature:.0f}" if temperature < 1 else f"d_QK = {temperature:g}"


def _weight_titles(provenance: dict) -> dict[str, str]:
    """Panel-title words naming the weights of each source, so initialized and pretrained cannot be mixed up."""
    params = provenance["parameters"]
    init = "U(±1/√d)" if params["init"] == "torch" else "N(0, 0.02)"
    return {"initialized": f"initialized: {init}, seed {params['seed']}",
            "pretrained": f"pretrained: {provenance['model_description'].split(' (')[0].split('/')[-1]}"}


def _curve_label(row: pd.Series) -> str:
    """The legend words of one configuration: the full transformer, or SAN with its norm, skip, temperature."""
    if row["variant"] != "SAN":
        return row["variant"]
    words = NORM_LABELS.get(row["norm"], row["norm"])
    if row.get("skip", False):
        words = words.replace("pure attention", "attention") + " + skip"
    return words


_HUES = {"norm": _curve_label, "temperature": lambda row: _temperature_label(row["temperature"]),
         "n_samples": lambda row: f"{_curve_label(row)}, {row['n_samples']} samples"}


# ---------------------------------------------------------------- figures


def _labelled(result: StoredResult, hue: str) -> pd.DataFrame:
    table = result.table.copy()
    window = result.provenance["parameters"].get("window")
    table["label"] = table.apply(_HUES[hue], axis=1)
    table["mask_title"] = table["mask"].map(lambda m: mask_title(m, window))
    return table


def _figure_parameters(result: StoredResult) -> dict:
    """What a layer figure's cite block names: the stored run's parameters (``window`` only when one of its
    masks takes it), its weights and result key."""
    parameters = dict(result.provenance["parameters"])
    if not set(parameters.get("masks", ())) & set(WINDOWED_MASKS):
        parameters.pop("window", None)
    return {**parameters, "weights": _weight_titles(result.provenance),
            "result": result.provenance["key"], "pretrained_weight_sha256": result.provenance["weight_sha256"]}


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
            combined[name] = sorted(set(map(str, flat)) if any(isinstance(x, str) for x in flat) else set(flat))
    return combined


def glue_layer_figure(result: StoredResult, metric: str, stem: str, *, hue: str = "norm",
                      ratio: bool = False) -> None:
    """The per-layer curves of ``metric`` (rows: weight sources; columns: masks; one curve per ``hue``
    value of _HUES), exported as ``stem`` and glued under the key ``stem`` with ``-`` made ``_``; the
    caption's computed words (curves drawn on top of each other, axes cut below the floor:
    :func:`rankcollapse.book.plotting.overlap.caption_notes`) under that key + ``_notes``.
    With ``hue="n_samples"`` the smaller sample's curves are dashed (they may hide behind the others);
    ``ratio``: the metric is a ratio, drawn with a dotted line at 1, on a linear axis where all its
    values lie within a factor 2 of each other (log ticks would then show only 10^0)."""
    table = _labelled(result, hue)
    small = table["n_samples"] == table["n_samples"].min()
    dashed = tuple(table.loc[small, "label"].unique()) if hue == "n_samples" and not small.all() else ()
    fig = plotting.layer_curve_grid(table, metric, col="mask_title", hue="label",
                                    titles=_weight_titles(result.provenance), dashed=dashed)
    if ratio:
        values = table.loc[(table["metric"] == metric) & (table["layer"] >= 1), plotting.centre_of(metric)]
        linear = values.max() <= 2 * values.min()
    for ax in fig.axes if ratio else ():
        ax.axhline(1.0, color="0.3", lw=1.0, ls=":", zorder=0)
        if linear:  # the grid fitted a log range; a linear axis spans the ratios themselves
            ax.set_yscale("linear")
            ax.set_autoscaley_on(True)
            ax.relim()
            ax.autoscale_view(scalex=False)
    _glue_with_notes(stem, fig, result)


def _glue_with_notes(stem: str, fig, result: StoredResult) -> None:
    """Glue ``fig``'s caption words (key ``<stem>_notes``, ``-`` made ``_``), then export and glue it."""
    key = stem.replace("-", "_")
    glue(f"{key}_notes", caption_notes(fig), display=False)
    plotting.glue_figure(key, fig, stem=stem, parameters=_figure_parameters(result), data=figure_data([result]))


def glue_geometry_figure(result: StoredResult, stem: str) -> None:
    """Fig. 4's token geometry (rank, σ_min, mean |cos|) per weight source, one line style per mask, exported
    and glued as ``stem`` (its caption words as in :func:`glue_layer_figure`)."""
    fig = plotting.geometry_grid(_labelled(result, "norm"), col="weights", hue="label",
                                 titles=_weight_titles(result.provenance), mask_words=MASK_LABELS)
    _glue_with_notes(stem, fig, result)


def glue_values(prefix: str, values: Mapping[str, object]) -> None:
    """Glue each value under ``<prefix>_<name>`` (or ``<name>`` when ``prefix`` is empty; numbers as
    float/int, words as str), not displayed."""
    for name, v in values.items():
        glue(f"{prefix}_{name}" if prefix else name, v, display=False)


def glue_markdown(key: str, text: str) -> None:
    """Glue ``text`` as Markdown under ``key`` (paste it with ``{glue:md}``), not displayed."""
    glue(key, Markdown(text), display=False)


def check_note(checks: Sequence[tuple[bool, str]]) -> Markdown:
    """The closing check of a theory page for the claims a run confirms only when it is deep (or large)
    enough: ``(holds, what this run shows instead, with its numbers)`` per claim. Markdown saying that all
    hold, or listing each that does not (e.g. "not converged at this depth ..."), where an assert would stop
    the page with an empty AssertionError."""
    failed = [words for holds, words in checks if not holds]
    if not failed:
        return Markdown("All of these checks hold on this run.")
    return Markdown(f"{CHECK_HEADING}\n\n" + "\n".join(f"- {words}" for words in failed))


def glue_claims(prefix: str, claims: list[rc_claims.Claim]) -> None:
    """Glue a page's claims table (``<prefix>_claims``: the compact matrix of
    :func:`rankcollapse.verdicts.claims.markdown_table` — claims x masks or parts, a symbol with the effect and
    its interval per cell, the verdict and its robustness per row — its legend and the collapsible per-mask
    words, GitHub-flavoured Markdown with raw HTML ``<details>``: paste it with ``{glue:md}`` and
    ``:format: gfm``) and its headline sentence (``<prefix>_headline``)."""
    glue_markdown(f"{prefix}_claims", rc_claims.markdown_table(claims))
    glue_markdown(f"{prefix}_headline", rc_claims.headline(claims))


# ---------------------------------------------------------------- scale, banner, re-run


def scale_words(result: StoredResult) -> str:
    """The run's scale in a few words, as a share of the response's 3000 samples x 128 tokens.

    E.g. ``"32 samples x 128 tokens (1 % of the response's 3000 samples), MPNet, CPU, float32"``.
    """
    p = result.provenance
    params = p["parameters"]
    paper = pages.PAPER_SCALE
    share = 100 * params["n_samples"] / paper["n_samples"]
    n_tokens = params["n_tokens"]
    tokens = ("" if n_tokens == paper["n_tokens"] else f", {n_tokens} of {paper['n_tokens']} tokens"
              if n_tokens < paper["n_tokens"] else f", {n_tokens} tokens where the response has {paper['n_tokens']}")
    model = p["model_description"].split(" (")[0].split("/")[-1]
    return (f"{params['n_samples']} samples × {params['n_tokens']} tokens ({share:.3g} % of the response's "
            f"{paper['n_samples']} samples{tokens}), {model}, {p['device'].upper()}, {params['dtype']}")


def scale_note(result: StoredResult) -> str:
    """One sentence under a figure: scale, model, hardware, time and commit of the result, and where it is."""
    p = result.provenance
    origin = "loaded from the results store" if result.loaded else "computed by this build"
    resumed = (f", over several sessions ({p['units_resumed']} units resumed from checkpoints)"
               if p.get("units_resumed") else "")
    return (f"Scale of this run: {scale_words(result)}; pretrained model {p['model_description']} "
            f"(`{p['parameters']['model']}`, depth {p['model_layers']}); computed on {p['hardware']} in "
            f"{_seconds_words(compute_seconds(p))}{resumed} at commit {p['git_commit'][:12]}; {origin} "
            f"(`results/{result.table_path.parent.name}/{result.table_path.name}`).")


def shown_banner(name: str, parameters: Mapping[str, object],
                 results: Mapping[str, StoredResult]) -> Markdown | None:
    """A note for the top of a page when it shows a stored run other than its parameters cell's; else None,
    which a notebook cell displays as nothing (an empty Markdown would show its repr)."""
    asked = {k: v for k, v in parameters.items() if k in _SCALE_PARAMETERS}
    shown = next(iter(results.values())).provenance["parameters"]
    differs = {k: shown[k] for k in asked if k in shown and shown[k] != asked[k]}
    if not differs:
        return None
    what = ", ".join(f"{k} = {shown[k]!r}" for k in differs)
    return Markdown(f"**This page shows the largest stored run of this experiment** ({what}), not the "
                    f"parameters cell's values; run `{run_command(name)}` with `-p show_largest_stored False` to "
                    f"see exactly the cell's parameters.")


def _lists(value: object) -> object:
    """A config's tuples as the parameters cell's lists (nested too).

    >>> _lists(((0.5, 2.0), (0.0, 1.0)))
    [[0.5, 2.0], [0.0, 1.0]]
    """
    return [_lists(v) for v in value] if isinstance(value, (tuple, list)) else value


def _seconds_words(seconds: float) -> str:
    """A computation time in words, the same on every line of a page: ``"under 1 s"`` or ``"2693 s"``.

    >>> _seconds_words(0.2), _seconds_words(2693.4)
    ('under 1 s', '2693 s')
    """
    return "under 1 s" if seconds < 0.5 else f"{seconds:.0f} s"


def _rerun_block(name: str, parameters: Mapping[str, object], seconds: float | None = None,
                 hardware: str | None = None, parts: str = "") -> str:
    """Markdown: the command that re-runs this page with these parameters, its expected time, the paper
    profile's command where the page has one.

    Only values that differ from the page's parameters cell appear in the command. ``seconds``/``hardware``:
    the measured computation time of the page (from stored results' provenance or this build); ``parts``:
    words after it that split it over the page's runs.
    """
    entry = pages.page(name)
    defaults = page_parameters(entry.path(book_root()))
    changed = {k: _lists(v) for k, v in parameters.items() if k in defaults and defaults[k] != _lists(v)}
    command = run_command(name, [(k, repr(v)) for k, v in changed.items()])
    lines = ["**Re-run this page**", "", "```bash", command, "```", ""]
    if seconds is not None:
        lines.append(f"Its computation took {_seconds_words(seconds)} on {hardware or 'the build machine'}"
                     f"{'' if seconds < 60 else f' ({seconds / 60:.1f} min)'}{parts}; the executed notebook and "
                     f"its figures go to `runs/{name}-<time>/`.")
    if "paper" in entry.profiles:
        paper = run_command(name, options=("--profile paper", "--device cuda"))
        lines += ["", f"At the paper's scale ({', '.join(f'{k} = {v}' for k, v in entry.profiles['paper'].items())}), "
                      f"on a GPU: `{paper}` (the *Reproduce and cite* page lists every page's paper-scale run)."]
    return "\n".join(lines)


def _cost(result: StoredResult | pages.Computed) -> tuple[float | None, str | None]:
    """What computing a part cost and where: a stored result's
    :func:`~rankcollapse.experiments.store.compute_seconds` and hardware, or this build's wall time."""
    if isinstance(result, pages.Computed):
        return result.seconds, None
    return compute_seconds(result.provenance), result.provenance.get("hardware")


def rerun_result_block(name: str, parameters: Mapping[str, object], results: Mapping[str, object]) -> str:
    """The re-run block of a page (its command, what computing ``results`` cost, the paper profile's
    command): the cost of every part summed, on the hardware of the first part (this build's machine for
    a page that computes in its own module), split over its parts when it has several, so each part's
    time is the one its scale note states (:func:`scale_note`: the same :func:`compute_seconds`)."""
    costs = {part: _cost(r) for part, r in results.items()}
    seconds = [c[0] for c in costs.values()]
    if None in seconds:
        return _rerun_block(name, parameters, None, None)
    each = {part: _seconds_words(c[0]) for part, c in costs.items()}
    parts = ("" if len(costs) == 1 else
             f", in all, over its {len(costs)} runs ({', '.join(f'{p}: {t}' for p, t in each.items())})"
             if len(costs) <= 4 else f", in all, over its {len(costs)} runs ({_seconds_words(min(seconds))} to "
             f"{_seconds_words(max(seconds))} each)")
    return _rerun_block(name, parameters, sum(seconds), next(iter(costs.values()))[1], parts)
