"""The lowest layer: masks as graphs, the metrics of collapse, the norms, parameter checks and statistics.

``masks`` (the attention masks as directed graphs: builders, centres, radius), ``metrics`` (μ, μ/‖X‖_F,
rank, σ_min, mean |cos|, rounding floors), ``norms`` (the paper's D, RMSNorm, LayerNorm, trained norms),
``checks`` (one ValueError per bad parameter), ``stats`` (every fit, band, correlation and interval).
Imports only torch, numpy and the standard library; knows nothing of models, experiments or pages.
"""

__all__ = ["checks", "masks", "metrics", "norms", "stats"]
