"""The verdicts: ``rules`` (a curve's verdict — collapses, stable, decays slowly, on the floor — and a
claim's, every threshold a published constant), ``claims`` (the claims tables' rows and their Markdown)
and ``limits`` (where a collapse goes: to zero or to a common nonzero vector).
Reads the experiments' tidy tables; draws nothing.
"""

__all__ = ["claims", "limits", "rules"]
