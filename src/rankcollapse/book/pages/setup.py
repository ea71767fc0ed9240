"""What the setup and data pages compute: one frozen config (= the page's parameters) and one function
per page, as in :mod:`rankcollapse.book.pages.theorems`.

Used by: ``book/setup.md``, ``book/data.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.core import masks
from rankcollapse.core.checks import check_choices, check_int
from rankcollapse.core.checks import check_ints, freeze_lists
from rankcollapse.book.pages.theorems import MAX_SEED, MAX_TOKENS, PAPER_MASKS


# ---------------------------------------------------------------- setup page


@dataclass(frozen=True)
class SetupConfig:
    """The parameters of ``book/setup.md``."""

    n_tokens: int = 16  # N, tokens in the pictured masks
    window: int = 3  # w, window half-width (sliding) and size (uni-directional)
    table_n_tokens: tuple[int, ...] = (8, 16, 32, 64, 128)  # N values of the radius table
    table_windows: tuple[int, ...] = (1, 2, 4, 8)  # w values of the radius table

    def __post_init__(self) -> None:
        freeze_lists(self, "table_n_tokens", "table_windows")
        check_int("n_tokens", self.n_tokens, 2, 64)
        check_int("window", self.window, 1, self.n_tokens - 1)
        check_ints("table_n_tokens", self.table_n_tokens, 2, MAX_TOKENS)
        check_ints("table_windows", self.table_windows, 1, MAX_TOKENS - 1)
        if min(self.table_windows) >= max(self.table_n_tokens):
            raise ValueError(f"table_windows must hold a window below max(table_n_tokens) = "
                             f"{max(self.table_n_tokens)}, got {self.table_windows!r}")


@dataclass(frozen=True)
class SetupResult:
    """The paper's four masks with their graphs, and the radius table (checked against closed forms)."""

    masks: dict[str, Tensor]  # mask name -> [token, token] bool, the paper's four masks
    graphs: dict[str, masks.MaskGraph]  # mask name -> centers, radius (BFS)
    radii: pd.DataFrame  # index N, columns (mask, w): radius by BFS
    numbers: dict[str, object]  # glued values



def setup(config: SetupConfig) -> SetupResult:
    """The setup page: the four masks at ``n_tokens``, ``window`` and the radius of the window masks over
    a grid of N and w, each radius from BFS checked against ``ceil(floor(N/2)/w)`` and ``ceil((N-1)/w)``.

    Shapes: every mask ``[token, token]`` bool.
    """
    shown = {name: masks.build_mask(name, config.n_tokens, window=config.window) for name in PAPER_MASKS}
    graphs = {name: masks.describe_mask(mask) for name, mask in shown.items()}
    rows = []
    for n in config.table_n_tokens:
        for w in (w for w in config.table_windows if w < n):
            r_sliding = masks.graph_radius(masks.sliding_window_mask(n, w))
            r_uni = masks.graph_radius(masks.causal_sliding_window_mask(n, w))
            if (r_sliding, r_uni) != (math.ceil((n // 2) / w), math.ceil((n - 1) / w)):
                raise AssertionError(f"BFS radius disagrees with the closed form at N={n}, w={w}")
            rows += [{"N": n, "w": w, "mask": "sliding window", "r": r_sliding},
                     {"N": n, "w": w, "mask": "uni-directional window", "r": r_uni}]
    radii = pd.DataFrame(rows).pivot(index="N", columns=["mask", "w"], values="r").sort_index(axis=1)
    n_max, w_min = max(config.table_n_tokens), min(config.table_windows)
    numbers = {"setup_n_tokens": config.n_tokens, "setup_window": config.window,
               "setup_radius_sliding": graphs["sliding_window"].radius,
               "setup_radius_uni": graphs["causal_sliding_window"].radius,
               "setup_table_n_max": n_max, "setup_table_w_min": w_min,
               "setup_radius_nmax_wmin": int(radii.loc[n_max, ("uni-directional window", w_min)])}
    return SetupResult(shown, graphs, radii, numbers)


# ---------------------------------------------------------------- data page


@dataclass(frozen=True)
class DataConfig:
    """The parameters of ``book/data.md``."""

    n_tokens: int = 128  # tokens per sample, special tokens included (Dong et al.: 128)
    seed: int = 0  # selection seed
    model_specs: tuple[str, ...] = ("pkg:minilm", "pkg:mpnet", "pkg:smollm2", "pkg:gemma3")  # tokenizers counted
    # (the first also draws the example sample and must be installed; the others' counts may be stored)

    def __post_init__(self) -> None:
        freeze_lists(self, "model_specs")
        check_int("n_tokens", self.n_tokens, 2, 4096)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_choices("model_specs", self.model_specs, ("pkg:minilm", "pkg:mpnet", "pkg:smollm2", "pkg:gemma3"))


@dataclass(frozen=True)
class DataResult:
    """How many samples of ``n_tokens`` tokens the corpus holds per tokenizer, and one drawn sample."""

    counts: pd.DataFrame  # one row per model spec: tokenizer, vocabulary, disjoint and sentence-start samples
    loaded: bool  # True when the counts came from the results store (computed earlier, with provenance)
    numbers: dict[str, object]  # glued values


def _count_samples(config: DataConfig, articles: list[tuple[str, str]]) -> tuple[pd.DataFrame, dict]:
    """The counts table of :func:`data_page` and its provenance (a few seconds per tokenizer)."""
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


def data_page(config: DataConfig) -> DataResult:
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
        stored = ResultStore().load_or_compute("data", {"n_tokens": config.n_tokens, "model_specs": config.model_specs},
                                               lambda: _count_samples(config, articles))
        tokenizer = models.load_tokenizer(config.model_specs[0])
        example = data.sample_token_ids(tokenizer, n_samples=1, n_tokens=config.n_tokens, seed=config.seed,
                                        articles=articles)
    lengths = torch.tensor([len(ids) for ids in tokenizer([text for _, text in articles])["input_ids"]])  # [article]
    table = stored.table.set_index("model spec")
    numbers = {"data_n_articles": len(articles), "data_n_tokens": config.n_tokens,
               "data_n_sentence_starts": sum(len(data.sentence_starts(text)) for _, text in articles),
               "data_example_tokens": int(example.input_ids.shape[1]), "data_first_spec": config.model_specs[0],
               "data_first_disjoint": int(table["disjoint samples"].iloc[0]),
               "data_first_starts": int(table["sentence-start samples"].iloc[0]),
               "data_max_disjoint": int(table["disjoint samples"].max()),
               "data_min_starts": int(table["sentence-start samples"].min()),
               "data_counts_commit": stored.provenance.get("git_commit", "unknown")[:12],
               "data_mean_lead_tokens": float(lengths.double().mean()),
               "data_fraction_reaching": float((lengths >= config.n_tokens).double().mean()),
               "data_need_overlap": "need" if int(table["disjoint samples"].max()) < 3000 else "do not need"}
    return DataResult(table, stored.loaded, numbers)
