"""The verdicts: ``rules`` (a curve's verdict — collapses, stable, decays slowly, on the floor — and a
claim's, every threshold a published constant gathered in ``rules.Thresholds``), ``effects`` (a configuration
against its baseline on the same samples: a ratio with its paired bootstrap interval), ``robustness`` (a
verdict over a grid of the thresholds: robust or borderline), ``claims`` (the claims tables' rows; the book
renders them) and ``limits`` (where a collapse goes: to zero or to a common nonzero vector).
Reads the experiments' tidy tables and per-sample values; draws nothing.
"""

__all__ = ["claims", "effects", "limits", "robustness", "rules"]
