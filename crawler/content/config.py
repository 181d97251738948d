"""What a page's content analysis keeps (``PAGE_MAX_*``, ``CONTENT_*``), typed, read once
(crawler/config/typed.py).

A core: free of Scrapy; the site spider's content analysis is built from it.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, setting


class ContentConfig(FeatureConfig):
    """How much of a page is parsed and kept (its HTML, links and text: limits a hostile page
    cannot push past), and which optional fields its item gets (Markdown, metadata). The
    reasons are in ``crawler/config/defaults.py``."""

    max_html: int = setting("PAGE_MAX_HTML")
    max_links: int = setting("PAGE_MAX_LINKS")
    max_text: int = setting("CONTENT_MAX_TEXT")
    markdown: bool = setting("CONTENT_MARKDOWN")
    metadata: bool = setting("CONTENT_METADATA")
