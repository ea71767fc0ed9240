"""The SAN engine's throughput on one configuration, per dtype: what a device run reports beside its sweeps.

    python benchmarks/engine_throughput.py [--device cuda] [--dtypes float32 float64] [--samples 512]
        [--layers 8] [--out FILE]

Complete mask, the paper's D, no exact tracking, at MPNet's width (768, 12 heads) and 128 tokens:
sample.layers per second and the attention's TFLOP/s (``rankcollapse.engine.attention_flop``), beside the
device's own matrix product of the projections' shape: printed per dtype, and written to ``--out`` as JSON.
scripts/device_bundle.sh copies this file into the bundle and scripts/device_run.sh runs it before
the bundle's sweeps (it was ``rankcollapse.experiments.bundle.engine_throughput``, whose report carried it as
``"engine"``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from rankcollapse.engine import SANConfig, attention_flop, random_layers, resolve_device, run_san
from rankcollapse.experiments import plan


def engine_throughput(device: str, dtype: str, n_samples: int = 512, n_layers: int = 8) -> dict[str, float]:
    """The engine's speed on one configuration (complete mask, the paper's D, no exact tracking) at MPNet's
    width and 128 tokens: sample.layers per second and the attention's TFLOP/s (engine.attention_flop), beside
    the device's own matrix product of the projections' shape ([sample * token, d] @ [d, 3d], best of 3)."""
    d, tokens, dt = 768, 128, getattr(torch, dtype)
    layers = random_layers(n_layers, d, 12, seed=0)
    x0 = torch.randn(n_samples, tokens, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    config = (SANConfig(norm="unit", exact_mu=False),)
    run_san(x0[:8], layers[:1], config, dtype=dt, device=device)  # warm-up: kernels, cuBLAS handles
    _sync(device)
    start = time.perf_counter()
    run_san(x0, layers, config, dtype=dt, device=device, memory_budget=plan.memory_budget(),
            metric_names=("mu", "norm"))
    _sync(device)
    seconds = time.perf_counter() - start
    rate = n_samples * n_layers / seconds
    a = torch.randn(n_samples * tokens, d, dtype=dt, device=device)
    b = torch.randn(d, 3 * d, dtype=dt, device=device)
    best = float("inf")
    for _ in range(3):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return {"sample_layers_per_s": rate, "tflop_per_s": rate * attention_flop(d, tokens) / 1e12,
            "seconds": seconds, "matmul_tflop_per_s": 2 * a.shape[0] * d * 3 * d / best / 1e12}


def _sync(device: str) -> None:
    if resolve_device(device).type == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None, help="JSON file to write")
    args = parser.parse_args(argv)
    report = {"device": args.device, "torch": torch.__version__, "engine": {}}
    if resolve_device(args.device).type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(resolve_device(args.device))
    for dtype in args.dtypes:
        report["engine"][dtype] = engine_throughput(args.device, dtype, args.samples, args.layers)
        print(f"{dtype}: {report['engine'][dtype]}", flush=True)
    if args.out is not None:  # the whole report, for the device's $OUT
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
