#!/usr/bin/env bash
# Command 2: the full test suite — unit, notebook (papermill) and browser tests of a freshly built site.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
start=$(date +%s)
echo "== building the book (full rebuild, warnings as errors)"
.venv/bin/jupyter-book build . --all -W --keep-going -q
echo "== book built in $(( $(date +%s) - start )) s; printing the PDF"
.venv/bin/python _ext/bookpdf.py
echo "== running the tests"
.venv/bin/python -m pytest tests --doctest-modules src/rankcollapse -p no:cacheprovider "$@"
