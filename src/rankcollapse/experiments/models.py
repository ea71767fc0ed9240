"""The model a sweep loads and the text samples its tokenizer cuts, cached per process; the identities a
stored result records of the model (package version, file hashes, hub revision, weight hash) and compares
before it is reused; the layer shapes a sweep's memory check reads, and freshly initialized copies
of the architecture.

Used by: :mod:`rankcollapse.experiments.sweep`, :mod:`rankcollapse.experiments.plan` (layer shapes before any
layer is built), :mod:`rankcollapse.experiments.bundle`, tests/unit/test_results.py.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from types import SimpleNamespace

import torch

from rankcollapse.experiments import data as rc_data
from rankcollapse.experiments.config import ExperimentConfig
from rankcollapse.experiments.provenance import TOKENIZER_FILES, files_sha256, folder_files


def _folder_stamp(spec: str, names: tuple[str, ...] | None = None) -> tuple | None:
    """(name, inode, size, mtime) of a local folder's files (only ``names`` when given): what the caches below
    are also keyed by, so a folder whose files change is loaded again; None for a packaged model or
    a hub id."""
    folder = Path(spec).expanduser()
    if spec.startswith("pkg:") or not folder.is_dir():
        return None
    stamps = []
    for path in folder.iterdir():
        if path.is_file() and (names is None or path.name in names):
            stat = path.stat()
            stamps.append((path.name, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(stamps))


def loaded_model(spec: str):
    """The model and tokenizer of a spec (:func:`rankcollapse.hf.load.load_model`), cached per process."""
    return _loaded_model(spec, _folder_stamp(spec))


@functools.lru_cache(maxsize=2)
def _loaded_model(spec: str, stamp: tuple | None):
    from rankcollapse.hf.load import load_model

    return load_model(spec)


def text_samples(spec: str, n_samples: int, n_tokens: int, seed: int, overlap: str) -> rc_data.TextSamples:
    """The Wikipedia samples of a sweep, tokenized by the model's tokenizer (cached per process).

    Shapes: ``.input_ids`` [sample, token]; the first k of a larger draw are the draw of k.
    """
    return _text_samples(spec, n_samples, n_tokens, seed, overlap, _folder_stamp(spec, TOKENIZER_FILES))


@functools.lru_cache(maxsize=4)
def _text_samples(spec: str, n_samples: int, n_tokens: int, seed: int, overlap: str, stamp: tuple | None):
    return rc_data.sample_token_ids(loaded_model(spec).tokenizer, n_samples, n_tokens, seed, overlap)


def model_identity(spec: str, location: str | None = None) -> dict[str, str | None]:
    """What a result records about its model's files and compares before it is reused, without loading
    weights: a packaged model's installed package (``model_package``); a folder's SHA-256 of its config and
    weight files (``model_files_sha256``) and of its tokenizer files (``tokenizer_sha256``); a hub id's
    cached commit (``model_revision``) and tokenizer files. ``location``: the folder the model was loaded
    from, to hash a packaged model's tokenizer files too (when recording)."""
    from rankcollapse.hf.load import hub_snapshot, packaged_version

    local = Path(spec).expanduser()
    if spec.startswith("pkg:"):
        identity, folder = {"model_package": packaged_version(spec)}, Path(location) if location else None
    elif local.is_dir():
        identity, folder = {"model_files_sha256": files_sha256(folder_files(local)[0])}, local
    else:
        folder = hub_snapshot(spec)
        identity = {"model_revision": None if folder is None else folder.name}
    tokenizer = folder_files(folder)[1] if folder is not None and folder.is_dir() else None
    return {**identity, "tokenizer_sha256": None if tokenizer is None else files_sha256(tokenizer)}


def identity_mismatch(spec: str, provenance: dict) -> str | None:
    """Why a stored result of ``spec`` no longer fits its model's files (:func:`model_identity` against what
    the result recorded), in a few words; None when it fits. A folder's result must have recorded its
    hashes; a packaged model's or hub id's is compared where it recorded the version (results stored before
    these were recorded keep loading), and only while the package is installed or the hub id cached."""
    local = not spec.startswith("pkg:") and Path(spec).expanduser().is_dir()
    for name, now in model_identity(spec).items():
        if now is None or (name not in provenance and not local):
            continue
        if name not in provenance:
            return f"it records no {name} of the folder {spec} (stored before the folder's files were hashed)"
        if provenance[name] != now:
            what = {"model_package": "the installed model package",
                    "model_revision": "the cached hub revision",
                    "model_files_sha256": "the folder's config or weight files",
                    "tokenizer_sha256": "the tokenizer files"}[name]
            short = (lambda v: f"{str(v)[:16]}...") if name.endswith("sha256") else str
            return f"{what} changed since it was computed ({name} {short(provenance[name])} -> {short(now)})"
    return None


def weight_hash(model: torch.nn.Module) -> str:
    """sha256 of every parameter tensor in name order (names, shapes and float32 bytes)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name}{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def layer_shapes(config: ExperimentConfig, model_config) -> dict[str, tuple[int, SimpleNamespace]]:
    """Each weight source's depth and layer shape (``d_model``, ``n_heads``, ``d_head``), from the model's
    Hugging Face config alone: what a sweep's memory check needs before any layer is built."""
    d, heads = int(model_config.hidden_size), int(model_config.num_attention_heads)
    own = int(getattr(model_config, "head_dim", None) or d // heads)
    shapes = {}
    for kind in config.weights:
        pretrained = kind == "pretrained"
        depth = min(config.n_layers, int(model_config.num_hidden_layers)) if pretrained else config.n_layers
        shapes[kind] = (depth, SimpleNamespace(d_model=d, n_heads=heads,
                                               d_head=own if pretrained else d // heads))
    return shapes


def initialized_model(model: torch.nn.Module, n_layers: int, seed: int) -> torch.nn.Module:
    """A freshly initialized copy of the architecture with ``n_layers`` layers (HF's own init; a config's
    per-layer ``layer_types`` cut to those layers), from a forked, seeded RNG (the global RNG
    state is restored)."""
    from transformers import AutoModel

    own = model.config.to_dict()
    per_layer = {"layer_types": own["layer_types"][:n_layers]} if own.get("layer_types") else {}
    config = model.config.__class__.from_dict({**own, "num_hidden_layers": n_layers, **per_layer})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = AutoModel.from_config(config, attn_implementation="eager")
    return fresh.eval()
