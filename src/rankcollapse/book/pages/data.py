"""The data page (book/data.md): how many samples of ``n_tokens`` tokens the Wikipedia corpus holds for each
tokenizer, and one drawn sample. One frozen config (= the page's parameters) and one function.

:class:`DataConfig` has exactly the fields of the page's ``parameters`` cell, with the same defaults, and is
validated once in ``__post_init__``; :func:`configure` builds it from a reader's parameters, :func:`compute`
gives what the page shows, its ``numbers`` the values its prose glues; :func:`show` is what the page shows of
it: those numbers and the counts table.

Used by: book/data.md (through the page registry, :mod:`rankcollapse.book.registry`),
tests/unit/test_theory.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from rankcollapse.book.pages._common import MAX_SEED, own_config
from rankcollapse.book.shown import Shown
from rankcollapse.core.checks import check_choices, check_int, freeze_lists


@dataclass(frozen=True)
class DataConfig:
    """The parameters of ``book/data.md``."""

    n_tokens: int = 128  # tokens per sample, special tokens included (Dong et al.: 128)
    seed: int = 0  # selection seed
    # tokenizers counted (the first also draws the example sample and must be installed; the others' counts
    # may be stored)
    model_specs: tuple[str, ...] = ("pkg:minilm", "pkg:mpnet", "pkg:smollm2", "pkg:gemma3")

    def __post_init__(self) -> None:
        freeze_lists(self, "model_specs")
        check_int("n_tokens", self.n_tokens, 2, 4096)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_choices("model_specs", self.model_specs,
                      ("pkg:minilm", "pkg:mpnet", "pkg:smollm2", "pkg:gemma3"))


@dataclass(frozen=True)
class DataResult:
    """How many samples of ``n_tokens`` tokens the corpus holds per tokenizer, and one drawn sample."""

    counts: pd.DataFrame  # one row per model spec: tokenizer, vocabulary, disjoint and sentence-start samples
    loaded: bool  # True when the counts came from the results store (computed earlier, with provenance)
    numbers: dict[str, object]  # glued values


def _count_samples(config: DataConfig, articles: list[tuple[str, str]]) -> tuple[pd.DataFrame, dict]:
    """The counts table of :func:`compute` and its provenance (a few seconds per tokenizer)."""
    from rankcollapse.experiments import data
    from rankcollapse.hf import load as models

    rows = []
    for spec in config.model_specs:
        tokenizer = models.load_tokenizer(spec)
        counts = {overlap: len(data.candidates(tokenizer, config.n_tokens, overlap, articles))
                  for overlap in data.OVERLAP_NAMES}
        rows.append({"model spec": spec, "tokenizer": type(tokenizer).__name__.removesuffix("Fast"),
                     "vocabulary": len(tokenizer), "disjoint samples": counts["disjoint"],
                     "sentence-start samples": counts["sentence_starts"]})
    return pd.DataFrame(rows), {"corpus_file": data.wiki_file().name}


def compute(config: DataConfig) -> DataResult:
    """Count the candidate samples of every tokenizer (from the results store when the counts for exactly
    these parameters were stored before, else computed and stored) and draw one sample with the first
    tokenizer, which must be installed.

    Shapes: the drawn sample is ``[1, n_tokens]``.
    """
    import warnings

    from rankcollapse.experiments import data
    from rankcollapse.hf import load as models
    from rankcollapse.experiments.store import ResultStore

    articles = data.load_articles()
    with warnings.catch_warnings():  # tqdm's notebook bar warns about a missing ipywidgets, with a local path
        warnings.filterwarnings("ignore", message="IProgress not found")
        stored = ResultStore().load_or_compute("data", {"n_tokens": config.n_tokens,
                                                        "model_specs": config.model_specs},
                                               lambda: _count_samples(config, articles))
        tokenizer = models.load_tokenizer(config.model_specs[0])
        example = data.sample_token_ids(tokenizer, n_samples=1, n_tokens=config.n_tokens, seed=config.seed,
                                        articles=articles)
    lengths = torch.tensor([len(ids) for ids in
                            tokenizer([text for _, text in articles])["input_ids"]])  # [article]
    table = stored.table.set_index("model spec")
    numbers = {"data_n_articles": len(articles), "data_n_tokens": config.n_tokens,
               "data_n_sentence_starts": sum(len(data.sentence_starts(text)) for _, text in articles),
               "data_example_tokens": int(example.input_ids.shape[1]),
               "data_first_spec": config.model_specs[0],
               "data_first_disjoint": int(table["disjoint samples"].iloc[0]),
               "data_first_starts": int(table["sentence-start samples"].iloc[0]),
               "data_max_disjoint": int(table["disjoint samples"].max()),
               "data_min_starts": int(table["sentence-start samples"].min()),
               "data_counts_commit": stored.provenance.get("git_commit", "unknown")[:12],
               "data_mean_lead_tokens": float(lengths.double().mean()),
               "data_fraction_reaching": float((lengths >= config.n_tokens).double().mean()),
               "data_need_overlap": "need" if int(table["disjoint samples"].max()) < 3000 else "do not need"}
    return DataResult(table, stored.loaded, numbers)


configure = own_config(DataConfig)


def show(results: dict[str, tuple], parameters: dict) -> Shown:
    """The page's numbers (``data_*``) and the counts table (``data_counts``: one row per model spec, counts
    with thousands separators); first its self-checks (the drawn sample has exactly N tokens, every tokenizer
    has fewer disjoint than sentence-start samples, and no more of these than sentence starts). ``results``:
    ``{"main": Computed(config, DataResult, seconds)}`` (:class:`rankcollapse.book.registry.Computed`)."""
    config, result, _ = results["main"]
    n = result.numbers
    assert n["data_example_tokens"] == config.n_tokens  # a drawn sample has exactly N tokens
    assert (result.counts["disjoint samples"] < result.counts["sentence-start samples"]).all()
    assert result.counts["sentence-start samples"].max() <= n["data_n_sentence_starts"]
    return Shown(values=n, tables={"data_counts": result.counts.style.format(thousands=",")})
