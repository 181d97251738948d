"""Soft 404s: pages that say "not found" with a ``200 OK``.

A host's answer to a path that cannot exist (one probe per host, a random
``/<24 characters>-soft404-probe``) is what that host's "not found" looks like. A page of the
same host whose answer resembles it is a soft 404: it is flagged, not indexed, and counted.

What "resembles" means:

* Only ``2xx`` answers are judged, and only against a probe that was answered ``2xx`` too: a
  host that answers the probe ``404`` tells missing pages apart honestly.
* A probe answered with a redirect (to the home page, to ``/404.html``...) marks the pages
  that were redirected to the same place; a page fetched there directly (the home page
  itself) is not a soft 404. The probe's redirect is not followed: its target is a page of
  the host that the crawl should fetch as a page, not as a probe.
* Otherwise the texts are compared: the page's title and main text (the site's template left
  out, :mod:`crawler.content.maintext`), normalized, as sets of word shingles (Jaccard). Many
  not-found pages repeat the requested path ("The URL /foo/bar was not found") or fill a
  search box with its words: the words of each answer's own path are removed from its text
  before the comparison, so the probe's random token and a page's path words do not count.
  Short texts (a one-line "Not Found") are compared word by word.

``bench/soft404.py`` measures it on real not-found pages of web servers and documentation
generators, served with 200 beside real documentation pages (see ``THRESHOLD``).
"""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from crawler.content.normalize import normalize_text

PROBE_SUFFIX = "-soft404-probe"
PROBE_TOKEN_LENGTH = 24
SHINGLE = 3  # words per shingle; texts shorter than this compare as sets of words
# Words of an answer compared (its first ones): a not-found page is short, and a crawl of a
# million hosts keeps one answer per host that answers its probe 2xx.
MAX_WORDS = 300
# Jaccard similarity of the shingle sets at and above which a page is the host's not-found
# page. On bench/soft404.py's set every threshold from 0.2 to 0.9 scores alike (a not-found
# page for another path scores 1.0 once path words are left out, real pages 0.0); halfway
# leaves room for not-found pages that list suggestions or the latest posts.
THRESHOLD = 0.5
_ALPHABET = string.ascii_lowercase + string.digits
_PATH_WORDS = re.compile(r"[^\W_]+", re.UNICODE)


def probe_path() -> str:
    """A path no site has: 24 random letters and digits (124 bits), then a suffix that says
    what it is to whoever reads the access log."""
    token = "".join(secrets.choice(_ALPHABET) for _ in range(PROBE_TOKEN_LENGTH))
    return f"/{token}{PROBE_SUFFIX}"


def is_probe_path(path: str) -> bool:
    return path.endswith(PROBE_SUFFIX) and len(path) == 1 + PROBE_TOKEN_LENGTH + len(
        PROBE_SUFFIX
    )


@dataclass(frozen=True, slots=True)
class Answer:
    """What is compared of one answer: its status, where it was redirected (the final URL
    without its fragment, None when it was not), its normalized words, and the words of its
    own URL (left out of both sides of a comparison)."""

    status: int
    redirected_to: str | None
    words: tuple[str, ...]
    path_words: frozenset[str] = frozenset()

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def _path_words(url: str) -> set[str]:
    """The words of a URL's path and query, normalized as the text is (so "/Foo-Bar?q=baz"
    removes "foo", "bar", "q" and "baz" from the text)."""
    parts = urlsplit(url)
    raw = unquote(f"{parts.path} {parts.query}")
    return set(normalize_text(" ".join(_PATH_WORDS.findall(raw))).split())


def answer_of(
    status: int, title: str, text: str, url: str, final_url: str | None = None
) -> Answer:
    """The comparable form of an answer to ``url`` (``final_url``: after redirects, or the
    ``Location`` of a redirect that was not followed)."""
    ok = 200 <= status < 300  # the words of an error answer are never compared
    final = final_url or url
    redirected = final.split("#", 1)[0] if final != url else None
    words = tuple(normalize_text(f"{title}\n{text}").split()[:MAX_WORDS]) if ok else ()
    return Answer(status, redirected, words, frozenset(_path_words(url) | _path_words(final)))


def _shingles(words: tuple[str, ...], drop: frozenset[str]) -> set[tuple[str, ...]]:
    words = tuple(w for w in words if w not in drop)
    if len(words) < SHINGLE:
        return {(w,) for w in words}
    return {words[i : i + SHINGLE] for i in range(len(words) - SHINGLE + 1)}


def similarity(a: Answer, b: Answer) -> float:
    """Jaccard similarity of the two answers' word shingles (1.0: the same words in the same
    order; two empty texts are the same)."""
    drop = a.path_words | b.path_words
    sa, sb = _shingles(a.words, drop), _shingles(b.words, drop)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def is_soft_404(probe: Answer, page: Answer, threshold: float = THRESHOLD) -> bool:
    """Whether ``page`` is the host's not-found answer again (see the module docstring)."""
    if not page.ok:
        return False
    if probe.redirected_to is not None:
        return page.redirected_to == probe.redirected_to
    if not probe.ok:
        return False
    # Jaccard is at most the ratio of the set sizes: a page many times longer than the
    # not-found page is not one, and its shingles need not be made.
    shorter, longer = sorted((len(probe.words), len(page.words)))
    if longer > SHINGLE and (shorter + SHINGLE) / longer < threshold:
        return False
    return similarity(probe, page) >= threshold
