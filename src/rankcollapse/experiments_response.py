"""The author-response experiments: sample size, skip connections, the corrected pretrained panels.

Each function is the one call of a page under ``book/response/``; the sweeps themselves are
:func:`rankcollapse.experiments.run_sweep` and their results go through the same results store.

Used by: book/response/sample_size.md, skip_connections.md, pretrained_panels.md; ``rankcollapse run``.
"""

from __future__ import annotations

from rankcollapse.checks import check_int
from rankcollapse.experiments import FIG2, G1, _config, fig2, fig3, run_experiment
from rankcollapse.results import ResultStore, StoredResult

SAMPLE_SIZE = dict(norms=("none", "layernorm"), n_samples=128)
SKIP = dict(masks=("complete",), norms=("none", "layernorm"), skips=(False, True), full_transformer=True)
SKIP_DEEP = dict(SKIP, weights=("initialized",), n_layers=128, n_samples=G1["n_samples"])
PAGE_CHOICES = {"sample_size": SAMPLE_SIZE, "skip_connections": SKIP, "pretrained_panels": FIG2}


def check_extra(page: str, parameters: dict) -> None:
    """Range checks of the parameters a response page has beyond :class:`ExperimentConfig`'s."""
    if page == "sample_size" and "n_samples_small" in parameters:
        check_int("n_samples_small", parameters["n_samples_small"], 1,
                   parameters.get("n_samples", SAMPLE_SIZE["n_samples"]) - 1)
    if page == "skip_connections" and "n_layers_deep" in parameters:
        check_int("n_layers_deep", parameters["n_layers_deep"], 1, 4096)


def sample_size(n_samples_small: int = 32, store: ResultStore | None = None, **parameters) -> StoredResult:
    """The first ``n_samples_small`` samples against all ``n_samples``, from one run (column n_samples)."""
    check_extra("sample_size", {"n_samples_small": n_samples_small, **parameters})
    config = _config(parameters, **SAMPLE_SIZE)
    return run_experiment("sample_size", config, store, subsets=(n_samples_small,))


def skip_connections(n_layers_deep: int = 128, store: ResultStore | None = None,
                     **parameters) -> dict[str, StoredResult]:
    """SAN, + skip, + LayerNorm, + both, and the full transformer: ``"shallow"`` (both weights,
    ``n_layers``) and ``"deep"`` (initialized only, ``n_layers_deep``)."""
    check_extra("skip_connections", {"n_layers_deep": n_layers_deep})
    shallow = _config(parameters, **SKIP)
    deep_parameters = {k: v for k, v in parameters.items() if k not in ("n_layers", "weights")}
    deep = _config({**deep_parameters, "n_layers": n_layers_deep}, **SKIP_DEEP)
    return {"shallow": run_experiment("skip_connections", shallow, store),
            "deep": run_experiment("skip_connections", deep, store)}


def pretrained_panels(store: ResultStore | None = None, **parameters) -> dict[str, StoredResult]:
    """The Fig. 2 and Fig. 3 sweeps (the same stored results as those pages for the same parameters)."""
    return {"fig2": fig2(store, **parameters), "fig3": fig3(store, **parameters)}

