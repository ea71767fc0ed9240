"""Benchmark the SAN engine against the straightforward way, a naive loop and the machine's matmul peak.

    nice .venv/bin/python benchmarks/bench_san.py --samples 64 --dims bert-base minilm

For each model size (``bert-base``: N=128, d=768, 12 heads; ``minilm``: N=128, d=384, 12 heads) and each
dtype of ``--dtypes`` (float32 and float64), 12 layers x 8 configurations (4 masks x {no norm, LayerNorm}) x
``--samples`` random X(0):

* **engine**: ``rankcollapse.engine.run_san`` (metrics mu, mu/||X||, ||X|| after every layer), the
  pure-attention configurations tracked exactly (the default; the complete mask stays direct);
* **engine-direct**: the same with exact tracking off (``exact_mu=False``): the script prints the overhead;
* **engine+all**: the same with every metric (rank and sigma_min from Gram eigenvalues, SVD where unresolved;
  pairwise cosines), ``--all-samples``;
* **straightforward** (Dong et al.'s way): per configuration, a Hugging Face eager BertModel forward with
  the MLP and the skip removed (the mask as a 4-D additive mask), ``output_hidden_states`` and
  ``output_attentions`` for all samples, the same metrics computed afterwards; run twice, with every
  sample in one forward and in forwards of ``--batch`` samples (its faster batching), and the engine's
  speed-up is quoted against the faster of the two;
* **naive**: a per-sample, per-configuration loop over the engine's own layer (a few samples only);
* **matmul**: ``[4096, d] @ [d, d]`` in the method's dtype, the machine's dense throughput (best of 5 timings
  of 20 products), measured in each method's process just before its run, because a shared host's speed
  drifts by up to 2x over minutes; each row's share is of its own reference.

Throughput is sample x layer x configuration per second; attention GFLOP/s counts the projections
(8 N d^2 per layer) and the two N x N products (4 N^2 d). Peak memory is each method's peak resident set
size, measured in a fresh subprocess (so methods do not share a peak). The engine and the straightforward
way run the same weights on the same X(0), and their mu curves are compared (float32 agreement).

Each (size, dtype) ends with one line: the engine's share of its own matmul reference and its speed-up over
the faster straightforward run, against the goals (>= 85 % of matmul, >= 1.3x at BERT-base). The engine's
throughput is merged into ``benchmarks/throughput.json`` under ``<device>|<dtype>|<d_model>``, where
:mod:`rankcollapse.experiments.sweep` reads it to predict a run's wall time before it starts.

Expected runtime on 2 shared CPU cores: about 30 minutes with the defaults (the straightforward way
dominates); about 8 minutes idle with ``--samples 16``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from rankcollapse.core import metrics
from rankcollapse.core import norms
from rankcollapse.engine import (SANConfig, attend, attention_bias, attention_flop, config_grid,
                                 random_layers, run_san)
from rankcollapse.hf.extract import extract_layers

DIMS = {"bert-base": (768, 12), "minilm": (384, 12)}
MASKS = (("complete", None), ("causal", None), ("sliding_window", 8), ("causal_sliding_window", 8))
NORMS = ("none", "layernorm")
N_TOKENS = 128
THROUGHPUT_FILE = Path(__file__).resolve().parent / "throughput.json"  # read by rankcollapse.experiments.plan


def configs(exact_mu: bool = True) -> tuple[SANConfig, ...]:
    return config_grid(masks=MASKS, norms=NORMS, exact_mu=exact_mu)


def hf_model(d_model: int, n_heads: int, n_layers: int, seed: int = 0):
    """A randomly initialized BertModel (eager), MLP and skip removed as in Dong et al.'s SAN ablation."""
    import transformers

    # HF initialises through the global RNG; the benchmark is a script, not the package
    torch.manual_seed(seed)
    config = transformers.BertConfig(hidden_size=d_model, num_attention_heads=n_heads,
                                     num_hidden_layers=n_layers, intermediate_size=4 * d_model, vocab_size=8)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager",
                                               add_pooling_layer=False).eval()
    model.embeddings.forward = lambda **kwargs: kwargs["inputs_embeds"]  # X(0) is given directly
    for layer in model.encoder.layer:
        layer.feed_forward_chunk = lambda attention_output: attention_output  # no MLP, no second skip
    return model


