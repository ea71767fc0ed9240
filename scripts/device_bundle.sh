#!/usr/bin/env bash
# Writes the device bundle of Appendix G.1 (both parts) and the skip-connection page's deep part at the paper
# profile (3000 samples x 128 tokens x 128 layers, all-mpnet-base-v2's X(0)) into .device/ of the checkout that
# travels to the GPU machine (ROOT, default the repository this runs in), ignored by git there.
# The working tree travels with every call and may hold at most 64 MiB: the bundle itself (.device/bundle, with a
# copy of the package and scripts/device_run.sh) holds the samples that fit beside the tracked tree, and the
# token ids and embedding rows the larger sample counts add go to .device/extra, to travel in a first, short call
# to the same machine (scripts/device_run.sh --stand-in). Needs MPNet (requirements-models-extra.txt).
# Usage, from the repository root:  ROOT=/path/to/checkout bash scripts/device_bundle.sh
set -euo pipefail
ROOT=${ROOT:-$(git rev-parse --show-toplevel)}
EXCLUDE=$(git -C "$ROOT" rev-parse --git-path info/exclude)
case $EXCLUDE in /*) ;; *) EXCLUDE=$ROOT/$EXCLUDE ;; esac
grep -qx '/.device/' "$EXCLUDE" || echo '/.device/' >> "$EXCLUDE"
rm -rf "$ROOT/.device/bundle" "$ROOT/.device/extra"
rankcollapse bundle appendix_g1 skip_connections:deep --profile paper --samples 3000 2048 1536 1024 512 \
  --output "$ROOT/.device/bundle" --extra "$ROOT/.device/extra" --code --fit-mib "${FIT_MIB:-63.5}"
cp scripts/device_run.sh benchmarks/engine_throughput.py "$ROOT/.device/bundle/"
du -sh "$ROOT/.device/bundle" "$ROOT/.device/extra"
