"""Syndication feeds read as sitemaps: sitemaps.org accepts RSS 2.0, RSS 1.0 (RDF) and Atom
feeds as sitemaps, each item a URL, and crawler-commons reads them so.

* RSS item: its ``<link>``; without one, its ``<guid>`` when that is an http(s) URL (a guid
  may be any unique string); its ``<pubDate>`` (RFC 822; a two-digit year is a 19xx or 20xx
  one, a date without a zone says nothing) is its lastmod.
* Atom entry: the ``href`` of its ``<link>`` with no ``rel`` or ``rel="alternate"`` (the page),
  else of its first ``<link>``; ``<updated>`` (else ``<published>``) is its lastmod.

Relative links are resolved against the feed's URL, as a feed reader does.
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime
from urllib.parse import urljoin

from lxml import etree

_PAGE_RELS = (None, "alternate")


def read_feed_entry(
    element: etree._Element, base: str, atom: bool
) -> tuple[str, str | None]:
    """(location, lastmod as W3C Datetime or None) of one RSS ``<item>`` or Atom ``<entry>``;
    the location is "" when the entry names none."""
    loc, guid, lastmod, page, first = "", "", None, "", ""
    for child in element:
        tag = local_name(child)
        if atom:
            if tag == "link" and (href := (child.get("href") or "").strip()):
                first = first or href
                if not page and child.get("rel") in _PAGE_RELS:
                    page = href
            elif tag == "updated" or (tag == "published" and lastmod is None):
                lastmod = _text(child)
        elif tag == "link":
            loc = _text(child) or loc
        elif tag == "guid":
            guid = _text(child)
        elif tag == "pubDate":
            lastmod = rfc822_to_w3c(_text(child))
    if atom:
        loc = page or first
    elif not loc and guid.lower().startswith(("http://", "https://")):
        loc = guid
    return (urljoin(base, loc) if loc and base else loc), lastmod


def rfc822_to_w3c(value: str) -> str | None:
    """An RSS date (``Sun, 06 Sep 2009 16:20:00 +0000``) as a W3C Datetime, or None."""
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # no zone (or "-0000"): the moment is unknown
        return None
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