def set_norm(model, norm: str) -> None:
    """The attention output becomes norm(dense(context)): no skip, no affine LayerNorm."""
    for layer in model.encoder.layer:
        out = layer.attention.output
        out.forward = lambda h, inp, out=out: norms.apply_norm(out.dense(h), norm)


def x0_for(model, n_samples: int, seed: int = 1) -> torch.Tensor:
    """Random X(0) in the model's dtype, shared by every method.  Shapes: -> [sample, token, d_model]."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n_samples, N_TOKENS, model.config.hidden_size, generator=gen).to(model.dtype)


def run_engine(model, x0, all_metrics: bool, exact_mu: bool = True) -> dict[str, torch.Tensor]:
    layers = extract_layers(model)
    names = None if all_metrics else ("mu", "relative_mu", "norm")
    return run_san(x0, layers, configs(exact_mu), dtype=x0.dtype, metric_names=names).metrics


@torch.no_grad()
def run_straightforward(model, x0, batch: int | None = None) -> dict[str, torch.Tensor]:
    """Per configuration: HF forwards of ``batch`` samples (None: all at once), all hidden states and
    attentions of all samples kept, then the metrics."""
    mus, norms = [], []
    for config in configs():
        set_norm(model, config.norm)
        mask = config.build_mask(N_TOKENS)
        additive = (torch.zeros(N_TOKENS, N_TOKENS, dtype=x0.dtype)
                    .masked_fill(~mask, torch.finfo(x0.dtype).min))
        outs = [model(inputs_embeds=x, attention_mask=additive[None, None].expand(x.shape[0], 1, -1, -1),
                      output_hidden_states=True, output_attentions=True) for x in x0.split(batch or len(x0))]
        # per layer [sample, token, d]
        hidden = [torch.cat(h) for h in zip(*(out.hidden_states for out in outs))]
        mus.append(torch.stack([metrics.mu(h) for h in hidden]))  # [layer + 1, sample]
        norms.append(torch.stack([metrics.frobenius_norm(h) for h in hidden]))  # [layer + 1, sample]
    return {"mu": torch.stack(mus, dim=1), "norm": torch.stack(norms, dim=1)}  # [layer + 1, config, sample]


@torch.no_grad()
def run_naive(model, x0) -> None:
    layers = [la.to(x0.dtype) for la in extract_layers(model)]
    for config in configs():
        mask = config.build_mask(N_TOKENS)  # [token, token]
        for s in range(x0.shape[0]):
            x = x0[s][None]  # [1, token, d_model]
            for layer in layers:
                bias = attention_bias(layer, mask, x0.dtype)
                x = norms.apply_norm(attend(x, layer, bias, layer.scaling), config.norm)
                metrics.mu(x)


def matmul_gflops(d_model: int, dtype: torch.dtype = torch.float32, repeats: int = 20,
                  trials: int = 5) -> float:
    """The best of ``trials`` timings of ``repeats`` products [4096, d] @ [d, d]: the machine's dense peak."""
    a = torch.randn(4096, d_model, dtype=dtype)
    b = torch.randn(d_model, d_model, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(trials):
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * 4096 * d_model**2 * repeats / best / 1e9


def one(method: str, dims: str, n_samples: int, n_layers: int, batch: int, dtype: str = "float32") -> dict:
    """Run one method in this process and report time, throughput and peak RSS (called in a subprocess)."""
    d_model, n_heads = DIMS[dims]
    model = hf_model(d_model, n_heads, n_layers).to(metrics.DTYPES[dtype])
    x0 = x0_for(model, n_samples)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # measured next to the run: the machine's speed drifts on a shared host
    peak = matmul_gflops(d_model, x0.dtype)
    start = time.perf_counter()
    result = {"engine": lambda: run_engine(model, x0, False),
              "engine+all": lambda: run_engine(model, x0, True),
              "engine-direct": lambda: run_engine(model, x0, False, exact_mu=False),
              "straightforward": lambda: run_straightforward(model, x0),
              "straightforward-batched": lambda: run_straightforward(model, x0, batch),
              "naive": lambda: run_naive(model, x0)}[method]()
    seconds = time.perf_counter() - start
    units = n_samples * n_layers * len(configs())
    label = f"straightforward, batches of {batch}" if method == "straightforward-batched" else method
    report = {"method": label, "dims": dims, "dtype": dtype, "samples": n_samples, "layers": n_layers,
              "seconds": seconds, "units_per_s": units / seconds,
              "gflops": units * attention_flop(d_model, N_TOKENS) / seconds / 1e9, "matmul_gflops": peak,
              "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
              "rss_before_gib": base_rss / 2**20}
    if result is not None:
        report["mu"], report["norm"] = result["mu"].tolist(), result["norm"].tolist()
    return report


def spawn(method: str, dims: str, n_samples: int, n_layers: int, batch: int = 32,
          dtype: str = "float32") -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", method, "--dims", dims,
                          "--samples", str(n_samples), "--layers", str(n_layers), "--batch", str(batch),
                          "--dtypes", dtype],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def device_kind() -> str:
    """The key of this machine's rows in THROUGHPUT_FILE: the GPU's name, else ``cpu-<cores>``."""
    from rankcollapse.experiments.plan import device_kind as kind

    return kind(torch.device("cpu"))


