#!/usr/bin/env bash
# Runs a device bundle (scripts/device_bundle.sh) on a GPU machine that has python3 with PyTorch and
# transformers but no package index: this script is copied into the bundle folder and runs the package copy
# beside it. Results land in a store under /tmp and, as each one is done, in $OUT/results.tar.gz
# (results/<page>/<key>.{csv,json,samples.npz}, to unpack at the repository root; over 15 MiB it comes in parts
# results.tar.gz.part-00, -01, ...: cat results.tar.gz.part-* | tar xz); timings and the engine's
# timings in $OUT/device_report.json, the engine's throughput (benchmarks/engine_throughput.py, copied into
# the bundle) in $OUT/engine_throughput.json.
#   first call (carry the bundle's src, bundle.json, this script and .device/extra):
#     EXTRA=.device/extra bash .device/bundle/device_run.sh --stand-in --dtypes float32 float64
#     keeps the extra rows on the machine (/tmp/rankcollapse-extra) and tries every run at a tiny scale on CUDA
#   second call, to the same (still warm) machine (carry .device/bundle):
#     bash .device/bundle/device_run.sh --dtypes float32 float64 --budget-s 420
#     runs every bundled sweep at the largest sample count that fits the budget (3000 with the extra rows)
# Arguments after these go to python -m rankcollapse.book.cli_bundle (--samples, --probe ...); ENGINE_ARGS go
# to the engine timing (default "--dtypes float32 float64"; e.g. "--samples 1024 --layers 8"), ENGINE=0 skips it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
KEEP=/tmp/rankcollapse-extra
OUT=${OUT:-/tmp/rankcollapse-device-out}
mkdir -p "$OUT"
export PYTHONPATH=$HERE/src PYTHONUNBUFFERED=1 RANKCOLLAPSE_MEMORY_BUDGET=${RANKCOLLAPSE_MEMORY_BUDGET:-17179869184}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv || true
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
if [ -n "${EXTRA:-}" ] && [ -d "$EXTRA" ]; then mkdir -p "$KEEP" && cp "$EXTRA"/* "$KEEP"/ && ls -l "$KEEP"; fi
if [ -f "$HERE/engine_throughput.py" ] && [ "${ENGINE:-1}" != 0 ]; then
  # shellcheck disable=SC2086  # ENGINE_ARGS are words
  python3 "$HERE/engine_throughput.py" --device cuda ${ENGINE_ARGS:---dtypes float32 float64} \
    --out "$OUT/engine_throughput.json"
fi
python3 -m rankcollapse.book.cli_bundle "$HERE" --extra "$KEEP" --store /tmp/rankcollapse-store \
  --device cuda --archive "$OUT/results.tar.gz" --report "$OUT/device_report.json" "$@"
