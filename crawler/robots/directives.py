"""Page-level robots directives: ``<meta name="robots">`` (or a meta named after the crawler's
own token), the ``X-Robots-Tag`` header and ``rel="nofollow"`` links.

``noindex``: the page is fetched and its links may be followed, but it is not indexed.
``nofollow``: the page's links are not followed. ``none`` means both. ``unavailable_after:
<date>`` ("do not show this page in search results after the specified date/time", Google) whose
date has passed when the page is read (its fetch) is ``noindex`` too; the date in the forms
Google accepts (RFC 822, RFC 850, ISO 8601; no zone is UTC), a date that does not parse ignored,
as Google does. Every other word
(``noai``, ``noarchive``, ``nosnippet``, a misspelling) and every valued directive
(``unavailable_after: <date>``, ``max-snippet: 20``) is kept as written: the usage
preferences (:mod:`crawler.robots.usage`) read some of them, and the rest are reported, never
guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# Directive names that may precede a colon themselves ("unavailable_after: <date>",
# "max-snippet: 20"); any other "name:" prefix addresses one crawler ("otherbot: noindex").
_VALUED = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)
# A crawler's name before a colon: one word, whatever it is made of ("googlebot*" names a crawler
# called that, not every one: a name is matched whole, as Google's documentation writes it).
_BOT_NAME = re.compile(r"^[^\s,:]+$")
# A valued directive and its value, up to the next comma: a date has spaces of its own
# ("unavailable_after: 25 Jun 2010 15:00:00 PST"); one in ISO form may hold colons; one in RFC
# 822 or 850 form may start with its day's name and a comma ("Friday, 25-Jun-10 15:00:00 GMT").
_VALUED_ITEM = re.compile(
    r"\b(unavailable_after|max-snippet|max-image-preview|max-video-preview)\s*:\s*"
    r"((?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\s*,)?[^,]*)",
    re.IGNORECASE,
)


@dataclass
class Directives:
    noindex: bool = False
    nofollow: bool = False
    words: list[str] = field(default_factory=list)  # every word, lower-case, in order
    valued: list[tuple[str, str]] = field(default_factory=list)  # (name, value as written)
    # the time a page's unavailable_after is compared with (its fetch); None: the clock's
    now: datetime | None = field(default=None, compare=False, repr=False)

    def copy(self) -> Directives:
        """Another with the same directives, to add a page's own to: the header's are read once
        per answer and kept with its usage decision (:func:`crawler.robots.usage.page_decision`),
        which must not take the page's."""
        return Directives(self.noindex, self.nofollow, list(self.words), list(self.valued),
                          self.now)

    def add(self, content: str) -> None:
        for match in _VALUED_ITEM.finditer(content):
            name, value = match.group(1).lower(), match.group(2).strip()
            self.valued.append((name, value))
            if name == "unavailable_after":
                when = unavailable_after_date(value)
                if when is not None and when <= (self.now or datetime.now(UTC)):
                    self.noindex = True
        content = _VALUED_ITEM.sub(" ", content)
        words = [w.strip().lower() for w in re.split(r"[,\s]+", content) if w.strip()]
        known = set(self.words)  # a list's `in` made a header of many words quadratic
        for word in words:
            if word not in known:
                known.add(word)
                self.words.append(word)
        if "none" in words:
            self.noindex = self.nofollow = True
        self.noindex = self.noindex or "noindex" in words
        self.nofollow = self.nofollow or "nofollow" in words


def unavailable_after_date(text: str) -> datetime | None:
    """An ``unavailable_after`` date (RFC 822 or 850, ISO 8601; without a zone, UTC), or None
    when it does not parse."""
    text = text.strip()
    if not text:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):  # a year of 11 digits overflows
        try:
            when = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
        except ValueError:
            return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def x_robots_tag(values: Iterable[str], token: str, now: datetime | None = None) -> Directives:
    """Directives of every ``X-Robots-Tag`` header value that applies to ``token`` (an
    ``unavailable_after`` compared with ``now``, by default the clock's).

    ``X-Robots-Tag: noindex`` applies to every crawler; ``X-Robots-Tag: otherbot: nofollow``
    only to otherbot.
    """
    out = Directives(now=now)
    for value in values:
        name, sep, rest = value.partition(":")
        name = name.strip().lower()
        if sep and name not in _VALUED and _BOT_NAME.match(name):
            if name != token:
                continue
            value = rest
        out.add(value)
    return out
