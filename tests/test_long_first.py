"""``LONG_FIRST`` (tests/conftest.py) names tests that exist: a renamed test would silently
fall back to its place in the run, and the run's tail would grow again unnoticed."""

from __future__ import annotations

import re

from tests.conftest import CHECKOUT, LONG_FIRST, long_rank


def test_every_long_first_entry_names_a_test_function() -> None:
    for prefix in LONG_FIRST:
        path, _, name = prefix.partition("::")
        source = (CHECKOUT / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), prefix


def test_long_tests_rank_first_in_their_listed_order() -> None:
    assert [long_rank(p + "[x]") for p in LONG_FIRST] == list(range(len(LONG_FIRST)))
    assert long_rank("tests/test_docs.py::test_anything") == len(LONG_FIRST)
