"""The batched SAN engine: stacks of self-attention layers, many configurations at once, metrics only.

A *SAN* (self-attention network, Dong et al.) keeps only the attention sublayers of a transformer. The
engine runs one stack of layers (randomly initialized, or extracted by :mod:`rankcollapse.hf.extract`) under
many configurations in one call: mask x temperature x norm x skip connection, all sharing the same X(0)
and the same weights. Samples are the batch axis, so each layer is two large matrix products (Q, K, V side
by side; W_O) around one fused attention call; configurations run one after another on the same chunk of
samples, and the first layer's projection, equal for all of them, is computed once. After every layer it
computes :func:`rankcollapse.core.metrics.all_metrics` (or ``norm_metrics``) and keeps only those, never the
hidden states. Chunks are sized to a memory budget and, on CPU, to the cache.

One layer, for configuration c (row-vector convention, tokens are rows):

    Y = Attn_c(X) + skip_c * X,     X' = Norm_c(Y),
    Attn_c(X) = concat_h softmax_{mask_c}(Q_h K_h^T * scale_c + bias_h) V_h  W_O + b_O.

The modules, in the order a reader meets them:

* :mod:`~rankcollapse.engine.layers` -- :class:`AttentionLayer` (one layer's weights and own norm, post- or
  pre-norm) and :func:`random_layers`;
* :mod:`~rankcollapse.engine.attention` -- Attn_c: joint Q/K/V weights, logit scale and bias, heads,
  QK-norm and RoPE, the fused masked softmax (:func:`attend`, :func:`attention_bias`);
* :mod:`~rankcollapse.engine.exact` -- exact tracking of pure attention's mu far below the rounding floor
  (metric :data:`EXACT_METRIC`);
* :mod:`~rankcollapse.engine.run` -- :class:`SANConfig` and :func:`config_grid`, one layer with skip and
  norm (:func:`attention_sublayer`), the chunk sizing and the run loop :func:`run_san` -> :class:`SANResult`;
  ``run_san(attention_stats=True)`` also splits each layer's change of mu into the value maps' gain and
  attention's contraction and records the attention matrices' statistics
  (:data:`rankcollapse.core.metrics.ATTENTION_METRIC_NAMES`); ``run_san(settle=k)`` stops a configuration on
  a chunk once it has sat on its rounding floor for k layers (metric :data:`SETTLED_METRIC`).

Everyone outside the engine imports these names from this package, never from a submodule:

>>> import torch
>>> from rankcollapse import engine
>>> layers = engine.random_layers(2, 8, 2, seed=0)  # 2 layers, d_model 8, 2 heads
>>> x0 = torch.randn(3, 6, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
>>> result = engine.run_san(x0, layers, engine.config_grid(masks=(("causal", None),), norms=("none", "unit")))
>>> result.metrics["mu"].shape  # [layer + 1, config, sample]
torch.Size([3, 2, 3])
>>> result.metrics[engine.EXACT_METRIC][-1].tolist()  # pure attention (norm none) is tracked exactly
[[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]

Imports only torch, the standard library and :mod:`rankcollapse.core`.
Used by: the experiments behind Figs. 2-4, the response experiments and ``benchmarks/bench_san.py``.
"""

from rankcollapse.engine.attention import attend, attention_bias
from rankcollapse.engine.exact import EXACT_METRIC
from rankcollapse.engine.layers import INIT_NAMES, NORM_POSITIONS, AttentionLayer, random_layers
from rankcollapse.engine.run import (CPU_CHUNK_BYTES, SETTLED_METRIC, SANConfig, SANResult, attention_flop,
                                     attention_sublayer, bytes_per_sample, config_grid, resolve_device,
                                     run_san, samples_per_chunk)

__all__ = ["CPU_CHUNK_BYTES", "EXACT_METRIC", "INIT_NAMES", "NORM_POSITIONS", "SETTLED_METRIC",
           "AttentionLayer", "SANConfig", "SANResult", "attend", "attention_bias", "attention_flop",
           "attention_sublayer", "bytes_per_sample", "config_grid", "random_layers", "resolve_device",
           "run_san", "samples_per_chunk"]
