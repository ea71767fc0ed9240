"""The verdicts page (rankcollapse.book.pages.verdicts) and the claims records it reads
(rankcollapse.book.pages._claims_records): every page's rows listed with the same words and a link to their
row, grouped by whose claim they are; the headline findings chosen by the verdicts of the rows they point at;
a record read only for exactly the page, parameters, code and store that made it."""

import json
import re

import pytest

from rankcollapse.book import claims_table, registry
from rankcollapse.book.pages import _claims_records as records
from rankcollapse.book.pages import verdicts
from rankcollapse.book.registry import Computed
from rankcollapse.experiments.store import ResultStore
from rankcollapse.verdicts.claims import Cell, Claim


def _claim(text: str, source: str, verdict: str = "holds", robustness: str = "robust") -> Claim:
    return Claim(text, source, "initialized: rate of μ/‖X‖_F", verdict, "n",
                 (Cell("causal_sliding_window", "holds", "rate 0.5", "w"),), robustness)


def _theory_page() -> verdicts.PageClaims:
    """The page the intro's headlines point at (:data:`rankcollapse.book.pages.verdicts.HEADLINES`)."""
    theory_rows = [_claim("Pure masked attention collapses under every mask", "the paper: Theorem 1"),
                   *(_claim(f"row {k}", "the paper: Theorem 1") for k in range(2, 4)),
                   _claim("A larger radius slows collapse", "the paper: Theorem 1", "holds partly"),
                   *(_claim(f"row {k}", "the paper: Theorem 1") for k in range(5, 7)),
                   _claim("LayerNorm stops it", "the paper: Fig. 2", "does not hold")]
    return verdicts.PageClaims("theory_san", "book/experiments/theory_san.md", "The theory's SAN at depth",
                               {"theory_san": theory_rows}, False, 0.1)


def _pages() -> list[verdicts.PageClaims]:
    fig2 = verdicts.PageClaims("fig2", "book/experiments/fig2.md", "Fig. 2: masks and LayerNorm", {
        "fig2": [_claim("Pure masked attention collapses", "Fig. 2 caption"),
                 _claim("... pretrained", "Fig. 2 caption"), _claim("... at a rate", "Fig. 2 caption"),
                 _claim("A larger radius slows collapse", "Theorem 1", "holds partly"),
                 _claim("LayerNorm stops it", "Fig. 2 caption", "does not hold")],
        "fig2_controls": [_claim("The biases drive the decay", "this book's control")]}, False, 0.1)
    skip = verdicts.PageClaims("skip_connections", "book/response/skip_connections.md", "Response: skip", {
        "skip": [_claim("Skip connections help", "response W1", "no collapse resolved in 12 layers",
                        "borderline — flips when STABLE_FACTOR = 3 (→ does not hold)")]}, False, 0.1)
    decoders = verdicts.PageClaims("rmsnorm_decoders", "book/beyond/rmsnorm_decoders.md", "Beyond: SmolLM2", {
        "rmsnorm_decoders": [_claim("Pure masked attention collapses", "Fig. 2 caption, response")]},
        True, 0.0)
    return [fig2, skip, decoders]


def _shown(pages: list[verdicts.PageClaims]):
    result = verdicts.compute(verdicts.VerdictsConfig(), lambda names, reuse: pages)
    return verdicts.show({"main": Computed(verdicts.VerdictsConfig(), result, 0.0)}, {}), result


def test_rows_are_grouped_by_whose_claim_they_are():
    _, result = _shown(_pages())
    assert [(r.page.name, r.prefix, r.n, r.group) for r in result.rows] == [
        *[("fig2", "fig2", n, "paper") for n in range(1, 6)], ("fig2", "fig2_controls", 1, "controls"),
        ("skip_connections", "skip", 1, "response"), ("rmsnorm_decoders", "rmsnorm_decoders", 1, "beyond")]


def test_a_claims_rows_with_the_same_words_share_one_summary_line():
    pages = _pages()
    pages[0].claims["fig2"][1] = _claim("Pure masked attention collapses", "Fig. 2 caption", "holds partly")
    shown, _ = _shown(pages)
    summary = shown.markdown["verdicts_summary_paper"]
    assert summary.count("<tr>") == 1 + 4 and summary.count('class="claim-chip"') == 5
    assert verdicts.short_titles(["Response: a", "Response: b", "Fig. 2: c"]) == {
        "Response: a": "a", "Response: b": "b", "Fig. 2: c": "Fig. 2"}


def test_every_row_is_listed_with_its_words_and_a_link_to_its_row():
    shown, result = _shown(_pages())
    for row in result.rows:
        summary = shown.markdown[f"verdicts_summary_{row.group}"]
        details = shown.markdown[f"verdicts_details_{row.group}"]
        link = f'href="{verdicts.href(row)}"'
        assert link in summary and link in details
        for text in (summary, details):
            assert claims_table.reader_html(row.claim.claim) in text
            assert f"<strong>{claims_table.reader_html(row.claim.verdict)}</strong>" in text
        assert claims_table.evidence_html(row.claim) in details
    assert verdicts.href(result.rows[5]) == "experiments/fig2.html#claim-fig2-fig2-controls-1"
    assert (verdicts.href(result.rows[6], "book/intro.md")
            == "response/skip_connections.html#claim-skip-connections-skip-1")


def test_the_notebooks_data_table_has_every_row():
    shown, result = _shown(_pages())
    frame = shown.tables["verdicts_table"].data
    assert list(frame["link"]) == [verdicts.href(r) for r in result.rows]
    assert list(frame["verdict"]) == [r.claim.verdict for r in result.rows]
    assert frame.loc[0, "decided on"] == "initialized"


