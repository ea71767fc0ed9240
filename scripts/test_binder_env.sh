#!/usr/bin/env bash
# Builds the Binder environment the way Binder does — binder/postBuild, run in the root of a copy of the
# repository (tracked and new files), in a fresh Python 3.11 venv — then executes one page in it at its
# defaults. Slow (several minutes, mostly pip), so it is not part of scripts/test.sh.
#   bash scripts/test_binder_env.sh [PAGE]          (default: book/theory/counterexample.md)
# TORCH_INDEX: where the torch wheel comes from; empty by default here (the default index, which holds the
# CPU wheel on this machine); Binder itself uses postBuild's default, PyTorch's CPU index.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
page=${1:-book/theory/counterexample.md}
PYTHON=${PYTHON:-python3.11}
work=$(mktemp -d /tmp/binder-env.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo" "$work/home" "$work/jupyter-data"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work/repo"

start=$(date +%s)
"$PYTHON" -m venv "$work/venv"
export PATH="$work/venv/bin:$PATH" HOME="$work/home" JUPYTER_DATA_DIR="$work/jupyter-data" TORCH_INDEX="${TORCH_INDEX-}"
unset PYTHONPATH VIRTUAL_ENV
(cd "$work/repo" && bash binder/postBuild)
installed=$(date +%s)
echo "== binder/postBuild: $(( installed - start )) s"

test -f "$HOME/.jupyter/labconfig/default_setting_overrides.json"
grep -q '"markdown": "Jupytext Notebook"' "$HOME/.jupyter/labconfig/default_setting_overrides.json"
(cd "$work/repo" && python -c "import sys; from pathlib import Path; import rankcollapse
from rankcollapse.book.runner import execute_page
assert Path(rankcollapse.__file__).is_relative_to(Path.cwd()), rankcollapse.__file__  # the copy's package
execute_page(sys.argv[1], {}, Path(sys.argv[2]))" "$page" "$work/executed.ipynb")
end=$(date +%s)
echo "== $page executed in the Binder environment: $(( end - installed )) s (total $(( end - start )) s)"
