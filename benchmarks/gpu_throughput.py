"""The SAN engine's throughput on a GPU at the widths of the large models (the large-models page's estimates).

    python benchmarks/gpu_throughput.py [--samples 64] [--layers 4] [--out benchmarks/throughput.json]

For each width (ModernBERT-large 1024, GPT-OSS-20B 2880, Qwen2.5-7B and Gemma-2-9B 3584, Mistral-7B 4096)
and dtype, random layers of that width run the benchmark's eight configurations (``bench_san.configs``:
masks complete, causal, sliding window 8, causal sliding window 8 x norms none, layernorm) at the
benchmark's 128 tokens with the mu-path metrics, after one warm-up run; the sample.layer.configuration per
second are merged into ``--out`` under ``<GPU name>|<dtype>|<d_model>``, the key
:func:`rankcollapse.experiments.plan.measured_throughput` reads. Needs CUDA.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_san import N_TOKENS, THROUGHPUT_FILE, configs  # noqa: E402

from rankcollapse.engine import attention_flop, random_layers, run_san  # noqa: E402
from rankcollapse.experiments.plan import device_kind  # noqa: E402

# d_model -> heads (ModernBERT-large, GPT-OSS-20B, Qwen2.5-7B, Mistral-7B)
WIDTHS = {1024: 16, 2880: 64, 3584: 28, 4096: 32}


def measure(d_model: int, n_heads: int, dtype: torch.dtype, n_samples: int, n_layers: int) -> float:
    """sample.layer.configuration per second of ``run_san`` on the GPU (after one warm-up run)."""
    layers = random_layers(n_layers, d_model, n_heads, dtype=dtype)
    x0 = torch.randn(n_samples, N_TOKENS, d_model, generator=torch.Generator().manual_seed(1), dtype=dtype)
    names = ("mu", "relative_mu", "norm")
    run_san(x0[:2], layers, configs(), dtype=dtype, device="cuda", metric_names=names)
    torch.cuda.synchronize()
    start = time.perf_counter()
    run_san(x0, layers, configs(), dtype=dtype, device="cuda", metric_names=names)
    torch.cuda.synchronize()
    return n_samples * n_layers * len(configs()) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=THROUGHPUT_FILE)
    args = parser.parse_args()
    kind = device_kind(torch.device("cuda"))
    table = json.loads(args.out.read_text()) if args.out.is_file() else {}
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    print("| d_model | dtype | sample.layer.config/s | attention TFLOP/s |\n|---|---|---|---|")
    for dtype in (torch.float32, torch.float64):
        for d_model, n_heads in WIDTHS.items():
            rate = measure(d_model, n_heads, dtype, args.samples, args.layers)
            name = str(dtype).removeprefix("torch.")
            print(f"| {d_model} | {name} | {rate:.1f} | "
                  f"{rate * attention_flop(d_model, N_TOKENS) / 1e12:.2f} |", flush=True)
            table[f"{kind}|{name}|{d_model}"] = {"units_per_s": round(rate, 2), "samples": args.samples,
                                                 "measured_utc": stamp, "n_tokens": N_TOKENS,
                                                 "torch": torch.__version__,
                                                 "threads": torch.get_num_threads()}
    args.out.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
