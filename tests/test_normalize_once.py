"""A page's main text is normalized once: its lines make the change fingerprint and feed the
near-duplicate detector, and the fingerprint stays byte-equal to ``text_fingerprint`` of the
title and the text (stored fingerprints of earlier crawls still compare)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import crawler.content.normalize as normalize_module
from crawler.content.analysis_neardup import NearDuplicateJudge
from crawler.content.html import parse_html, parse_page
from crawler.content.neardup import NearDuplicateDetector
from crawler.content.normalize import (
    lines_fingerprint,
    normalize_lines,
    normalize_text,
    text_fingerprint,
)
from crawler.robots import Directives
from crawler.sites.analysis import ContentAnalysis
from crawler.spiders.links import UrlJoiner

DOCS = Path("/usr/share/doc")
MAX_PAGES = 400  # of the machine's documentation: every kind of page, in seconds


def real_pages() -> list[Path]:
    found = sorted(p for p in DOCS.rglob("*.html") if p.is_file()) if DOCS.is_dir() else []
    pages = found[:MAX_PAGES]
    if not pages:
        pytest.skip("no HTML under /usr/share/doc")
    return pages


def test_fingerprint_from_lines_equals_text_fingerprint_on_real_pages() -> None:
    compared = 0
    for path in real_pages():
        page = parse_html(path.read_bytes())
        for text in (page.main_text, page.text):
            assert lines_fingerprint(page.title, normalize_lines(text)) == text_fingerprint(
                f"{page.title} {text}"
            ), path
            compared += 1
    assert compared >= 2


@pytest.mark.parametrize(
    ("title", "text"),
    [
        ("", ""),
        ("Title only", ""),
        ("", "Text only\nin two lines"),
        ("   ", " \n\t\n "),
        ("\u00a0\u2003", "\u3000word\u2028other\u2029third\u00a0\u202f"),
        ("a\nb", "c\r\nd\x0be\x0cf\x85g\x1ch"),
        ("Version 1.", "2 is out"),  # no dot between digits across the join
        ("Version 1", ".2 is out, 1.2.3 too"),
        ("Cafe", "\u0301 a combining accent first"),
        ("e\u0301", "\u0301"),
        ("ΣΑΣ ΟΔΟΣ", "ΟΔΟΣ σας"),
        ("\uff26\uff35\uff2c\uff2c\u3000\uff57", "\uff21\uff22\u3000\uff11\uff12"),  # full width
        ("plain ascii", "non-ascii: über"),
        ("Über", "plain ascii text"),
        ("Tuesday 3rd", "10am visits 1234 a8f3k2j1q9 " + "x" * 30),
        ("…", "—"),  # punctuation alone: nothing left
        ("", "!!! ??? ..."),
    ],
)
def test_fingerprint_from_lines_equals_text_fingerprint_on_edge_cases(
    title: str, text: str
) -> None:
    assert lines_fingerprint(title, normalize_lines(text)) == text_fingerprint(f"{title} {text}")


def test_parse_page_hands_over_the_lines_its_fingerprint_was_made_of() -> None:
    for path in real_pages()[:50]:
        body = path.read_bytes()
        clipped = parse_page(body, max_text=2000)
        page = clipped.page
        assert clipped.main_lines == normalize_lines(page.main_text), path
        assert clipped.fingerprint == text_fingerprint(
            f"{page.title} {page.main_text or page.text}"
        ), path
    # without a main text the fingerprint is the visible text's, and there are no lines
    clipped = parse_page(b"<html><title>T</title><body><nav><a href=/>Home</a></nav></body>",
                         main_text=False)
    assert clipped.main_lines == [] and clipped.page.text
    assert clipped.fingerprint == text_fingerprint(f"T {clipped.page.text}")


def test_a_check_given_the_lines_decides_as_one_given_the_text() -> None:
    texts = [normalize_lines("x")]  # warm the import of every part
    pages = [path.read_bytes() for path in real_pages()[:30]]
    by_text, by_lines = NearDuplicateDetector(), NearDuplicateDetector()
    for i, body in enumerate(pages + pages):  # the second round: exact duplicates
        text = parse_html(body).main_text
        url = f"http://h{i % 3}.test/{i}"
        texts.append(normalize_lines(text))
        assert by_text.check(url, text) == by_lines.check(url, text, lines=texts[-1])
    assert by_text.drain() == by_lines.drain()
    # the lines are what is compared: the text is not normalized again
    decision = NearDuplicateDetector().check("http://h.test/", "", lines=["some words here"])
    assert decision.kind == "new" and decision.words == 3


def _spy(calls: list[str]) -> Callable[[Callable[[str], Any]], Callable[[str], Any]]:
    def wrap(fn: Callable[[str], Any]) -> Callable[[str], Any]:
        def spied(text: str) -> Any:
            calls.append(text)
            return fn(text)

        return spied

    return wrap


@pytest.mark.parametrize("kind", ["html", "text"])
def test_the_analysis_normalizes_a_page_main_text_once(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every module's own name for the normalizers is wrapped to record what it normalizes
    (the real functions run): the main text goes through one of them once a page, for the
    change fingerprint and the near-duplicate check together."""
    sentence = "The article says something worth reading about crawlers."
    calls: list[str] = []
    spy = _spy(calls)
    for name, module in list(sys.modules.items()):
        if not name.startswith("crawler."):
            continue
        for fn in (normalize_lines, normalize_text):
            if getattr(module, fn.__name__, None) is fn:
                monkeypatch.setattr(module, fn.__name__, spy(fn))
    assert normalize_module.normalize_text is not normalize_text  # lines_fingerprint's too
    judge = NearDuplicateJudge(NearDuplicateDetector(), host_min_pages=1)
    analysis = ContentAnalysis(UrlJoiner, main_text=True, judge=judge)
    if kind == "html":
        body = (f"<html><title>T</title><body><nav><a href=/a>A</a></nav>"
                f"<main><p>{sentence * 6}</p></main></body></html>").encode()
        out = analysis.analyze(body, "utf-8", "http://h.test/p", Directives())
    else:
        body = ("A title line\n\n" + sentence * 6).encode()
        out = analysis.analyze_document("text", body, "utf-8", "http://h.test/p.txt",
                                        Directives())
    normalized = [text for text in calls if sentence * 2 in text]
    assert out.verdict is not None and out.verdict.kind == "new"
    assert out.fingerprint == text_fingerprint(f"{out.title} {out.main_text}")
    assert len(normalized) == 1, normalized
