#!/usr/bin/env bash
# Command 1: build the whole book into a static HTML site (_build/html), warnings as errors.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
start=$(date +%s)
.venv/bin/jupyter-book build . --all -W --keep-going
echo "== book built in $(( $(date +%s) - start )) s; open: file://$PWD/_build/html/index.html"
echo "   or serve it: .venv/bin/python -m http.server 8000 --bind 127.0.0.1 -d _build/html  (then http://127.0.0.1:8000)"
