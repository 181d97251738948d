"""Syndication feeds read as sitemaps: sitemaps.org accepts RSS 2.0, RSS 1.0 (RDF) and Atom
feeds as sitemaps, each item a URL, and crawler-commons reads them so.

* RSS item: its ``<link>``; without one, its ``<guid>`` when that is an http(s) URL (a guid
  may be any unique string).
* Atom entry: the ``href`` of its ``<link>`` with no ``rel`` or ``rel="alternate"`` (the page),
  else of its first ``<link>``.
* Its lastmod: the latest of the dates the entry gives: Atom's ``<updated>`` and
  ``<published>`` (RFC 3339), RSS's ``<pubDate>`` (RFC 822), Dublin Core's ``<dc:date>`` (RSS
  1.0's date, W3C Datetime) and ``<dcterms:modified>``. The latest, because the date is a
  recrawl hint: a date too early could spare a page that did change, one too late only costs a
  conditional GET. RFC 822 dates are read as feedparser reads them, since feeds write them
  loosely: a two-digit year is a 19xx or 20xx one, ``Sept`` is September, an ISO 8601 date
  where RFC 822 is due is read as ISO 8601, and the zones RFC 822 names (``GMT``, ``EST``,
  ``PDT``...) and a few unambiguous others (``CET``, ``CEST``, ``JST``...) are known; a date
  without a zone, with ``-0000`` or with a military letter (whose sign RFC 1123 says was
  never reliable; RFC 5322 reads them as ``-0000``) says nothing.

Relative links are resolved against the feed's URL, as a feed reader does.
"""

from __future__ import annotations

import re
from datetime import timedelta, timezone
from email.utils import parsedate_to_datetime

from lxml import etree

from crawler.net.weburl import join as web_join
from crawler.sitemaps.lastmod import parse_lastmod

_PAGE_RELS = (None, "alternate")
_DATES = frozenset({"updated", "published", "pubDate", "date", "modified"})
# Zones outside RFC 822 that feeds write and that name one offset only (IST, BST do not).
_MORE_ZONES = {
    "CET": 1, "CEST": 2, "MET": 1, "MEST": 2, "EET": 2, "EEST": 3, "WET": 0, "WEST": 1,
    "MSK": 3, "JST": 9, "KST": 9, "HKT": 8, "SGT": 8, "AEST": 10, "AEDT": 11, "NZST": 12,
    "NZDT": 13, "HST": -10, "AKST": -9, "AKDT": -8,
}  # fmt: skip
_SEPT = re.compile(r"\bsept\b", re.IGNORECASE)
_ZONE = re.compile(r"\s([A-Za-z]{3,4})\s*$")
_ISO_START = re.compile(r"\s*\d{4}-\d{2}")


def read_feed_entry(element: etree._Element, base: str, atom: bool) -> tuple[str, str | None]:
    """(location, lastmod as W3C Datetime or None) of one RSS ``<item>`` or Atom ``<entry>``;
    the location is "" when the entry names none."""
    loc, guid, page, first = "", "", "", ""
    dates: list[str] = []
    for child in element:
        tag = local_name(child)
        if tag in _DATES:
            text = _text(child)
            if when := (rfc822_to_w3c(text) if tag == "pubDate" else text):
                dates.append(when)
        elif atom:
            if tag == "link" and (href := (child.get("href") or "").strip()):
                first = first or href
                if not page and child.get("rel") in _PAGE_RELS:
                    page = href
        elif tag == "link":
            loc = _text(child) or loc
        elif tag == "guid":
            guid = _text(child)
    if atom:
        loc = page or first
    elif not loc and guid.lower().startswith(("http://", "https://")):
        loc = guid
    return (web_join(base, loc) if loc and base else loc), latest(dates)


def latest(dates: list[str]) -> str | None:
    """The latest of an entry's dates (W3C Datetimes; unreadable ones left out), or None. One
    date is left as written: the reader reads it anyway (the common case, read once)."""
    if len(dates) <= 1:
        return dates[0] if dates else None
    moments = [(moment, when) for when in dates if (moment := parse_lastmod(when)) is not None]
    return max(moments)[1] if moments else None


def rfc822_to_w3c(value: str) -> str | None:
    """An RSS date (``Sun, 06 Sep 2009 16:20:00 +0000``) as a W3C Datetime, or None (see the
    module docstring for what is read)."""
    value = value.strip()
    if _ISO_START.match(value):  # an ISO 8601 date where RFC 822 is due
        return value if parse_lastmod(value) is not None else None
    value = _SEPT.sub("Sep", value)
    offset: int | None = None
    zone = _ZONE.search(value)
    if zone and (hours := _MORE_ZONES.get(zone.group(1).upper())) is not None:
        value, offset = value[: zone.start()] + " +0000", hours
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # no zone, "-0000" or a military letter: the moment is unknown
        return None
    if offset is not None:
        moment = moment.replace(tzinfo=timezone(timedelta(hours=offset)))
    return moment.isoformat()


def _text(element: etree._Element) -> str:
    if any(isinstance(node, etree._Entity) for node in element.iter()):
        return ""
    return "".join(element.itertext()).strip()


def local_name(element: etree._Element) -> str:
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2]
