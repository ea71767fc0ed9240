"""The verdicts: ``rules`` (a curve's verdict — collapses, stable, decays slowly, on the floor — and a
claim's, every threshold a published constant) and ``claims`` (the claims tables' rows and their Markdown).
Reads the experiments' tidy tables; draws nothing.
"""

__all__ = ["claims", "rules"]
