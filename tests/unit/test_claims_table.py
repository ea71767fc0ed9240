"""The claims tables a reader sees (rankcollapse.book.claims_table): one anchored row per claim, the book's
words for code names, math names set with subscripts, breakable tokens kept whole, the robustness shown only
where a row is borderline, any verdict word rendered as it is."""

import re
from html.parser import HTMLParser

import pytest

from rankcollapse.book import claims_table as ct
from rankcollapse.verdicts.claims import Cell, Claim
from stored_claims import page_claims


class _Table(HTMLParser):
    """The rows of the first table of an HTML text: per row its id and each cell's text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: list[tuple[str | None, list[str]]] = []
        self._cell: list[str] | None = None
        self._done = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if self._done:
            return
        if tag == "tr":
            self.rows.append((dict(attrs).get("id"), []))
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and not self._done:
            self.rows[-1][1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._done = True

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _claim(**changes) -> Claim:
    fields = dict(claim="Pure masked attention collapses", source="Fig. 2 caption",
                  measured="initialized: rate of relative_mu per mask", verdict="holds partly", number="x",
                  cells=(Cell("causal_sliding_window", "holds", "×1.2 [1.1, 1.3]", "long words"),
                         Cell("sliding_window", "does not hold", "rate 0.00034, ×1", "more words")),
                  robustness="robust")
    return Claim(**{**fields, **changes})


def test_one_anchored_row_per_claim_with_claim_verdict_and_evidence():
    rows = [_claim(), _claim(claim="A larger radius slows collapse", verdict="holds")]
    table = _Table(ct.claims_markdown(rows, ct.page_anchors("fig2", "fig2_controls", rows)))
    assert [r[0] for r in table.rows] == [None, "claim-fig2-fig2-controls-1", "claim-fig2-fig2-controls-2"]
    assert table.rows[0][1] == ["claim", "verdict", "per mask or part"]
    assert all(len(cells) == 3 for _, cells in table.rows)
    assert table.rows[1][1][0].startswith("1. Pure masked attention collapses")
    assert table.rows[2][1][1] == "holds"
    assert table.rows[1][1][2] == ("✓ uni-directional window: ×1.2 [1.1, 1.3] "
                                   "✗ sliding window: rate 0.00034, ×1")


def test_code_names_become_the_books_words_and_math_names_get_subscripts():
    text = ct.claims_markdown([_claim(measured="initialized: W_V, g_V and c_A against ‖X‖_F and Z^T W Z")])
    assert "causal_sliding_window" not in text and "relative_mu" not in text and "sliding_window" not in text
    assert "W<sub>V</sub>" in text and "g<sub>V</sub>" in text and "c<sub>A</sub>" in text
    assert "‖X‖<sub>F</sub>" in text and "Z<sup>T</sup>" in text
    assert not re.search(r"[A-Za-z‖]_[A-Za-z]", re.sub(r"<[^>]+>", "", text))  # no raw W_V, ‖X‖_F left
    assert ct.reader_text("μ/‖X‖_F of relative_mu") == "μ/‖X‖_F of μ/‖X‖_F"  # plain text keeps Unicode


def test_tokens_a_browser_could_break_inside_are_kept_whole():
    html = ct.reader_html("uni-directional μ/‖X‖_F 10–90 % plain words")
    assert '<span class="nw">uni-directional</span>' in html
    assert '<span class="nw">μ/‖X‖<sub>F</sub></span>' in html
    assert '<span class="nw">10–90</span>' in html
    assert "plain words" in html and html.count('class="nw"') == 3


def test_robustness_shows_only_on_a_borderline_row():
    robust = ct.claims_markdown([_claim()])
    assert "borderline" not in _Table(robust).rows[1][1][1] and "robustness:" not in robust
    flip = "borderline — flips when MAJORITY = 2/3 (→ does not hold)"
    borderline = ct.claims_markdown([_claim(robustness=flip)])
    assert _Table(borderline).rows[1][1][1] == "holds partly borderline"
    whole = flip.replace("2/3", '<span class="nw">2/3</span>')
    assert f"<li>robustness: {whole}</li>" in borderline


def test_any_verdict_word_and_markup_in_the_words_render_escaped():
    row = _claim(claim="μ < 1 & |cos| grows", verdict="no collapse resolved in 12 layers", cells=())
    text = ct.claims_markdown([row])
    cells = _Table(text).rows[1][1]
    assert cells[0].startswith("1. μ < 1 & |cos| grows") and cells[1] == "no collapse resolved in 12 layers"
    assert 'μ &lt; 1 &amp; <span class="nw">|cos|</span> grows' in text and cells[2] == "x"


def test_the_table_and_its_details_are_one_html_block_each():
    """Markdown ends an HTML block at a blank line: inside one, a blank line would turn the rest into text."""
    table, legend, details = ct.claims_markdown([_claim(number="a\n\nb")]).split("\n\n")
    assert table.startswith("<table") and table.endswith("</table>") and "\n" not in table
    assert legend.startswith("Symbols: ")
    assert details.startswith("<details") and "\n" not in details


def test_anchors_must_name_every_row():
    with pytest.raises(ValueError, match="anchors"):
        ct.claims_markdown([_claim(), _claim()], ["claim-a-b-1"])


def test_every_stored_claims_table_has_one_anchored_row_per_claim_and_no_code_names():
    for page, tables in page_claims().items():
        for prefix, rows in tables.items():
            text = ct.claims_markdown(rows, ct.page_anchors(page, prefix, rows))
            table = _Table(text)
            assert [r[0] for r in table.rows[1:]] == ct.page_anchors(page, prefix, rows), page
            assert {len(cells) for _, cells in table.rows} == {3}, page
            assert [cells[1].removesuffix(" borderline") for _, cells in table.rows[1:]] == [
                r.verdict for r in rows], page
            visible = re.sub(r"<[^>]+>", "", text)
            assert not re.search(r"\b(causal_sliding_window|sliding_window|relative_mu)\b", visible), page
