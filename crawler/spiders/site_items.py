"""What a site's items carry beyond the page itself: its ``[fields]`` and, in feeds, outlinks.

Kept apart from the site spider's parsing: the spider calls :func:`with_site_fields` once per
HTML page and :func:`item_feed_settings` once per crawl.

* ``[fields]`` (``crawler/sites/fields.py``): a site with extra fields gets its own item class, a
  subclass of :class:`~crawler.items.PageItem` with those fields added, so the built-in fields
  and everything that reads them (pipelines, the crawl database) are untouched.
* ``ITEM_OUTLINKS = False``: outlinks are most of a feed's bytes. They stay in the item for the
  pipelines and the crawl database (the index learns anchor texts from them; a 304 refetch
  follows them); only the feeds (``-o``, scrapyd's items) leave them out, through
  ``FEED_EXPORT_FIELDS`` unless that is set already.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import scrapy
from scrapy.settings import BaseSettings

from crawler.config import defaults
from crawler.items import PageItem
from crawler.sites import SiteConfig
from crawler.sites.fields import ITEM_FIELDS, extract_fields


@lru_cache(maxsize=64)
def _item_class(name: str, fields: tuple[str, ...]) -> type[PageItem]:
    class_name = "".join(p.capitalize() for p in name.replace("-", "_").split("_")) + "PageItem"
    attrs: dict[str, Any] = {f: scrapy.Field() for f in fields}
    attrs["__module__"] = __name__
    return type(class_name, (PageItem,), attrs)


def item_class(site: SiteConfig) -> type[PageItem]:
    """The item class of ``site``: :class:`PageItem` plus its ``[fields]``, if any."""
    if not site.fields:
        return PageItem
    return _item_class(site.name, tuple(site.fields))


def with_site_fields(
    site: SiteConfig, item: PageItem, body: bytes, encoding: str | None
) -> PageItem:
    """``item`` with the site's ``[fields]`` extracted from the page's HTML ``body``."""
    if not site.fields:
        return item
    extended = item_class(site)(item)
    extended.update(extract_fields(site.fields, body, encoding))
    return extended


def item_feed_settings(settings: BaseSettings, site: SiteConfig | None) -> None:
    """Leave outlinks out of the feeds when ``ITEM_OUTLINKS`` is off (at the spider's priority,
    so an explicit ``FEED_EXPORT_FIELDS`` wins)."""
    if settings.getbool("ITEM_OUTLINKS", defaults.ITEM_OUTLINKS):
        return
    if settings.get("FEED_EXPORT_FIELDS"):
        return
    extra = tuple(site.fields) if site is not None else ()
    fields = [f for f in (*ITEM_FIELDS, *extra) if f != "outlinks"]
    settings.set("FEED_EXPORT_FIELDS", fields, priority="spider")
