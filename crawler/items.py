"""The page item every site spider yields; Scrapy's feed exports (``-o pages.jsonl``) write it."""

from __future__ import annotations

import scrapy

# response.meta key: the fingerprint of what the page says (its title and main text, normalized),
# set by the site spider; the crawl database compares it across fetches to detect a change.
PAGE_FINGERPRINT_META = "page_fingerprint"


class PageItem(scrapy.Item):
    url = scrapy.Field()  # the URL as requested (after normalization)
    final_url = scrapy.Field()  # after redirects
    status = scrapy.Field()
    fetched_at = scrapy.Field()  # UTC ISO 8601
    depth = scrapy.Field()
    site = scrapy.Field()
    title = scrapy.Field()
    text = scrapy.Field()  # visible text of the page
    main_text = scrapy.Field()  # main content, boilerplate removed (crawler.content.maintext)
    outlinks = scrapy.Field()  # [{"url": ..., "text": anchor text}, ...] as extracted
    content_fingerprint = scrapy.Field()  # of the normalized main text (content pipelines)
    last_modified = scrapy.Field()
    etag = scrapy.Field()
    content_type = scrapy.Field()
    # Set by the content pipelines:
    duplicate_of = scrapy.Field()
    similarity = scrapy.Field()
    noindex = scrapy.Field()
