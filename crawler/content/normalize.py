"""Text normalization shared by near-duplicate detection, the index and change detection.

Two fetches of one page often differ only in what the page *says about the moment*: a visitor
counter, "updated 3 minutes ago", today's date, a session id in a link. None of that is a change
of content, so everything here maps such tokens to fixed placeholders before the text is
fingerprinted or shingled: every plain number (counters, dates, clock times, "3rd", "10am") and
every id-like token (session ids, hashes) is masked: a crawler would rather miss that a price
changed from 10 to 12 than re-index, re-notify and re-prioritize a page every time its footer
clock ticks. Version strings are *not* masked: ``1.2.3`` becomes the one token ``1p2p3`` (a dot
between digits is kept as ``p``), and identifiers such as ``utf8``, ``x86`` or ``sha256`` stay
as they are, because documentation of version 1.2 and of version 1.3 are different pages, and a
page's "since 1.0.0" markers are part of what it says. A crawl database that wants change
detection calls :func:`text_fingerprint` on the same text and gets the same answer.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "content_fingerprint",
    "lines_fingerprint",
    "normalize_lines",
    "normalize_text",
    "text_fingerprint",
]

# Words that name a moment: "Tuesday, March 3" and "Wednesday, March 4" are the same page;
# "5 minutes ago" and "1 hour ago" too. Mapping "may" or "sun" (also ordinary words) to the same
# placeholder is harmless: both sides of a comparison are normalized alike.
_TIME_WORDS_TEXT = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec "
    "monday tuesday wednesday thursday friday saturday sunday "
    "mon tue tues wed thu thur thurs fri sat sun "
    "am pm today yesterday tomorrow ago now just "
    "second seconds sec secs minute minutes min mins hour hours hr hrs "
    "day days week weeks month months year years"
)
_TIME_WORDS = frozenset(_TIME_WORDS_TEXT.split())
# Very long ASCII tokens are hashes, base64 blobs or tracking ids, not words (the longest common
# English words are shorter). Not applied to other scripts: unsegmented CJK runs are long too.
_LONG_TOKEN = 25
# A dot between two digits (a version string) survives as a letter, so "1.2.3" is one token.
_VERSION_DOT = re.compile(r"(?<=\d)\.(?=\d)")
# A number with a unit or ordinal suffix is a counter or a moment: "3rd", "10am", "5min", "2h",
# and an ISO date-time's "14T09".
_NUMBER_SUFFIX = re.compile(r"\d+(?:st|nd|rd|th|am|pm|h|m|s|ms|min|mins|k|x|t\d+)?")
# Letters and digits alternating this often are an id ("a8f3k2j1"), not a name ("x86", "utf8").
_ID_TRANSITIONS = 4


def _separators() -> tuple[bytes, re.Pattern[str]]:
    """Punctuation, symbols, separators and controls, as two fast replacement steps.

    ASCII ones go through ``bytes.translate`` on the UTF-8 encoding (a 256-byte table: about
    10 us for 5 KB, where ``str.translate`` with a dict takes 160 us as soon as the text holds one
    curly quote); the rest through one regular expression that only scans for non-ASCII ones.
    Covers the ranges where punctuation lives; NFKC has already folded full-width forms.
    """
    ascii_table = bytearray(range(256))
    others: list[int] = []
    for block in (range(0x3040), range(0xFE30, 0xFE70), range(0xFF00, 0xFFF0)):
        for code in block:
            if unicodedata.category(chr(code))[0] in "PSZC" or code == 0x5F:
                if code < 128:
                    ascii_table[code] = 0x20
                else:
                    others.append(code)
    ranges: list[str] = []
    for _, run in itertools.groupby(enumerate(others), lambda pair: pair[1] - pair[0]):
        codes = [code for _, code in run]
        first, last = re.escape(chr(codes[0])), re.escape(chr(codes[-1]))
        ranges.append(first if len(codes) == 1 else f"{first}-{last}")
    return bytes(ascii_table), re.compile("[" + "".join(ranges) + "]+")


_ASCII_SEPARATORS, _OTHER_SEPARATORS = _separators()
_ASCII_KEEP_LINES = _ASCII_SEPARATORS[:10] + b"\n" + _ASCII_SEPARATORS[11:]


def _masks(tokens: Iterable[str]) -> dict[str, str]:
    """token -> its placeholder, for the ``tokens`` that :func:`_mask` changes.

    Only tokens that are not all letters (a digit, in any script), long ones and time words can
    change, and picking them out of a page's distinct words stays in C (``str.isalpha`` through
    ``filterfalse``, one set intersection). A cache of the words known to stay as they are did
    that before, at up to 200,000 cached words (~20 MB: the biggest part of the near-duplicate
    detector's memory on small crawls).
    """
    unique = set(tokens)
    if not unique:
        return {}
    candidates = set(itertools.filterfalse(str.isalpha, unique))
    candidates.update(_TIME_WORDS.intersection(unique))
    if max(map(len, unique)) >= _LONG_TOKEN:
        candidates.update(t for t in unique if len(t) >= _LONG_TOKEN)
    masks: dict[str, str] = {}
    for token in candidates:
        masked = _mask(token)
        if masked is not token:
            masks[token] = masked
    return masks


def _mask(token: str) -> str:
    """The placeholder for one token, or the token itself."""
    if (len(token) >= _LONG_TOKEN and token.isascii()) or token in _TIME_WORDS:
        return "#"
    if not any(c.isdigit() for c in token):
        return token
    if _NUMBER_SUFFIX.fullmatch(token):
        return "0"  # counters, dates, clock times, ordinals
    if "p" in token and token.replace("p", "").isdigit():
        return token  # a version string, "1p2p3"
    transitions = sum(a.isdigit() != b.isdigit() for a, b in itertools.pairwise(token))
    if transitions >= _ID_TRANSITIONS or len(token) > 16:
        return "#"  # session ids, hashes, tracking ids
    return token  # identifiers: utf8, x86, sha256, python3


def normalize_lines(text: str) -> list[str]:
    """:func:`normalize_text` of each line of ``text``, empty lines dropped.

    ``" ".join(normalize_lines(t)) == normalize_text(t)``: the lines of a main text are its
    blocks (paragraphs, list items, table rows), which the host template model counts.
    """
    if not text:
        return []
    if "." in text:
        text = _VERSION_DOT.sub("p", text)
    if text.isascii():
        text = text.lower().encode("ascii").translate(_ASCII_KEEP_LINES).decode("ascii")
    else:
        text = unicodedata.normalize("NFKC", text).casefold()
        text = text.encode("utf-8").translate(_ASCII_KEEP_LINES).decode("utf-8")
        text = _OTHER_SEPARATORS.sub(" ", text)
    lines = [line.split() for line in text.split("\n")]
    masks = _masks(itertools.chain.from_iterable(lines))
    if masks:
        get = masks.get
        return [" ".join([get(t, t) for t in line]) for line in lines if line]
    return [" ".join(line) for line in lines if line]


def normalize_text(text: str) -> str:
    """Canonical form of a page's text: lower case, words only, moment-specific tokens masked.

    Unicode is NFKC-folded and case-folded, punctuation dropped, numbers (with a unit or
    ordinal suffix or not) become ``0``, version strings one token (``1p2p3``), id-like tokens,
    tokens of 25+ characters and words naming a moment (months, weekdays, time units) ``#``.
    Words are joined by single spaces, which the shingler relies on.
    """
    if not text:
        return ""
    if "." in text:
        text = _VERSION_DOT.sub("p", text)
    if text.isascii():  # already NFKC; lower() is casefold() for ASCII, and faster
        text = text.lower().encode("ascii").translate(_ASCII_SEPARATORS).decode("ascii")
    else:
        text = unicodedata.normalize("NFKC", text).casefold()
        text = text.encode("utf-8").translate(_ASCII_SEPARATORS).decode("utf-8")
        text = _OTHER_SEPARATORS.sub(" ", text)
    tokens = text.split()
    masks = _masks(tokens)
    if masks:
        get = masks.get
        tokens = [get(t, t) for t in tokens]
    return " ".join(tokens)


def content_fingerprint(normalized: str) -> str:
    """Fingerprint of already normalized text (hex, 128 bits): equal means exact duplicate."""
    return hashlib.blake2b(normalized.encode("utf-8"), digest_size=16).hexdigest()


def text_fingerprint(text: str) -> str:
    """Fingerprint of raw page text; what a crawl database compares to detect a changed page."""
    return content_fingerprint(normalize_text(text))


def lines_fingerprint(title: str, lines: list[str]) -> str:
    """``text_fingerprint(f"{title} {text}")`` from ``lines = normalize_lines(text)``.

    A page's main text is normalized once, into lines the near-duplicate detector takes too
    (~1.3 ms a page of main text saved). Equal because normalizing works token by token and
    the space between the title and the text ends a token, a dot-between-digits and a Unicode
    composition alike; only the title is normalized here.
    """
    head = normalize_text(title)
    body = " ".join(lines)
    return content_fingerprint(f"{head} {body}" if head and body else head or body)
