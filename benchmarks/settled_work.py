"""What stopping settled configurations saves (``rankcollapse.experiments.sweep``'s settled work), two ways.

    nice .venv/bin/python benchmarks/settled_work.py store                  # every stored result, seconds
    nice .venv/bin/python benchmarks/settled_work.py page appendix_g1 -p model pkg:minilm -p n_samples 64 ...

``store``: from every stored result whose table has mu, its floor and the exact flag (results computed
without the stop), the share of its layer x configuration work a run with ``SETTLE_LAYERS`` would not
compute. Conservative: a layer counts as on the floor only when the largest mu over *all* samples lies
within FLOOR_BAND of the *smallest* floor (the engine asks it of each chunk of samples, per sample), so a
real run stops at the layer estimated here or earlier. The full transformer's rows and exactly tracked
configurations always count as computed.

``page``: runs a page twice with ``rankcollapse run`` into two empty result folders, once with
``$RANKCOLLAPSE_SETTLE_LAYERS=0`` (every layer) and once with the default, and prints each run's compute time
per stored result, the share of settled layer x configuration rows, and whether every text the page glues
(claims tables, headlines, numbers, figure notes) is the same in both executed notebooks; the glued texts
that differ are printed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from rankcollapse.core.metrics import FLOOR_BAND
from rankcollapse.engine import EXACT_METRIC, SETTLED_METRIC
from rankcollapse.experiments.store import ResultStore
from rankcollapse.experiments.sweep import SETTLE_ENV, SETTLE_LAYERS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from diff_glue import IMAGE_TYPES, glue_outputs  # noqa: E402  (scripts/ is not a package)

STATS = ["mean", "std", "median", "q10", "q90", "min", "max", "n_samples"]


def settled_share(table: pd.DataFrame, settle: int = SETTLE_LAYERS) -> tuple[int, int]:
    """``(layer.configs not computed, layer.configs in all)`` of one stored table (layers >= 1) under the
    conservative whole-sample reading of the module docstring.

    Shapes: ``table`` is a tidy experiments table with metrics mu, floor and exact.
    """
    keys = [c for c in table.columns if c not in {"layer", "metric", *STATS}]
    skipped = total = 0
    for _, config in table.groupby(keys, dropna=False, sort=False):
        wide = config.pivot_table(index="layer", columns="metric", values=["max", "min"]).sort_index()
        depth = int(wide.index.max())
        total += depth
        exact = wide.get(("min", EXACT_METRIC))
        if (("max", "floor") not in wide or config["variant"].iloc[0] != "SAN"
                or (exact is not None and exact.min() == 1)):
            continue  # the full transformer or a curve tracked exactly: always computed
        on_floor = (wide[("max", "mu")] <= FLOOR_BAND * wide[("min", "floor")]).loc[1:].to_numpy()
        streak = 0
        for layer, low in enumerate(on_floor, start=1):
            streak = streak + 1 if low else 0
            if streak >= settle:
                skipped += depth - layer
                break
    return skipped, total


def store_report(settle: int) -> None:
    """One Markdown row per stored result that has the metrics, and one total per page."""
    store = ResultStore()
    print(f"| page | result | samples x layers | dtype | compute s | not computed with settle={settle} |")
    print("|---|---|---|---|---|---|")
    pages: dict[str, list[float]] = {}
    for json_path in sorted(store.root.glob("*/*.json")):
        page, key = json_path.parent.name, json_path.stem
        result = store.verify(page, key)
        if "metric" not in result.table or not {"mu", "floor", EXACT_METRIC} <= set(result.table["metric"]):
            continue
        skipped, total = settled_share(result.table, settle)
        p = result.provenance
        seconds = float(p.get("compute_time_s") or p.get("wall_time_s") or 0.0)
        depth = (max(p["depth"].values()) if isinstance(p.get("depth"), dict)
                 else p["parameters"].get("n_layers"))
        print(f"| {page} | {key} | {p['parameters']['n_samples']} x {depth} | {p['dtype']} | {seconds:.0f} | "
              f"{100 * skipped / total:.0f} % |")
        acc = pages.setdefault(page, [0.0, 0.0, 0.0])
        acc[0] += skipped / total * seconds
        acc[1] += seconds
        acc[2] += 1
    print("\n| page | results | compute s | work not computed, weighted by compute time |\n|---|---|---|---|")
    for page, (saved, seconds, n) in pages.items():
        print(f"| {page} | {n:.0f} | {seconds:.0f} | {100 * saved / max(seconds, 1e-9):.0f} % |")


def page_report(page: str, pairs: list[list[str]]) -> None:
    """Run ``page`` with and without the stop; print times, settled shares and glued differences."""
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for settle in (0, SETTLE_LAYERS):
            results, output = Path(tmp) / f"results-{settle}", Path(tmp) / f"out-{settle}"
            env = {**os.environ, SETTLE_ENV: str(settle), "RANKCOLLAPSE_RESULTS_DIR": str(results)}
            command = ["rankcollapse", "run", page, "-p", "show_largest_stored", "False",
                       "--output", str(output)]
            for name, value in pairs:
                command += ["-p", name, value]
            start = time.perf_counter()
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - start
            store = ResultStore(results)
            stored = {p.stem: store.verify(page, p.stem) for p in sorted((results / page).glob("*.json"))}
            glued = glue_outputs(next(output.glob("*.ipynb")))
            runs[settle] = (wall, stored, {k: {m: t for m, t in v.items() if m not in IMAGE_TYPES}
                                           for k, v in glued.items()})
    print(f"{page} {' '.join(f'{n}={v}' for n, v in pairs)}")
    print("| settle layers | wall s | result | compute s | settled layer.config rows |\n"
          "|---|---|---|---|---|")
    for settle, (wall, stored, _) in runs.items():
        for key, result in stored.items():
            table = result.table
            held = table[table["metric"] == SETTLED_METRIC]["mean"]
            share = f"{100 * held.mean():.0f} %" if len(held) else "-"
            print(f"| {settle} | {wall:.0f} | {key} | {result.provenance['compute_time_s']:.0f} | {share} |")
    full, short = runs[0][2], runs[SETTLE_LAYERS][2]
    differ = sorted(k for k in full.keys() | short.keys() if full.get(k) != short.get(k))
    print(f"glued texts: {len(full)}; differing: {len(differ)}")
    for k in differ:
        print(f"--- {k}\n  every layer: {str(full.get(k))[:600]}\n  settled:     {str(short.get(k))[:600]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("store").add_argument("--settle", type=int, default=SETTLE_LAYERS)
    run = sub.add_parser("page")
    run.add_argument("page")
    run.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    args = parser.parse_args(argv)
    if args.what == "store":
        store_report(args.settle)
    else:
        page_report(args.page, args.p)


if __name__ == "__main__":
    sys.exit(main())
