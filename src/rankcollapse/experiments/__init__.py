"""The experiments: ``config`` (an :class:`~rankcollapse.experiments.config.ExperimentConfig` and the
parameters it is stored under), ``models`` (the model and text samples a sweep loads, cached, and their
identities), ``table`` (the tidy per-layer table of a sweep: summary, check, numbers), ``data`` (real
Wikipedia text samples), ``sample_values`` (each sample's own values, beside the table), ``sweep`` (units of
samples, settled work), ``checkpoints`` (finished units kept, so a run resumes), ``ranks`` (units over
torchrun's processes), ``plan`` (a sweep's size, expected time and memory), ``store`` (the verified results
store), ``store_summary`` (the table of every stored result), ``store_upgrade`` (an earlier version's store
upgraded in place), ``provenance`` (hashes, commit, atomic writes) and ``bundle`` (device bundles: an
initialized sweep's X(0) ingredients, run without the model). Decides no verdict and knows no page beyond the
name it stores a result under.
"""

__all__ = ["bundle", "checkpoints", "config", "data", "models", "plan", "provenance", "ranks",
           "sample_values", "store", "store_summary", "store_upgrade", "sweep", "table"]
