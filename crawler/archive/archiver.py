"""What each fetch becomes in the archive, and in which file: the archive's one writer.

A fetch is a ``request`` record and a ``response`` record (linked by ``WARC-Concurrent-To``),
except that a 304 answer becomes a server-not-modified ``revisit`` and a 200 whose payload the
digest index knows becomes an identical-payload-digest ``revisit``. A ``metadata`` record tells
what the crawler made of a page, a ``conversion`` record its text or Markdown. Synchronous and
single-threaded: ``crawler.archive.thread`` runs it off the reactor.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from crawler.archive.digests import DigestIndex
from crawler.archive.files import RotatingWarcFiles
from crawler.archive.records import (
    Capture,
    Exchange,
    Record,
    conversion_record,
    identical_payload_revisit,
    metadata_record,
    not_modified_revisit,
    request_record,
    response_record,
)

_REVISITS_KEPT = 10_000  # a page's item follows its response within seconds, not thousands


class Archiver:
    """Writes fetches to ``files``; ``counts`` by record kind (``revisit`` split by profile:
    ``revisit/identical``, ``revisit/not_modified``), ``payload_bytes`` of responses archived
    in full and ``revisit_payload_bytes`` of payloads not written again."""

    def __init__(
        self,
        files: RotatingWarcFiles,
        digests: DigestIndex,
        *,
        min_revisit_size: int = 1,
        revisit_requests: bool = False,
    ) -> None:
        self.files = files
        self.digests = digests
        self.min_revisit_size = min_revisit_size
        self.revisit_requests = revisit_requests
        self.counts: Counter[str] = Counter()
        self.payload_bytes = 0
        self.revisit_payload_bytes = 0
        # response ids written as identical-payload revisits lately: they get no metadata
        self._revisits: OrderedDict[str, None] = OrderedDict()

    def archive(self, exchange: Exchange) -> str:
        """Write one fetch; the kind of its response record (``response`` or ``revisit``).
        An identical-payload revisit goes without its request record unless
        ``revisit_requests``: the first capture's request is archived, and on a recrawl of
        unchanged pages the request records are half of what is written (BENCHMARKS.md)."""
        response = self._response(exchange)
        if response.kind == "revisit" and not self.revisit_requests and exchange.status == 200:
            self.files.write([response])
            self.counts["request/skipped"] += 1
        else:
            self.files.write([request_record(exchange), response])
            self.counts["request"] += 1
        return response.kind

    def _response(self, exchange: Exchange) -> Record:
        if exchange.status == 304:
            self.counts["revisit/not_modified"] += 1
            return not_modified_revisit(exchange, None)
        digest = exchange.payload_digest
        if exchange.status == 200 and len(exchange.body) >= self.min_revisit_size:
            first = Capture(exchange.url, exchange.date, exchange.response_id)
            original = self.digests.claim(digest, first)
            if original is not None:
                self.counts["revisit/identical"] += 1
                self.revisit_payload_bytes += len(exchange.body)
                self._revisits[exchange.response_id] = None
                if len(self._revisits) > _REVISITS_KEPT:
                    self._revisits.popitem(last=False)
                return identical_payload_revisit(exchange, digest, original)
        self.counts["response"] += 1
        self.payload_bytes += len(exchange.body)
        return response_record(exchange, digest)

    def metadata(
        self, url: str, refers_to: str, date: datetime, fields: Sequence[tuple[str, str]]
    ) -> None:
        """A metadata record for the response ``refers_to``; none for an identical-payload
        revisit (the same payload has the same links, listed with its first capture; its fetch
        time and delay are in the crawl record): a recrawl of an unchanged site writes almost
        nothing (BENCHMARKS.md)."""
        if refers_to in self._revisits:
            self.counts["metadata/skipped"] += 1
            return
        self.files.write([metadata_record(url, refers_to, date, fields)])
        self.counts["metadata"] += 1

    def conversion(
        self, url: str, refers_to: str, date: datetime, text: str, content_type: str
    ) -> None:
        """A conversion record of the page's text for the response ``refers_to``; none for an
        identical-payload revisit, whose first capture's text is the same."""
        if refers_to in self._revisits:
            self.counts["conversion/skipped"] += 1
            return
        self.files.write([conversion_record(url, refers_to, date, text, content_type)])
        self.counts["conversion"] += 1

    def close(self) -> list[Path]:
        """Close the current file (renamed to its final name) and the digest index; the
        complete files written."""
        try:
            return self.files.close()
        finally:
            self.digests.close()
