"""The small systems of the theorem pages: ``dynamics`` (masked attention with and without LayerNorm,
random weights, Theorem 1's bound, the linear case) and ``counterexample`` (the two-token counterexample of
Fig. 1 and the equilibria of every rank, rotated, along a path of value matrices) and ``rates`` (the complete
mask tracked exactly below the floor, exponential against doubly exponential decay, exact Jordan ranks).
Imports only torch, numpy and :mod:`rankcollapse.core`.
"""

__all__ = ["counterexample", "dynamics", "rates"]
