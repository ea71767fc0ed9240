"""Hugging Face models for the SAN engine: loading, extraction and validation, one record per family.

* :mod:`rankcollapse.hf.load` - a spec string (``pkg:minilm``, a folder, a hub id) -> the model and its
  tokenizer, offline, with the packaged models' caches; the checks made before anything loads.
* :mod:`rankcollapse.hf.extract` - a loaded model -> the engine's :class:`~rankcollapse.engine.AttentionLayer`
  list (weights and the layers' own norms), X(0) (:func:`embed`), hooks on the real forward (the full
  transformer's metrics) and the validation of the engine against the model's own attention, norms and block.
* :mod:`rankcollapse.hf.families` - one :class:`Family` record per supported ``config.model_type``, the only
  place a family's layout is described (:data:`FAMILIES`; :func:`family_of` refuses any other family).
* :mod:`rankcollapse.hf.testing` - tiny random models of each family for the tests (:func:`tiny_model`,
  from the records), a saved tiny model with a tokenizer, and the large-models page's offload check.

Imports torch, transformers (when a model is built or loaded), numpy, the standard library and
:mod:`rankcollapse.core`, :mod:`rankcollapse.engine`; never the experiments, verdicts or the book.
``FAMILIES`` is the registry of families (``model_type`` -> record), in the order lists name them.
"""

from rankcollapse.hf.extract import (Float64Casts, attention_io, embed, extract_layers,
                                     full_transformer_metrics, model_layer, model_mask, validate_attention,
                                     validate_attention_block, validate_norms)
from rankcollapse.hf.families import FAMILIES, Family, Norm, Rotary, family_of
from rankcollapse.hf.load import (PACKAGED_MAX_TOKENS, PACKAGED_MODELS, LoadedModel, ModelSource,
                                  check_model_spec, check_n_tokens, load_model, load_tokenizer, max_tokens,
                                  model_config, resolve_spec, save_dequantized)
from rankcollapse.hf.testing import offload_check, save_tiny_model, tiny_config, tiny_model

__all__ = ["FAMILIES", "Float64Casts", "PACKAGED_MAX_TOKENS", "PACKAGED_MODELS", "Family", "LoadedModel",
           "ModelSource", "Norm", "Rotary", "attention_io", "check_model_spec", "check_n_tokens", "embed",
           "extract_layers", "family_of", "full_transformer_metrics", "load_model", "load_tokenizer",
           "max_tokens", "model_config", "model_layer", "model_mask", "offload_check", "resolve_spec",
           "save_dequantized", "save_tiny_model", "tiny_config", "tiny_model", "validate_attention",
           "validate_attention_block", "validate_norms"]
