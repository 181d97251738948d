"""The page item every site spider yields, and what a site's items carry beyond the page itself:
its ``[fields]`` and, in feeds, outlinks.

* :class:`PageItem`: a field for each name of :data:`crawler.items.PAGE_FIELDS` (the one list of
  them, which the site config also reads), and the content analysis's near-duplicate verdict
  (:attr:`PageItem.verdict`), which is not a field: the feeds never see it, the near-duplicate
  pipeline counts it.
* ``[fields]`` (``crawler/sites/fields.py``): a site with extra fields gets its own item class, a
  subclass of :class:`PageItem` with those fields added, so the built-in fields and everything
  that reads them (pipelines, the crawl database) are untouched.
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
from crawler.content.analysis_neardup import Verdict
from crawler.items import PAGE_FIELDS
from crawler.sites import SiteConfig


class _JudgedItem(scrapy.Item):
    _verdict: Verdict | None = None

    @property
    def verdict(self) -> Verdict | None:
        """The near-duplicate verdict the content analysis gave the page (None: not judged)."""
        return self._verdict

    def judged(self, verdict: Verdict) -> None:
        """Take ``verdict``: its fields (``content_fingerprint``, ``duplicate_of``,
        ``similarity``) and the verdict itself."""
        self.update(verdict.item_fields())
        self._verdict = verdict


PageItem: type[_JudgedItem] = type(
    "PageItem",
    (_JudgedItem,),
    {
        **{name: scrapy.Field() for name in PAGE_FIELDS},
        "__module__": __name__,
        "__doc__": "A fetched page: the fields of crawler.items.PAGE_FIELDS.",
    },
)


@lru_cache(maxsize=64)
def _item_class(name: str, fields: tuple[str, ...]) -> type[_JudgedItem]:
    class_name = "".join(p.capitalize() for p in name.replace("-", "_").split("_")) + "PageItem"
    attrs: dict[str, Any] = {f: scrapy.Field() for f in fields}
    attrs["__module__"] = __name__
    return type(class_name, (PageItem,), attrs)


def item_class(site: SiteConfig) -> type[_JudgedItem]:
    """The item class of ``site``: :class:`PageItem` plus its ``[fields]``, if any."""
    if not site.fields:
        return PageItem
    return _item_class(site.name, tuple(site.fields))


def with_site_fields(site: SiteConfig, item: Any, values: dict[str, Any]) -> Any:
    """``item`` with the site's ``[fields]`` ``values`` (extracted by the content analysis)."""
    if not site.fields:
        return item
    extended = item_class(site)(item)
    extended.update(values)
    return extended


def item_feed_settings(settings: BaseSettings, site: SiteConfig | None) -> None:
    """Leave outlinks out of the feeds when ``ITEM_OUTLINKS`` is off (at the spider's priority,
    so an explicit ``FEED_EXPORT_FIELDS`` wins)."""
    if settings.getbool("ITEM_OUTLINKS", defaults.ITEM_OUTLINKS):
        return
    if settings.get("FEED_EXPORT_FIELDS"):
        return
    extra = tuple(site.fields) if site is not None else ()
    fields = [f for f in (*PAGE_FIELDS, *extra) if f != "outlinks"]
    settings.set("FEED_EXPORT_FIELDS", fields, priority="spider")
