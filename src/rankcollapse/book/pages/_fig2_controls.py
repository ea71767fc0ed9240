"""The Fig. 2 page's settings and controls (book/experiments/fig2.md): the initialized weights in the theory's
setting (no biases) and beside it (PyTorch's default biases; Hugging Face's BERT init), over several weight
seeds, and the no-mixing ``self`` mask.

:func:`settings` names where each initialized claim is decided, :func:`setting_source` gives the stored
results and labels of a setting, :func:`control_claims` the claims decided on the controls, and
:func:`setting_clauses` the clauses of the page's first paragraph: which verdicts differ by setting.

Used by: :mod:`rankcollapse.book.pages.fig2`; tests/unit/test_controls.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from rankcollapse.book.labels import mask_label
from rankcollapse.book.pages._common import BIASES_SETTING, THEORY_SETTING, against, mask_sides, seed_parts
from rankcollapse.core import masks
from rankcollapse.experiments.store import StoredResult
from rankcollapse.verdicts.claims import FAILS, HOLDS, OPEN, PARTLY, Claim, side_verdict
from rankcollapse.verdicts.effects import Side, side
from rankcollapse.verdicts.robustness import robust
from rankcollapse.verdicts.rules import Thresholds

THEORY, BIASES, HF = "theory", "biases", "hf"
# setting -> (weights label, words a reader knows it by); the theory's first: it decides
SETTING_WORDS = {THEORY: ("initialized_nobias", THEORY_SETTING), BIASES: ("initialized", BIASES_SETTING),
                 HF: ("initialized",
                      "initialized as Hugging Face initializes BERT (N(0, 0.02), zero biases)")}


def seed_results(results: Mapping[str, StoredResult]) -> list[StoredResult]:
    """The initialized controls of every weight seed: the ``controls`` part, then every ``seed_<k>`` part."""
    return [results["controls"], *seed_parts(results, "seed")]


def setting_source(results: Mapping[str, StoredResult], setting: str) -> tuple[list[StoredResult], dict]:
    """The stored results of a setting (its weight seeds) and the labels of its curves."""
    weights = SETTING_WORDS[setting][0]
    parts = [results["hf"]] if setting == HF else seed_results(results)
    return parts, dict(weights=weights, variant="SAN")


def setting_sides(results: Mapping[str, StoredResult], setting: str, norm: str, words: str,
                  metric: str = "relative_mu") -> dict[str, Side]:
    """Per paper mask, the curve of ``metric`` of ``norm`` in a setting (pooled over its weight seeds)."""
    parts, labels = setting_source(results, setting)
    sides = mask_sides(parts, None, words, metric, norm=norm, **labels)
    return {m: sides[m] for m in masks.PAPER_MASKS if m in sides}


def setting_words(results: Mapping[str, StoredResult], setting: str) -> str:
    """The setting in words with its weight seeds, e.g. "the theory's SAN: initialized, no biases; 5 weight
    seeds"."""
    n = len(setting_source(results, setting)[0])
    return f"{SETTING_WORDS[setting][1]}; {n} weight seed{'s' if n > 1 else ''}"


def _no_mixing_claim(results: Mapping[str, StoredResult], thresholds: Thresholds) -> Claim:
    """"The collapse is attention's": a mask's pure-attention curve collapses while the no-mixing control of
    the same weights (each token attends only to itself) does not, decided in the theory's setting."""
    parts, labels = setting_source(results, THEORY)
    own = side_verdict(side(parts, None, "no mixing", mask="self", norm="none", **labels), thresholds)
    curves = {m: side_verdict(s, thresholds)
              for m, s in setting_sides(results, THEORY, "none", "pure").items()}
    passed = [m for m, c in curves.items() if c.collapses and not own.collapses]
    undecided = [m for m, c in curves.items() if not c.collapses]
    verdict = (OPEN if len(undecided) == len(curves) else HOLDS if len(passed) == len(curves) - len(undecided)
               and passed else PARTLY if passed else FAILS)
    return Claim("... and the collapse is attention's, not the value maps' (control: no mixing)", "the paper",
                 "pure attention: masks that collapse while the no-mixing control of the same weights does "
                 "not",
                 verdict, f"{len(passed)} of {len(curves) - len(undecided)} collapsing masks; no mixing: "
                 f"{own.words}" + (f"; no collapse resolved: {', '.join(map(mask_label, undecided))}"
                                   if undecided else ""),
                 setting=setting_words(results, THEORY))


def control_claims(results: Mapping[str, StoredResult]) -> list[Claim]:
    """The claims decided on the controls, pooled over the weight seeds: the collapse is attention's (no
    mixing), mixing decays faster than no mixing, and the biases' effect on the initialized decay."""
    theory, biased = setting_source(results, THEORY), setting_source(results, BIASES)
    own = side(theory[0], None, "no mixing", mask="self", norm="none", **theory[1])
    mixing = {m: (own, s) for m, s in setting_sides(results, THEORY, "none", "pure attention").items()}
    without = setting_sides(results, THEORY, "none", "no biases")
    with_ = setting_sides(results, BIASES, "none", "with biases")
    return [robust(lambda t: _no_mixing_claim(results, t)),
            against("... mixing by the mask decays faster than no mixing (control: no mixing)",
                    "this book's control", "pure attention: late per-layer factor of μ/‖X‖_F of the "
                    "no-mixing control over the mask's (above 1: the mask's mixing decays faster)", mixing,
                    setting=setting_words(results, THEORY)),
            against("The biases, not attention, drive the initialized decay (control: no biases)",
                    "this book's control", "pure attention: late per-layer factor of μ/‖X‖_F without "
                    "biases over with them (the same draws)", {m: (without[m], with_[m]) for m in without},
                    setting=f"initialized with and without biases; {len(biased[0])} weight seeds")]


def setting_clauses(claims: list[Claim]) -> dict[str, str]:
    """Where a claim's verdict differs between the settings it is decided in (rows of the same claim text,
    different ``setting``), as one clause for the page's first paragraph (``setting_differences``: plain text,
    glued with ``glue:text``, so the claims are quoted, not emphasized; a sentence saying so when every claim
    reads the same in every setting) and the count (``n_setting_differences``)."""
    by_claim: dict[tuple[str, str], list[Claim]] = {}
    for c in claims:
        if c.setting:  # one claim, measured the same way, in each of its settings
            by_claim.setdefault((c.claim, c.measured), []).append(c)
    differs = [rows for rows in by_claim.values() if len({r.verdict for r in rows}) > 1]
    words = "; ".join(f"“{rows[0].claim.strip('. ')}” ({rows[0].measured.split(':')[0]}) " + ", ".join(
        f"{r.verdict} {_short(r.setting)}" for r in rows) for rows in differs)
    return {"setting_differences": f"The verdict depends on the setting: {words}." if differs else
            "Every claim reads the same in every setting.", "n_setting_differences": len(differs)}


def _short(setting: str) -> str:
    """A setting's words without the seed count, as a clause: "in the theory's SAN" ..."""
    head = setting.split(";")[0]
    return {SETTING_WORDS[THEORY][1]: "in the theory's SAN (no biases)",
            SETTING_WORDS[BIASES][1]: "with PyTorch's biases",
            SETTING_WORDS[HF][1]: "with Hugging Face's init"}.get(head, f"({head})")

