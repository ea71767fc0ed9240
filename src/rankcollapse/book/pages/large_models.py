"""The large-models page (book/beyond/large_models.md): a tiny decoder loaded with most of its layers on
disk (as a 70-billion-parameter model would be on a machine with too little memory), its hook metrics in
batches against those of an ordinary load.

:func:`configure` checks the page's parameters, :func:`compute` runs the check in a temporary folder,
:func:`numbers` are the values its prose states.

Used by: book/beyond/large_models.md (through the page registry, :mod:`rankcollapse.book.registry`).
"""

from __future__ import annotations

import tempfile

from rankcollapse.core.checks import check_int
from rankcollapse.hf import families as hf_families
from rankcollapse.hf import testing


def configure(parameters: dict) -> dict[str, dict]:
    """The tiny check's parameters, checked: sequences and the batch size of the hook metrics."""
    check_int("n_sequences", parameters.get("n_sequences"), 1, 4096)
    check_int("batch_size", parameters.get("batch_size"), 1, parameters["n_sequences"])
    return {"main": dict(parameters)}


def compute(config: dict) -> dict[str, object]:
    """The offload check (:func:`rankcollapse.hf.testing.offload_check`) of ``config``'s sequences and
    batch size, in a temporary folder."""
    with tempfile.TemporaryDirectory() as folder:
        return testing.offload_check(folder, n_sequences=config["n_sequences"], batch_size=config["batch_size"])


def numbers(check: dict[str, object]) -> dict[str, object]:
    """Where each part of the model was placed, the largest relative difference of μ against an ordinary
    load, the number of sequences, and the model families the attention extractor knows."""
    placement = ", ".join(f"{module} → {device}" for module, device in check["device_map"].items())
    difference = check["max_relative_difference"]
    agreement = ("agree exactly with those of an ordinary load" if difference == 0 else
                 f"differ from those of an ordinary load by at most {difference:.2g} (relative, in μ)")
    return {"placement": placement, "difference": difference, "agreement": agreement,
            "n_sequences": check["n_sequences"], "families": ", ".join(hf_families.FAMILIES)}
