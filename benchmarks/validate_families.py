"""Print the attention-sublayer validation errors per family (tiny random configs and packaged models).

    .venv/bin/python benchmarks/validate_families.py [--samples 4] [--tokens 64]

For each model: the largest, over layers, of ||engine - HF||_F / ||HF||_F in float32 and in float64
(the engine fed the hidden state HF feeds its own attention; HF's float64 forward with its float32 casts
lifted, ``rankcollapse.hf.extract.Float64Casts``), the model's own trained norm (each extracted norm on the
input HF feeds that norm module) and the whole attention block (norm "model" with the skip, fed the
layer's input), each in both dtypes. Packaged models that are not installed are listed as skipped.
Runtime on 2 CPU cores with every package installed and cached: about 3 min.
"""

import argparse

import torch

from rankcollapse.experiments import data
from rankcollapse.hf import extract
from rankcollapse.hf import load as models
from rankcollapse.hf.families import FAMILIES
from rankcollapse.hf.testing import tiny_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4, help="text samples per packaged model")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per sample")
    args = parser.parse_args()
    print("| model | layers | attention float32 | attention float64 | own norm float32 | own norm float64 "
          "| block float32 | block float64 |")
    print("|---|---|---|---|---|---|---|---|")
    for family in FAMILIES:
        ids = torch.randint(3, 100, (3, 12), generator=torch.Generator().manual_seed(1))
        print(f"| tiny {family} | 3 | {row(tiny_model(family), ids)} |")
    for name in models.PACKAGED_MODELS:
        try:
            loaded = models.load_model(f"pkg:{name}")
        except ValueError as err:
            print(f"| pkg:{name} | skipped: {err} | | | | | | |")
            continue
        ids = data.sample_token_ids(loaded.tokenizer, n_samples=args.samples, n_tokens=args.tokens,
                                    seed=0).input_ids
        print(f"| pkg:{name} | {loaded.model.config.num_hidden_layers} | {row(loaded.model, ids)} |")


def row(model: torch.nn.Module, ids: torch.Tensor) -> str:
    """The largest errors over layers: attention, own norm and block, each in float32 and float64."""
    checks = (extract.validate_attention, extract.validate_norms, extract.validate_attention_block)
    e32 = [max(check(model, ids)) for check in checks]
    e64 = [max(check(model.double(), ids)) for check in checks]
    return " | ".join(f"{a:.2e} | {b:.2e}" for a, b in zip(e32, e64))


if __name__ == "__main__":
    main()
