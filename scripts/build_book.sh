#!/usr/bin/env bash
# Command 1: build the whole book into a static HTML site (_build/html), warnings as errors, and print it
# as one PDF into the site (_build/html/rankcollapse-companion.pdf).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
start=$(date +%s)
.venv/bin/jupyter-book build . --all -W --keep-going
echo "== book built in $(( $(date +%s) - start )) s; printing the PDF"
.venv/bin/python _ext/bookpdf.py
echo "== open: file://$PWD/_build/html/index.html"
echo "   or serve it: .venv/bin/python -m http.server 8000 --bind 127.0.0.1 -d _build/html  (then http://127.0.0.1:8000)"
