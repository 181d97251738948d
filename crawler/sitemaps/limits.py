"""The bounds of reading sitemaps: the protocol's own per file, and the crawl's per site."""

from __future__ import annotations

from dataclasses import dataclass

from crawler.config import defaults
from crawler.config.tuning import knob_default


@dataclass(frozen=True, slots=True)
class SitemapLimits:
    """What reading sitemaps may cost (from the ``SITEMAPS_*`` settings:
    :meth:`crawler.sitemaps.config.SitemapsConfig.limits`; their reasons are in
    ``crawler.config.defaults``).

    * ``max_urls``: entries read from one file (sitemaps.org: at most 50,000); the rest of a
      longer file is ignored, so a file of millions costs no more than a legal one.
    * ``max_size``: bytes of one file once uncompressed (sitemaps.org: 50 MB); a longer file
      is read up to there, a gzip file (a bomb?) inflated up to there and no further.
    * ``max_site_urls``: entries taken from all the sitemaps of one site (crawl), the per-site
      cap (a site config sets it in ``[settings]``).
    * ``max_files``: sitemap files fetched per crawl (an index of 50,000 sitemaps is legal,
      and each is a request to the host): a constant, not a setting.
    * ``max_index_depth``: indexes inside indexes (the protocol allows none: 1 reads an index
      and its sitemaps; an index listing indexes goes one level further at most).
    """

    max_urls: int = knob_default("sitemap_max_urls")
    max_size: int = knob_default("sitemap_max_bytes")
    max_site_urls: int = defaults.SITEMAPS_MAX_SITE_URLS
    max_files: int = 1_000
    max_index_depth: int = 2