def test_the_overview_has_a_line_per_page_and_a_linked_mark_per_row():
    shown, result = _shown(_pages())
    glance = shown.markdown["verdicts_glance"]
    assert glance.count("<tr>") == 1 + 3 and glance.count('class="claim-mark ') == len(result.rows)
    for row in result.rows:
        assert f'href="{verdicts.href(row)}"' in glance
    verdict_words = ("holds", "holds partly", "does not hold", "cannot tell: on the rounding floor", "stable")
    assert [verdicts.verdict_mark(v)[0] for v in verdict_words] == ["✓", "◐", "✗", "?", "•"]


def test_the_borderline_mark_shows_only_on_the_borderline_row():
    shown, _ = _shown(_pages())
    assert "claim-borderline" in shown.markdown["verdicts_summary_response"]
    assert "claim-borderline" not in shown.markdown["verdicts_summary_paper"]
    assert "flips when STABLE_FACTOR = 3" in shown.markdown["verdicts_details_response"]


def test_counts_read_any_verdict_word_in_the_rules_order():
    shown, _ = _shown(_pages())
    assert shown.values["verdicts_counts_paper"] == "5 rows — holds: 3 · holds partly: 1 · does not hold: 1"
    assert shown.values["verdicts_counts_response"] == "1 row — no collapse resolved in 12 layers: 1"
    assert shown.values["verdicts_n_rows"] == 8 and shown.values["verdicts_n_pages"] == 3
    assert shown.values["verdicts_gathered"] == (
        "1 of 3 pages' claims read from this build's records, under 1 s in all; computed again: Fig. 2: "
        "masks and LayerNorm (under 1 s), Response: skip (under 1 s)")


def test_headline_findings_are_chosen_by_the_verdicts_of_their_rows():
    rows = verdicts.rows_of([_theory_page(), *_pages()])
    found = verdicts.findings(rows, "book/intro.md")
    for key, page, prefix, n in verdicts.HEADLINES:
        row = next(r for r in rows if (r.page.name, r.prefix, r.n) == (page, prefix, n))
        assert found[key].startswith(f"**{claims_table.reader_html(row.claim.verdict)}** — ")
        assert f'href="experiments/theory_san.html#{row.anchor}"' in found[key]
    flipped = [_theory_page(), *_pages()]
    flipped[0].claims["theory_san"][0] = _claim("Pure masked attention collapses", "the paper: Theorem 1",
                                                "does not hold")
    assert verdicts.findings(verdicts.rows_of(flipped))["collapse"].startswith("**does not hold** — ")


def test_a_headline_pointing_at_no_row_is_one_error():
    rows = verdicts.rows_of(_pages()[1:])
    with pytest.raises(ValueError, match="HEADLINES 'collapse' points at"):
        verdicts.findings(rows)


def test_reuse_recorded_must_be_a_boolean():
    with pytest.raises(ValueError, match="reuse_recorded must be True or False"):
        verdicts.VerdictsConfig(reuse_recorded="yes")


# ---------------------------------------------------------------- the records


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An empty results store of its own (its state is part of a record's key)."""
    root = tmp_path / "results"
    root.mkdir()
    monkeypatch.setenv("RANKCOLLAPSE_RESULTS_DIR", str(root))
    return ResultStore(root)


def test_a_record_reads_back_the_claims_for_exactly_its_parameters_code_and_store(tmp_path, store):
    claims = {"thm1": [_claim("Collapse", "the paper: Theorem 1")]}
    path = records.record_claims("theorem1", {"n_layers": 60}, claims, tmp_path)
    assert path is not None and path.parent == tmp_path / records.RECORDS
    assert records.recorded_claims("theorem1", {"n_layers": 60}, tmp_path) == claims
    assert records.recorded_claims("theorem1", {"n_layers": 61}, tmp_path) is None  # other parameters
    (store.root / "fig2").mkdir()
    (store.root / "fig2" / "abc.json").write_text("{}")  # the store changed: a result was added
    assert records.recorded_claims("theorem1", {"n_layers": 60}, tmp_path) is None


def test_a_damaged_record_is_not_read_and_a_page_without_claims_is_not_recorded(tmp_path, store):
    claims = {"thm1": [_claim("Collapse", "the paper: Theorem 1")]}
    path = records.record_claims("theorem1", {}, claims, tmp_path)
    path.write_text(json.dumps({"page": "theorem1", "claims": {"thm1": [{"claim": "x"}]}}))
    assert records.recorded_claims("theorem1", {}, tmp_path) is None
    assert records.record_claims("data", {}, {}, tmp_path) is None


def test_the_registrys_claims_are_the_claims_a_page_shows():
    """The verdicts page reads a page's claims through the registry, without its figures."""
    assert registry.states_claims("fig4") and not registry.states_claims("data")
    assert registry.claims("data", {}, {}) == {}


@pytest.mark.slow
def test_the_headlines_point_at_rows_of_the_stored_results():
    rows = verdicts.rows_of(registry.gather_claims(verdicts.headline_pages()))
    found = verdicts.findings(rows, "book/intro.md")
    assert set(found) == {key for key, *_ in verdicts.HEADLINES}
    assert all(re.search(r'href="experiments/theory_san\.html#claim-theory-san-theory-san-\d+"', f)
               for f in found.values())
    assert found["collapse"].startswith("**holds") and "decided collapse" in found["collapse"]