def record_throughput(rows: list[dict]) -> None:
    """Merge the engine's rows into THROUGHPUT_FILE: sample.layer.config per second per
    device|dtype|d_model."""
    table = json.loads(THROUGHPUT_FILE.read_text()) if THROUGHPUT_FILE.is_file() else {}
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for r in rows:
        key = f"{device_kind()}|{r['dtype']}|{DIMS[r['dims']][0]}"
        table[key] = {"units_per_s": round(r["units_per_s"], 2), "samples": r["samples"],
                      "measured_utc": stamp, "n_tokens": N_TOKENS, "torch": torch.__version__,
                      "threads": torch.get_num_threads()}
    text = json.dumps(dict(sorted(table.items())), indent=1) + "\n"
    tmp = THROUGHPUT_FILE.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(THROUGHPUT_FILE)


def main() -> None:
    parser = argparse.ArgumentParser(description="SAN engine benchmark")
    parser.add_argument("--dims", nargs="+", default=list(DIMS), choices=list(DIMS))
    parser.add_argument("--samples", type=int, default=256, help="samples for engine and straightforward")
    parser.add_argument("--batch", type=int, default=32,
                        help="samples per forward, batched straightforward way")
    parser.add_argument("--all-samples", type=int, default=8, help="samples for the engine with every metric")
    parser.add_argument("--naive-samples", type=int, default=4, help="samples for the naive loop")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--memory-samples", type=int, nargs="*", default=[8, 32, 128],
                        help="sample counts for the engine's memory scan (16 configs, 1 layer)")
    parser.add_argument("--memory-layers", type=int, nargs="*", default=[1, 12, 48],
                        help="depths for the engine's memory scan (at the smallest --memory-samples)")
    parser.add_argument("--memory-only", action="store_true", help="run only the memory scan")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"], choices=list(metrics.DTYPES))
    parser.add_argument("--no-record", action="store_true", help=f"do not update {THROUGHPUT_FILE.name}")
    parser.add_argument("--no-extras", action="store_true", help="skip the engine+all and naive rows")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        if args.one == "memory":
            report = memory_scan(args.dims[0], args.samples, args.layers, args.dtypes[0])
        else:
            report = one(args.one, args.dims[0], args.samples, args.layers, args.batch, args.dtypes[0])
        print(json.dumps(report))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {device_kind()}, N={N_TOKENS}, "
          f"{args.layers} layers x {len(configs())} configs")
    print("| dims | dtype | method | samples | s | sample.layer.config/s | attention GFLOP/s "
          "| % of matmul GFLOP/s | peak RSS GiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    verdicts, engines = [], []
    for dims, dtype in [] if args.memory_only else [(d, t) for d in args.dims for t in args.dtypes]:
        extras = ([spawn("engine+all", dims, args.all_samples, args.layers),
                   spawn("naive", dims, args.naive_samples, args.layers)]
                  if dtype == "float32" and not args.no_extras else [])
        rows = [spawn("engine", dims, args.samples, args.layers, dtype=dtype),
                spawn("straightforward", dims, args.samples, args.layers, dtype=dtype),
                spawn("straightforward-batched", dims, args.samples, args.layers, args.batch, dtype),
                spawn("engine-direct", dims, args.samples, args.layers, dtype=dtype), *extras]
        for r in rows:
            print(f"| {dims} | {r['dtype']} | {r['method']} | {r['samples']} | {r['seconds']:.1f} | "
                  f"{r['units_per_s']:.1f} | {r['gflops']:.1f} | "
                  f"{100 * r['gflops'] / r['matmul_gflops']:.0f}% of "
                  f"{r['matmul_gflops']:.0f} | {r['peak_rss_gib']:.2f} |", flush=True)
        engine, fastest = rows[0], max(rows[1:3], key=lambda r: r["units_per_s"])
        eng, hf = torch.tensor(engine["mu"]), torch.tensor(fastest["mu"])
        rel = ((eng - hf).abs() / torch.tensor(fastest["norm"])).max().item()
        share, speedup = (engine["gflops"] / engine["matmul_gflops"],
                          engine["units_per_s"] / fastest["units_per_s"])
        # exact tracking of the pure-attention configurations
        overhead = engine["seconds"] / rows[3]["seconds"] - 1
        # goal <= 1.5x
        every = f"{engine['units_per_s'] / extras[0]['units_per_s']:.2f}x" if extras else "not run"
        verdicts.append(f"| {dims} | {dtype} | {100 * share:.0f}% | {speedup:.2f}x ({fastest['method']}) | "
                        f"{rel:.1e} | {overhead:+.0%} | {every} |")
        engines.append(engine)
    if verdicts:
        print("\n| dims | dtype | engine share of matmul (goal >= 85 %) | speed-up over the faster HF way "
              "(goal >= 1.3x at bert-base) | max abs(mu difference) / norm | exact tracking's cost "
              "| every metric's time over the mu path's (goal <= 1.5x) |\n|---|---|---|---|---|---|---|")
        print("\n".join(verdicts))
    if engines and not args.no_record:
        record_throughput(engines)
    # run_san keeps one chunk of samples of one configuration alive at a time, so the peak stays flat in
    # the number of samples (X(0) plus a constant set by the chunk size) and in depth (only per-layer metrics
    # are kept), in float32 and float64 alike.
    print("\n| memory scan | dtype | samples x 16 configs | layers | X(0) GiB | peak RSS GiB |\n"
          "|---|---|---|---|---|---|")
    scan = ([(n, 1) for n in args.memory_samples]
            + [(min(args.memory_samples), t) for t in args.memory_layers if t != 1])
    for dtype in args.dtypes:
        for n, n_layers in scan:
            row = spawn("memory", args.dims[0], n, n_layers, dtype=dtype)
            print(f"| {args.dims[0]} | {dtype} | {n} | {n_layers} | {row['x0_gib']:.3f} | "
                  f"{row['peak_rss_gib']:.2f} |", flush=True)


def memory_scan(dims: str, n_samples: int, n_layers: int = 1, dtype: str = "float32") -> dict:
    """Peak RSS of the engine with 16 configurations (4 masks x 4 norms), ``n_layers`` layers, default budget,
    states in ``dtype`` (X(0) is held in float32 as the sweeps hold it)."""
    d_model, n_heads = DIMS[dims]
    layers = random_layers(n_layers, d_model, n_heads, dtype=metrics.resolve_dtype(dtype))
    x0 = torch.randn(n_samples, N_TOKENS, d_model, generator=torch.Generator().manual_seed(0))
    grid = config_grid(masks=MASKS, norms=norms.FIXED_NORM_NAMES)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    run_san(x0, layers, grid, dtype=metrics.resolve_dtype(dtype), metric_names=("mu", "norm"))
    return {"peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "rss_before_gib": base / 2**20, "x0_gib": x0.numel() * 4 / 2**30,
            "seconds": time.perf_counter() - start}


if __name__ == "__main__":
    main()
