"""Tiny random Hugging Face models for the tests and the tiny checks: one per family record.

:func:`tiny_model` builds a family's model from its record's ``tiny_config``
(:mod:`rankcollapse.hf.families`: d_model 32, 3 layers), so every supported family is tested in CI
without a download. :func:`save_tiny_model` writes a seeded random model of any config with a character-level
tokenizer to a folder (a local folder spec); :func:`offload_check` is the large-models page's check of the
``device_map`` path on a tiny decoder. ``transformers`` is imported only when one of them is called.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from rankcollapse.hf.families import FAMILIES


def tiny_config(family: str):
    """The Hugging Face config of a family's tiny model (from the record's ``tiny_config``).

    >>> tiny_config("llama").num_key_value_heads, tiny_config("gpt2").hidden_size
    (2, 32)
    """
    import transformers

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {family!r}")
    record = FAMILIES[family]
    return transformers.AutoConfig.for_model(record.model_type, **copy.deepcopy(record.tiny_config))


def tiny_model(family: str, seed: int = 0, weight_scale: float = 0.3) -> torch.nn.Module:
    """A 3-layer, d_model=32 random model of a family (how CI tests families it cannot download).

    Every parameter is redrawn N(0, weight_scale^2) from a seeded generator, so attention is far from
    uniform and biases and norm gains are non-trivial. Eager attention, eval mode.
    """
    import transformers

    config = tiny_config(family)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager",
                                               experts_implementation="eager").eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * weight_scale)
    return model


def save_tiny_model(folder: Path | str, config) -> str:
    """Save a seeded random model of a Hugging Face ``config`` with a character-level tokenizer to ``folder``:
    a local folder spec for tests, the large-models page's check and a reader's run on a tiny model.

    The tokenizer's tokens are single characters (lower-case letters, space, upper-case letters, digits,
    punctuation, as many as ``config.vocab_size - 1`` allows) after the unknown token ``<unk>`` (id 0), so
    the book's Wikipedia text encodes to varied ids.
    """
    import string

    import transformers
    from tokenizers import Tokenizer
    from tokenizers.models import BPE

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        transformers.AutoModel.from_config(config).save_pretrained(folder)
    characters = (string.ascii_lowercase + " " + string.ascii_uppercase + string.digits + string.punctuation)
    vocabulary = {"<unk>": 0, **{c: i + 1 for i, c in enumerate(characters[:config.vocab_size - 1])}}
    tokenizer = Tokenizer(BPE(vocabulary, [], unk_token="<unk>"))  # no merges: one token per character
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer,
                                         unk_token="<unk>").save_pretrained(folder)
    return str(folder)


def offload_check(folder: Path | str, n_sequences: int = 6, batch_size: int = 2) -> dict[str, object]:
    """The large-model path on a tiny decoder: a 3-layer Llama with a sliding window saved to ``folder``,
    loaded with two of its layers offloaded to disk (``device_map``, accelerate), its hook metrics
    computed in batches and compared with those of a plain load.

    Returns the device map, the number of sequences, and the largest relative difference of μ.
    """
    import transformers

    from rankcollapse.hf.extract import full_transformer_metrics
    from rankcollapse.hf.load import load_model

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
                                      max_position_embeddings=64, sliding_window=4)
    spec = save_tiny_model(Path(folder) / "model", config)
    placement = {"embed_tokens": "cpu", "layers.0": "cpu", "layers.1": "disk", "layers.2": "disk",
                 "norm": "cpu", "rotary_emb": "cpu"}
    spread = load_model(spec, device_map=placement, offload_folder=str(Path(folder) / "offload")).model
    ids = torch.randint(0, config.vocab_size, (n_sequences, 12), generator=torch.Generator().manual_seed(0))
    got = full_transformer_metrics(spread, ids, batch_size=batch_size)["mu"]  # [layer + 1, sample]
    # [layer + 1, sample]
    want = full_transformer_metrics(load_model(spec).model, ids, batch_size=n_sequences)["mu"]
    return {"device_map": dict(spread.hf_device_map), "n_sequences": n_sequences,
            "max_relative_difference": float(((got - want).abs() / want.abs()).max())}
