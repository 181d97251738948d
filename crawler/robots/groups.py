"""robots.txt lines and groups as RFC 9309 reads them, for one crawler: the records of the
groups that apply to its product token, and the file's ``Sitemap:`` lines.

Protego decides the matching (longest match, ``*`` and ``$``, percent-encoding), but its own
grouping differs from RFC 9309, so it is only ever given the group this module picked:

* A group ends only where a ``User-agent`` line follows a rule (``Allow``/``Disallow``). A
  ``Crawl-delay``, a ``Sitemap`` or an unknown line between two ``User-agent`` lines does not
  split them (RFC 9309 2.2.4: other records must not interfere with the grouping); Protego
  split there, so in ``User-agent: a`` / ``Crawl-delay: 1`` / ``User-agent: b`` /
  ``Disallow: /private/`` crawler ``a`` got no rules.
* A ``User-agent`` value names a product token (``foo/1.0`` names ``foo``, see
  :func:`crawler.config.agent.product_token`), matched exactly, case-insensitively: Protego
  matched a group's value anywhere in the crawler's name, so ``User-agent: mj`` applied to
  ``mj12bot``, and never matched ``FOO BAR`` to ``foo``. A line names one crawler (RFC 9309
  2.2.1: ``user-agent = product-token``): ``FOO BAR`` names ``foo`` and not ``bar``, as Google's
  parser reads it (crawler-commons also reads ``bar``: a site writing ``User-agent: a b``
  gets rules for ``a``; ``b`` falls back to ``*``).
* The groups naming the crawler are combined; without one, the ``*`` groups are (2.2.1).
* Lines are read leniently, as Google's parser does: a field name with stray bytes around it
  (a partial byte-order mark, a Latin-1 byte: see ``decode_body``) still counts, as do the
  usual misspellings and a missing colon (``Disallow /tmp``); the tags of a robots.txt
  written as an HTML page are dropped.

A line is read up to its first :data:`MAX_LINE` characters (less an escape the cut splits)
and the rest ignored: a rule cut there matches more URLs than written (a ``Disallow`` then
denies more, never less), and only URLs far longer than any the crawler requests
(``URL_MAX_LENGTH``) could tell the difference.
"""

from __future__ import annotations

import re

from protego import Protego

from crawler.config.agent import product_token

# Characters of a line read (Google's parser reads 16,663 bytes; any useful rule is far
# shorter, since URLs of more than a few KB are not crawled).
MAX_LINE = 16_384

USER_AGENT = "user-agent"
ALLOW = "allow"
DISALLOW = "disallow"
SITEMAP = "sitemap"
CRAWL_DELAY = "crawl-delay"
REQUEST_RATE = "request-rate"
# Usage preferences (crawler.robots.usage): rules of a group, as draft-ietf-aipref-attach-04
# makes Content-Usage one; Cloudflare's Content-Signal lines sit in groups the same way.
CONTENT_USAGE = "content-usage"
CONTENT_SIGNAL = "content-signal"

# Field names as written (lower-cased, words joined by one space), misspellings included.
_FIELDS = {
    "user-agent": USER_AGENT,
    "useragent": USER_AGENT,
    "user agent": USER_AGENT,
    "user_agent": USER_AGENT,
    "allow": ALLOW,
    "disallow": DISALLOW,
    "dissallow": DISALLOW,
    "dissalow": DISALLOW,
    "disalow": DISALLOW,
    "diasllow": DISALLOW,
    "disallaw": DISALLOW,
    "sitemap": SITEMAP,
    "sitemaps": SITEMAP,
    "site-map": SITEMAP,
    "crawl-delay": CRAWL_DELAY,
    "crawl delay": CRAWL_DELAY,
    "crawldelay": CRAWL_DELAY,
    "request-rate": REQUEST_RATE,
    "request rate": REQUEST_RATE,
    "content-usage": CONTENT_USAGE,
    "content usage": CONTENT_USAGE,
    "content-signal": CONTENT_SIGNAL,
    "content-signals": CONTENT_SIGNAL,
    "content signal": CONTENT_SIGNAL,
}
_RULES = (ALLOW, DISALLOW)
_USAGE = (CONTENT_USAGE, CONTENT_SIGNAL)
_DELAYS = (CRAWL_DELAY, REQUEST_RATE)

