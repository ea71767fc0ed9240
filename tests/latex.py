"""Compiling BibTeX entries with a real BibTeX and LaTeX (Debian's texlive-latex-base, which
scripts/setup.sh installs): the one check that a citation a reader copies compiles."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS = ("pdflatex", "bibtex")
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
# Skipped only on a machine without texlive; CI (scripts/setup.sh, the GitHub workflow) installs it, and there
# (CI set) a missing tool fails instead.
needs_latex = pytest.mark.skipif(
    bool(MISSING) and not os.environ.get("CI"),
    reason=f"{' and '.join(MISSING)} not installed (apt-get install texlive-latex-base, as "
           f"scripts/setup.sh does)")

_DOCUMENT = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\begin{document}
\nocite{*}
\bibliographystyle{plain}
\bibliography{entries}
\end{document}
"""


def compile_bibtex(entries: list[str], folder: Path) -> str:
    """Run pdflatex, bibtex, pdflatex on a document citing every entry (style ``plain``); the final LaTeX
    log. Fails the calling test with the tool's own message when any run fails, warns or drops a glyph."""
    (folder / "entries.bib").write_text("\n\n".join(entries) + "\n", encoding="utf-8")
    (folder / "doc.tex").write_text(_DOCUMENT)
    for command in (["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc"], ["bibtex", "doc"],
                    ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc"]):
        run = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
        output = run.stdout + run.stderr
        assert run.returncode == 0, f"{' '.join(command)} failed:\n{output[-3000:]}"
        if command[0] == "bibtex":
            assert "Warning--" not in output and "error message" not in output, f"bibtex:\n{output[-3000:]}"
    log = (folder / "doc.log").read_text(errors="replace")
    assert "Missing character" not in log, f"a character has no glyph:\n{log[-3000:]}"
    assert (folder / "doc.bbl").read_text().count(r"\bibitem") == len(entries)
    return log
