"""The sitemaps feature's settings (``SITEMAPS_*``), typed, read once
(crawler/config/typed.py).

A core: free of Scrapy; the sitemap middleware builds it from the crawl's settings.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting
from crawler.sitemaps.limits import SitemapLimits


class SitemapsConfig(FeatureConfig):
    """What ``SITEMAPS_*`` says: whether sitemaps are read, whether every origin's
    /sitemap.xml is tried, what one file and one crawl may hold, which URLs a sitemap may list,
    and whether ``<lastmod>`` decides a refetch. The reasons are in
    ``crawler/config/defaults.py``."""

    enabled: bool = setting("SITEMAPS_ENABLED")
    probe: bool = setting("SITEMAPS_PROBE")
    max_urls: int = knob("sitemap_max_urls")
    max_size: int = knob("sitemap_max_bytes")
    max_site_urls: int = setting("SITEMAPS_MAX_SITE_URLS")
    folder_rule: bool = setting("SITEMAPS_FOLDER_RULE")
    lastmod: bool = setting("SITEMAPS_LASTMOD")

    def limits(self) -> SitemapLimits:
        """The bounds of reading, for the sitemap book and the readers."""
        return SitemapLimits(
            max_urls=self.max_urls, max_size=self.max_size, max_site_urls=self.max_site_urls
        )
