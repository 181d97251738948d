"""The extractor over the real labelled pages of ``bench/maintext_set``: no page whose label has
200 characters or more comes back empty, or with less than a quarter of its article.

Not a quality score (``bench/maintext.py`` measures precision and recall, the held-out part
apart): a floor. Before the platform fixes, six of these pages (Blogger's posts, an Elementor
page, a Sphinx page) came back empty, and five more with less than a quarter of their article.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest

from crawler.content.maintext import main_text
from tests.crawling import PROJECT

PAGES = PROJECT / "bench" / "maintext_set" / "pages"
LONG_ENOUGH = 200  # characters of label: such a page has body text to find
MIN_RECALL = 0.25
_WORD = re.compile(r"\w+")


def _words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def _labelled() -> list[Path]:
    return sorted(PAGES.glob("*.html.gz"))


def test_the_set_is_there() -> None:
    assert len(_labelled()) >= 50


@pytest.mark.parametrize("page", _labelled(), ids=lambda p: p.name.removesuffix(".html.gz"))
def test_no_page_with_body_text_comes_back_empty(page: Path) -> None:
    label = page.with_name(page.name.removesuffix(".html.gz") + ".txt").read_text("utf-8")
    if len(label) < LONG_ENOUGH:
        pytest.skip("label shorter than 200 characters")
    text = main_text(gzip.decompress(page.read_bytes()))
    assert text.strip(), "empty main text"
    truth = _words(label)
    recall = sum((_words(text) & truth).values()) / sum(truth.values())
    assert recall >= MIN_RECALL, f"only {recall:.0%} of the article's words"
