"""Sitemaps (sitemaps.org protocol), free of Scrapy: the bounds a crawl keeps while it reads
them, what kind of file an answer is (by its bytes), how an XML sitemap is read, which URLs a
sitemap may list (its folder), and what a ``<lastmod>`` means for a page the crawl database
knows.

``crawler.middlewares.sitemaps`` (the adapter) fetches sitemap files through the frontier,
inflates them with Scrapy's bounded ``gunzip`` and asks this package what to do with each file
and each entry.
"""

from crawler.sitemaps.book import SitemapBook, SitemapFile
from crawler.sitemaps.files import (
    GZIP,
    JSON,
    TEXT,
    XML,
    cut_text,
    file_kind,
    is_feed,
    text_sitemap_urls,
)
from crawler.sitemaps.jsonfeed import read_json_feed
from crawler.sitemaps.lastmod import CHANGED, NEW, UNCHANGED, UNKNOWN, decide, parse_lastmod
from crawler.sitemaps.limits import SitemapLimits
from crawler.sitemaps.location import FOREIGN, IN, OUT_OF_FOLDER, Coverage
from crawler.sitemaps.xmlfile import FEEDS, SITEMAPINDEX, URLSET, XmlSitemap, read_xml

__all__ = [
    "CHANGED",
    "FEEDS",
    "FOREIGN",
    "GZIP",
    "IN",
    "JSON",
    "NEW",
    "OUT_OF_FOLDER",
    "SITEMAPINDEX",
    "TEXT",
    "UNCHANGED",
    "UNKNOWN",
    "URLSET",
    "XML",
    "Coverage",
    "SitemapBook",
    "SitemapFile",
    "SitemapLimits",
    "XmlSitemap",
    "cut_text",
    "decide",
    "file_kind",
    "is_feed",
    "parse_lastmod",
    "read_json_feed",
    "read_xml",
    "text_sitemap_urls",
]
