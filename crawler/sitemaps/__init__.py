"""Sitemaps (sitemaps.org protocol), free of Scrapy: the bounds a crawl keeps while it reads
them, what kind of file an answer is, and what a ``<lastmod>`` means for a page the crawl
database knows.

``crawler.middlewares.sitemaps`` (the adapter) fetches sitemap files through the frontier,
parses them with Scrapy's own ``scrapy.utils.sitemap.Sitemap`` and ``gunzip`` and asks this
package what to do with each file and each entry.
"""

from crawler.sitemaps.book import SitemapBook, SitemapFile
from crawler.sitemaps.files import GZIP, TEXT, XML, file_kind, text_sitemap_urls
from crawler.sitemaps.lastmod import CHANGED, NEW, UNCHANGED, UNKNOWN, decide, parse_lastmod
from crawler.sitemaps.limits import SitemapLimits

__all__ = [
    "CHANGED",
    "GZIP",
    "NEW",
    "TEXT",
    "UNCHANGED",
    "UNKNOWN",
    "XML",
    "SitemapBook",
    "SitemapFile",
    "SitemapLimits",
    "decide",
    "file_kind",
    "parse_lastmod",
    "text_sitemap_urls",
]
