"""The site spider's documents: PDF, DOCX, ODT and plain text, read like pages.

A response the spider does not parse as HTML is a document when ``crawler.content.documents``
knows its kind and the site reads that kind (``[content] types``). It is read in the crawl's
document child (:func:`crawler.offload.components.document_process`: a memory limit and a CPU
limit per document), waited for on the content thread, then finished exactly like an HTML
page: its item (text, title, ``document_problem``), its near-duplicate verdict, its links (a
PDF's URI annotations) handed to the frontier, which applies robots.txt and the site's scope.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future

from crawler.content.documents import document_kind
from crawler.content.encoding import transport_encoding
from crawler.offload.components import (
    ContentWorker,
    ParseProcess,
    content_worker,
    document_process,
)
from crawler.robots import Directives as RobotsDirectives
from crawler.sites.analysis import PageAnalysis
from crawler.spiders.site_items import PageItem

if TYPE_CHECKING:
    from crawler.sites import SiteConfig
    from crawler.spiders.analysis import CrawlContentAnalysis


class DocumentParsing:
    """The document half of :class:`crawler.spiders.site.SiteSpider` (a base class of it)."""

    site: SiteConfig
    content: CrawlContentAnalysis
    crawler: Any

    def _document_kind(self, response: Response, content_type: str | None) -> str | None:
        """The document kind of a response the site reads (``[content] types``), else None."""
        kind = document_kind(content_type, response.url, response.body[:8])
        if kind is None:
            return None
        if kind not in self.site.content.types:
            self.crawler.stats.inc_value("documents/not_read")
            return None
        return kind

    def _parse_document(
        self, response: Response, kind: str
    ) -> Iterator[PageItem | scrapy.Request] | AsyncIterator[PageItem | scrapy.Request]:
        """A document's item and links, like a page's: read in the crawl's document child
        (limits on memory and CPU time), waited for on the content thread when there is one."""
        crawler = getattr(self, "crawler", None)
        reader = document_process(crawler)
        worker = content_worker(crawler)
        if worker is not None:
            return self._document_offloaded(response, kind, reader, worker)
        _, meta, item, directives = self._start_item(response)
        item, analysis = self._document_page(response, meta, item, directives, kind, reader)
        return self._finish_html(response, item, analysis)

    async def _document_offloaded(
        self, response: Response, kind: str, reader: ParseProcess | None, worker: ContentWorker
    ) -> AsyncIterator[PageItem | scrapy.Request]:
        _, meta, item, directives = self._start_item(response)
        item, analysis = await maybe_deferred_to_future(
            worker.run(self._document_page, response, meta, item, directives, kind, reader)
        )
        for request_or_item in self._finish_html(response, item, analysis):
            yield request_or_item

    def _document_page(
        self,
        response: Response,
        meta: dict[str, Any],
        item: PageItem,
        directives: RobotsDirectives,
        kind: str,
        reader: ParseProcess | None,
    ) -> tuple[PageItem, PageAnalysis]:
        """Read a document (``ContentAnalysis.analyze_document``) and fill its item."""
        analysis = self.content.analysis.analyze_document(
            kind,
            response.body,
            # the transport's charset only, as for a page: no <meta> in a text (decode_text)
            transport_encoding(response.headers.getlist(b"Content-Type")),
            response.url,
            directives,
            status=response.status, reader=reader,
        )
        item["title"], item["text"] = analysis.title, analysis.text
        item["main_text"] = analysis.main_text
        item["noindex"], item["outlinks"] = analysis.noindex, analysis.outlinks
        item["document_problem"] = analysis.document_problem
        if analysis.verdict is not None:
            item.judged(analysis.verdict)
        self._record(response, meta, item, analysis.fingerprint)
        return item, analysis

    # the page half's, in SiteSpider
    def _start_item(
        self, response: Response
    ) -> tuple[str, dict[str, Any], PageItem, RobotsDirectives]:
        raise NotImplementedError

    def _finish_html(
        self, response: Response, item: PageItem, analysis: PageAnalysis
    ) -> Iterator[PageItem | scrapy.Request]:
        raise NotImplementedError

    @staticmethod
    def _record(
        response: Response, meta: dict[str, Any], item: PageItem, fingerprint: str | None
    ) -> None:
        raise NotImplementedError
