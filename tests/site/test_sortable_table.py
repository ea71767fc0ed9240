"""The mask-design table sorts on a click, numbers as numbers and "none" last (no built site needed)."""

import math

import pandas as pd
import pytest

from rankcollapse.book.plotting.beyond import sortable_table

pytestmark = pytest.mark.site


def test_clicking_a_header_sorts_numbers_numerically_and_none_last(browser):
    table = pd.DataFrame({"mask": ["a", "b", "c", "d"], "radius": [16.0, math.nan, 2.0, 4.0]})
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_content(f"<html><body>{sortable_table(table)}</body></html>")
    column = lambda: page.eval_on_selector_all("tbody tr td:first-child",  # noqa: E731
                                               "cells => cells.map(c => c.textContent)")
    page.click("th:nth-child(2)")
    assert column() == ["c", "d", "a", "b"]  # 2 < 4 < 16 < none (not "16" < "2" as text)
    page.click("th:nth-child(2)")
    assert column() == ["b", "a", "d", "c"]
    page.click("th:nth-child(1)")
    assert column() == ["a", "b", "c", "d"] and errors == []
    page.close()
