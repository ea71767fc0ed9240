"""A figure's caption words are the same in every process: the groups of coinciding curves are named in
legend order, never in the order of a set of strings (which follows Python's per-process hash seed)."""

import os
import subprocess
import sys

import pytest

SCRIPT = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from rankcollapse.book.plotting import overlap
fig, ax = plt.subplots()
x = np.arange(1, 13)
for pair, scale in (("de", 1.0), ("ab", 1e-3), ("c", 1e-6)):  # two coinciding pairs and a lone curve
    for label in pair:
        ax.semilogy(x, scale * 0.5 ** x, label=label)
print(overlap.coincidence_words(fig))
"""


def _words(seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.slow
def test_coinciding_groups_are_named_in_legend_order_whatever_the_hash_seed():
    words = {_words(seed) for seed in range(6)}
    assert len(words) == 1, words
    (text,) = words
    assert text.index("d and e") < text.index("a and b")  # the legend's order: d, e first
