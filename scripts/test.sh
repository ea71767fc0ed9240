#!/usr/bin/env bash
# Command 2: the full test suite — unit, notebook (papermill) and browser tests of a freshly built site.
#   bash scripts/test.sh           everything (CI): builds the book, prints the PDF, runs every test
#   bash scripts/test.sh --fast    the fast tier while developing: no build, no notebook, site or slow tests
# Any further arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
if [ "${1:-}" = "--fast" ]; then
  shift
  echo "== the fast tier (-m 'not slow and not notebook and not site'; the full suite: without --fast)"
  exec .venv/bin/python -m pytest tests/unit --doctest-modules src/rankcollapse -p no:cacheprovider \
    -m "not slow and not notebook and not site" "$@"
fi
start=$(date +%s)
echo "== building the book (full rebuild, warnings as errors)"
.venv/bin/jupyter-book build . --all -W --keep-going -q
echo "== book built in $(( $(date +%s) - start )) s; printing the PDF"
.venv/bin/python _ext/bookpdf.py
echo "== running the tests"
.venv/bin/python -m pytest tests --doctest-modules src/rankcollapse -p no:cacheprovider "$@"