# What is not part of a field name: an undecodable byte (written %XX by decode_body), a
# replacement character, a byte-order mark, any other non-letter.
_NOT_NAME = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z _-]")

# A robots.txt written as an HTML page ("User-agent: *<br>"): its tags are not part of the
# rules (crawler-commons reads such files the same way).
_HTML_PAGE = re.compile(r"<(?:html|head|body)[\s>]", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


def _field(name: str) -> str | None:
    """The field a name stands for, stray characters around or inside it dropped."""
    field = _FIELDS.get(name.strip().lower())
    if field is None:
        field = _FIELDS.get(" ".join(_NOT_NAME.sub("", name).lower().split()))
    return field


def _record(line: str) -> tuple[str, str] | None:
    """``(field, value)`` of a stripped, comment-free line; None for an unknown field."""
    name, colon, value = line.partition(":")
    if colon:
        field = _field(name)
        if field is not None:
            return field, value.strip()
    # No colon, or none after a field name: "Disallow /tmp", "Sitemap https://x/s.xml",
    # "User agent foo". As Google's parser does, only a one-word value is taken so: a line of
    # prose that starts with a field name ("Disallow all robots") is no rule.
    words = line.split()
    for count in (1, 2):
        if len(words) == count + 1:
            field = _field(" ".join(words[:count]))
            if field is not None:
                return field, words[count]
    return None


# A "%" and at most one hex digit at the end of a cut line: the start of an escape, maybe.
_PARTIAL_ESCAPE = re.compile(r"%[0-9A-Fa-f]?$")


def _cut(line: str) -> str:
    """A line past :data:`MAX_LINE` cut there, without an escape the cut splits: a "%E" left
    of "%E9" reads as a literal "%" (:func:`octets`), and the cut rule would match none of
    the URLs the whole one matched."""
    cut = line[:MAX_LINE]
    partial = _PARTIAL_ESCAPE.search(cut)
    if partial is not None and _PERCENT.match(line, partial.start()).group(1) is not None:
        cut = cut[: partial.start()]
    return cut


def read_groups(text: str, token: str) -> tuple[list[tuple[str, str]] | None, list[str]]:
    """The records that apply to the crawler ``token`` (lower-case), in file order: those of
    every group naming it, else those of every ``*`` group; None when no group applies (no
    rules at all). Then the file's ``Sitemap:`` values, which belong to no group.

    A record is ``(field, value)``: an ``allow`` or ``disallow`` rule (an empty value
    included: it matches nothing, but it is a rule), a ``crawl-delay`` or a ``request-rate``,
    a ``content-usage`` or ``content-signal`` line (rules too: a ``User-agent`` line after
    one opens the next group).
    A rule applies to every agent of its group; a delay, which RFC 9309 does not define, to
    the agents named above it (``User-agent: a`` / ``Crawl-delay: 5`` / ``User-agent: b`` /
    ``Crawl-delay: 9``: a waits 5 s, b 9 s, as crawler-commons and Protego read it).
    """
    ours: list[tuple[str, str]] = []
    anyone: list[tuple[str, str]] = []
    found_ours = found_anyone = False
    sitemaps: list[str] = []
    # the group being read: whether it names us / "*", its records, whether a rule came yet
    names_us = names_anyone = in_group = ruled = False
    records: list[tuple[str, str]] = []

    def close() -> None:
        if names_us:
            ours.extend(records)
        if names_anyone:
            anyone.extend(records)

    html = _HTML_PAGE.search(text) is not None
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if len(line) > MAX_LINE:
            line = _cut(line)
        if html:
            line = _TAG.sub("", line)
        comment = line.find("#")
        if comment >= 0:
            line = line[:comment]
        line = line.strip()
        if not line:
            continue
        record = _record(line)
        if record is None:
            continue
        field, value = record
        if field == USER_AGENT:
            if ruled:  # a user-agent line after a rule opens the next group
                close()
                names_us = names_anyone = ruled = False
                records = []
            in_group = True
            agent = product_token(value)
            if agent == token:
                names_us = found_ours = True
            elif agent == "*":
                names_anyone = found_anyone = True
        elif field == SITEMAP:
            if value:
                sitemaps.append(value)
        elif not in_group:  # records before the first user-agent line belong to no group
            continue
        elif field in _RULES or field in _USAGE:
            records.append((field, value))
            ruled = True
        else:  # a delay: for the agents named above it in the group
            if names_us:
                ours.append((field, value))
            if names_anyone:
                anyone.append((field, value))
    close()
    if found_ours:
        return ours, sitemaps
    return (anyone if found_anyone else None), sitemaps


# A "%" and what follows it: an escape's two hex digits, if it is one.
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})?")


