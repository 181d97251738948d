"""What a page item holds: the one list of its fields, and the ``response.meta`` keys that go
with it.

Free of Scrapy, so the site config (``crawler.sites.fields``: a ``[fields]`` name may not take a
built-in one) reads the same list the item class is made of
(``crawler.spiders.site_items.PageItem``); Scrapy's feed exports (``-o pages.jsonl``) write the
items.
"""

from __future__ import annotations

# The page item's fields, in their order.
PAGE_FIELDS = (
    "url",  # the URL as requested (after normalization)
    "final_url",  # after redirects
    "status",
    "fetched_at",  # UTC ISO 8601
    "depth",
    "site",
    "title",
    "text",  # visible text of the page
    "main_text",  # main content, boilerplate removed (crawler.content.maintext)
    "outlinks",  # [{"url": ..., "text": anchor text}, ...] as extracted
    "content_fingerprint",  # of the normalized main text (the near-duplicate verdict)
    "last_modified",
    "etag",
    "content_type",
    # The near-duplicate verdict of a duplicate (crawler.content.analysis_neardup):
    "duplicate_of",
    "similarity",
    "noindex",
    # The canonical URL the page names, when honoured (crawler.content.canonical): the index
    # keeps the page as its alias.
    "canonical",
    # A PDF, DOCX, ODT or text file whose text is missing or partial: why (encrypted,
    # malformed, truncated, too_many_pages, bomb, memory, cpu_time, parser_lost;
    # crawler.content.documents). None when read in full, and for HTML.
    "document_problem",
    # Usage preferences the page carried (crawler/robots/usage.py): each signal as
    # "<source> <signal>:<key>[=<value>]", unknown ones included, and the uses they deny of
    # search, archive, ai-train, ai-input (a data set built from the items leaves these out).
    "usage",
    "usage_denied",
    # True when the page is its host's "not found" page served with 200 (crawler.content.soft404)
    "soft_404",
    # What the page says beyond its text (CONTENT_MARKDOWN, CONTENT_METADATA):
    "markdown",  # the main content as Markdown (crawler.content.markdown)
    "language",  # ISO 639-1 code of the main text (crawler.content.language), "" unknown
    "description",  # <meta name="description">, else OpenGraph's
    "published",  # ISO 8601, as the page states it (JSON-LD, microdata, article: metas)
    "modified",
    "metadata",  # the rest: OpenGraph, Twitter card, JSON-LD, microdata, <html lang>
)

# response.meta key: the fingerprint of what the page says (its title and main text, normalized),
# set by the site spider; the crawl database compares it across fetches to detect a change.
PAGE_FINGERPRINT_META = "page_fingerprint"

# response.meta key: on a 304 Not Modified, what the crawl database holds of the page (a
# crawler.crawldb.PageRecord: its outlinks, validators), set by the conditional-GET middleware
# for the site spider, which makes the "not modified" item of it.
NOT_MODIFIED_META = "not_modified_record"
