"""The experiments: ``config`` (an :class:`~rankcollapse.experiments.config.ExperimentConfig` and the tidy
table of a sweep), ``data`` (real Wikipedia text samples), ``sweep`` (units of samples, checkpoints,
torchrun ranks, settled work), ``plan`` (a sweep's size, expected time and memory), ``store`` (the verified results store) and ``provenance`` (hashes, commit,
atomic writes). Decides no verdict and knows no page beyond the name it stores a result under.
"""

__all__ = ["config", "data", "provenance", "plan", "samples", "store", "sweep"]
