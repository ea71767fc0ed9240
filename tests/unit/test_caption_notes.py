"""A figure's caption stays short and its computed notes go in a collapsed block under it (Fig. 9.1's caption
held ~5,000 characters of them); the notes are the same in every process: the groups of coinciding curves are
named in legend order, never in the order of a set of strings (which follows Python's per-process hash
seed)."""

import os
import re
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from rankcollapse.book.plotting import overlap

FIGURE = re.compile(r"```\{glue:figure\} (\w+)\n(.*?)```\n", re.S)
MAX_CAPTION = 330  # characters as a reader sees them (a glued number counted as 5, a formula as 4)


def _rendered(caption: str) -> str:
    """A caption's words about as the page shows them: glued values and references as short words."""
    caption = re.sub(r"\{glue:text\}`[^`]*`", "0.123", caption)
    caption = re.sub(r"\{ref\}`([^`<]*)(<[^>]*>)?`", r"\1", caption)
    return " ".join(re.sub(r"\$[^$]*\$", "xxxx", caption).split())


def _figures(repo_root):
    for page in sorted((repo_root / "book").rglob("*.md")):
        text = page.read_text()
        for match in FIGURE.finditer(text):
            caption = "\n".join(line for line in match.group(2).splitlines() if not line.startswith(":"))
            yield page.name, match.group(1), caption, text[match.end():]


def test_captions_are_short_and_the_notes_follow_their_figure_collapsed(repo_root):
    figures = list(_figures(repo_root))
    assert len(figures) > 40
    for page, key, caption, after in figures:
        assert "_notes`" not in caption, f"{page}: the caption of {key} pastes notes"
        length = len(_rendered(caption))
        assert length <= MAX_CAPTION, f"{page}: the caption of {key} is {length} characters"
        pasted = re.findall(r"\{glue:md\} (\w+_notes)", after.split("```{glue:figure}")[0])
        assert pasted in ([], [f"{key}_notes"]), f"{page}: {key} is followed by notes {pasted}"


def test_the_notes_block_is_collapsed_and_empty_without_notes():
    fig, ax = plt.subplots()
    x = np.arange(1, 13)
    ax.semilogy(x, 0.5 ** x, label="a")
    assert overlap.notes_block(fig) == ""
    ax.semilogy(x, 0.5 ** x, label="b")
    block = overlap.notes_block(fig)
    assert block.startswith('<details class="figure-notes">\n<summary>') and block.endswith("</details>")
    assert "a and b in the panel" in block
    plt.close(fig)

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
