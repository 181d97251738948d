"""What a page's content analysis keeps (``PAGE_MAX_*``, ``CONTENT_*``) and how it judges
near-duplicates (``NEARDUP_*``), typed, read once (crawler/config/typed.py).

A core: free of Scrapy; the site spider's content analysis is built from it.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting


class ContentConfig(FeatureConfig):
    """How much of a page is parsed and kept (its HTML, links and text: limits a hostile page
    cannot push past), and which optional fields its item gets (Markdown, metadata). The
    reasons are in ``crawler/config/defaults.py``."""

    max_html: int = setting("PAGE_MAX_HTML")
    max_links: int = setting("PAGE_MAX_LINKS")
    max_text: int = setting("CONTENT_MAX_TEXT")
    markdown: bool = setting("CONTENT_MARKDOWN")
    metadata: bool = setting("CONTENT_METADATA")


class NeardupConfig(FeatureConfig):
    """What ``NEARDUP_*`` says: whether pages are judged, from which estimated similarity one
    is a near-duplicate, whether a near-duplicate is indexed as an alias, how much deeper its
    links go. The detector's sizes are constants (crawler/content/neardup_features.py), the
    same in every worker of a crawl."""

    enabled: bool = setting("NEARDUP_ENABLED")
    threshold: float = setting("NEARDUP_THRESHOLD")
    index_duplicates: bool = setting("NEARDUP_INDEX_DUPLICATES")
    link_demotion: int = knob("neardup_link_demotion")
