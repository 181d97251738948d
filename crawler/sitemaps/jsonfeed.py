"""JSON Feed (https://jsonfeed.org/version/1.1), read as RSS and Atom are: each item a URL.

An item's page is its ``url`` (its permalink), else its ``id`` when that is an http(s) URL (an
id may be any unique string); ``external_url`` names a page the item is about, elsewhere, and
is not the item's. Its lastmod is the later of ``date_modified`` and ``date_published`` (RFC
3339), as for the other feeds (``crawler.sitemaps.feeds``). A relative URL is resolved
against the feed's URL.

The file is parsed whole (JSON has no streaming reader in the standard library): it is already
cut to ``sitemap_max_bytes``, and a nesting too deep to parse (``RecursionError``) is an
unreadable file like any other.
"""

from __future__ import annotations

import json
from typing import Any

from crawler.net.weburl import join as web_join
from crawler.sitemaps.feeds import latest

Row = tuple[str, str | None]


def read_json_feed(body: bytes, limit: int, base: str = "") -> tuple[list[Row], bool, str]:
    """(rows, whether items past ``limit`` were left, why nothing could be read ("": read))."""
    try:
        feed: Any = json.loads(body.decode("utf-8", errors="replace").removeprefix("\ufeff"))
    except (ValueError, RecursionError) as exc:
        return [], False, f"not JSON ({type(exc).__name__})"
    items = feed.get("items") if isinstance(feed, dict) else None
    if not isinstance(items, list):
        return [], False, "no items list"
    rows: list[Row] = []
    for item in items:
        if len(rows) >= limit:
            return rows, True, ""
        if not isinstance(item, dict):
            continue
        loc = _string(item.get("url"))
        if not loc:
            guid = _string(item.get("id"))
            loc = guid if guid.lower().startswith(("http://", "https://")) else ""
        if not loc:
            continue
        dates = [
            when for key in ("date_modified", "date_published") if (when := _string(item.get(key)))
        ]
        rows.append((web_join(base, loc) if base else loc, latest(dates)))
    return rows, False, ""


def _string(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