def _escape(match: re.Match[str]) -> str:
    hex_digits = match.group(1)
    if hex_digits is None or hex_digits == "25":
        return "%2525"  # a literal "%": one that starts no escape is one (RFC 3986 2.4)
    if int(hex_digits, 16) >= 0x80:
        return "%25" + hex_digits.upper()
    return match.group(0)  # an ASCII escape: Protego's normalization decides


def octets(value: str) -> str:
    """A rule's path or a URL as Protego is given it, so that it compares the octets RFC 9309
    2.2.2 compares: those of the UTF-8, percent-encoded form.

    Protego decodes every escape but ``%25`` and ``%2F`` and decodes the result as UTF-8,
    each octet that is not UTF-8 turning into U+FFFD: ``Disallow: /v1/%F0`` (an octet of
    a Latin-1 file, or the first of a four-octet character) became ``/v1/%EF%BF%BD``, which
    matched any other stray octet and not ``/v1/%F0%9F%90%8D``. So every non-ASCII octet, raw or
    escaped, is handed over escaped twice (``%25F0``), which Protego keeps as it is; a
    literal ``%`` (``%25``, or one that starts no escape) becomes ``%2525``, so that the two
    never meet (a ``%25`` is followed by ``25`` or by a hex digit of 8 and above). A lone
    surrogate (an undecodable byte Python kept) is its octets too. Both sides go through
    this: the comparison is unchanged for ASCII."""
    if value.isascii():
        if "%" not in value:
            return value
    else:
        value = "".join(
            char if char.isascii() else "".join(f"%{b:02X}" for b in _char_octets(char))
            for char in value
        )
    return _PERCENT.sub(_escape, value)


def _char_octets(char: str) -> bytes:
    """The UTF-8 octets of a character; those of a surrogate escape are its byte."""
    if "\udc80" <= char <= "\udcff":
        return char.encode("utf-8", "surrogateescape")
    return char.encode("utf-8", "surrogatepass")


def weigh_as_written(parser: Protego) -> None:
    """Give each of a parsed file's patterns the length Protego gave it before :func:`octets`
    respelled it, and sort its rules again: the longest match wins (RFC 9309 2.2.2), and a
    pattern's length is Protego's priority. ``octets`` writes an octet outside ASCII as
    ``%25F0`` and a literal ``%`` as ``%2525``, five characters for the three of ``%F0`` and
    ``%25``: unweighed, ``Allow: /*é`` (12) outweighed ``Disallow: /abcdefgh`` (9) on
    ``/abcdefghé``, a URL Protego, Google's parser and RFC 9309's count of octets disallow.
    Every ``%25`` in a pattern is one ``octets`` wrote (it respells each ``%`` it is given),
    so each one counts 2 less."""
    # Protego's own attributes: it has no public way to weigh a pattern (the tests pin them).
    # Read defensively: RobotsRules drops a file whose parsing raises (no rules at all), and
    # a Protego that renamed them must cost the weighing only, never the file's rules.
    for rule_set in getattr(parser, "_user_agents", {}).values():
        for rule in getattr(rule_set, "_rules", ()):
            pattern = getattr(rule, "value", None)
            written = getattr(pattern, "_pattern", None)
            if isinstance(written, str) and hasattr(pattern, "priority"):
                pattern.priority = len(written) - 2 * written.count("%25")
        finalize = getattr(rule_set, "finalize_rules", None)
        if finalize is not None:
            finalize()


def protego_text(records: list[tuple[str, str]]) -> str:
    """The records as one ``*`` group, the only thing Protego is given to parse: its matching
    then applies to exactly these rules, whatever its own grouping would have made of the
    file. Of each delay field only the first counts (the one nearest the crawler's name)."""
    lines = []
    delays: set[str] = set()
    for field, value in records:
        if not value or field in delays or field in _USAGE:
            continue
        if field not in _RULES:
            delays.add(field)
        lines.append(f"{field}: {octets(value) if field in _RULES else value}")
    return "User-agent: *\n" + "\n".join(lines) + "\n"
