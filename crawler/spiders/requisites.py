"""Page requisites in the crawl: the requests for a page's embedded resources, and what the
spider does with their answers (``[requisites]`` in a site config; the rule is in
``crawler.sites.sitefile.Requisites``).

A requisite is a Request with ``meta[REQUISITE_META]`` (its hops from the page), a high
``priority`` (``REQUISITE_PRIORITY``: the front queue of the most urgent URLs under every
priority policy but OPIC, where it carries the page's cash instead) and the spider's
:meth:`parse_requisite` as callback, which yields no item: a requisite is archived (the WARC
capture sees every response) and never becomes a page. A stylesheet's ``url(...)`` and
``@import`` and a frame's own requisites are requested in turn, up to ``max_hops``; nothing in a
requisite is ever followed as a link.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response

from crawler.content.document import decode_stylesheet
from crawler.content.encoding import transport_encoding
from crawler.content.requisites import absolute_requisites, css_references, html_requisites
from crawler.meta import CASH_META, REQUISITE_META

# Above any recrawl boost (crawler/extensions/recrawl.py): front queue 0 under "depth",
# "breadth_first", "request" and "fifo"
REQUISITE_PRIORITY = 1000
# a stylesheet or a frame is read for its own requisites up to this many bytes
_CSS_MAX_BYTES = 2_000_000


def requisite_requests(
    spider: Any, response: Response, urls: list[str], hops: int
) -> Iterator[Request]:
    """Requests for ``urls``, the requisites of ``response`` at ``hops`` from the page."""
    if not urls:
        return
    stats = spider.crawler.stats
    cash = response.meta.get(CASH_META)
    for url in urls:
        meta: dict[str, Any] = {REQUISITE_META: hops}
        if cash:
            meta[CASH_META] = cash  # OPIC ranks by cash: the embeds rank with their page
        try:
            request = Request(
                url, callback=spider.parse_requisite, priority=REQUISITE_PRIORITY, meta=meta
            )
        except ValueError:
            stats.inc_value("requisites/invalid")
            continue
        stats.inc_value("requisites/requested")
        yield request


def nested_requisites(response: Response, limit: int) -> tuple[list[str], int]:
    """A fetched requisite's own requisites: a stylesheet's ``url(...)``/``@import``, a
    frame's embedded resources; nothing for anything else. With how many the bound cut."""
    content_type = response.headers.get(b"Content-Type")
    kind = (content_type or b"").decode("latin-1").lower()
    encoding = transport_encoding(response.headers.getlist(b"Content-Type"))
    path = response.url.partition("?")[0].lower()
    if "css" in kind or (not kind and path.endswith(".css")):
        # BOM, Content-Type charset, @charset, guess (CSS Syntax 3.2), not response.encoding
        text = decode_stylesheet(response.body[:_CSS_MAX_BYTES], encoding)
        return absolute_requisites(response.url, css_references(text), limit)
    if "html" in kind:
        refs, base_href = html_requisites(response.body[:_CSS_MAX_BYTES], encoding)
        return absolute_requisites(response.url, refs, limit, base_href)
    return [], 0
