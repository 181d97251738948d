"""The payload-digest index: which payloads the archive holds already, and where.

A 200 whose payload digest the index knows becomes an identical-payload-digest ``revisit``
pointing at the first capture (its URI, date and record id) instead of a second copy: Heritrix
users report 33-75 % of storage saved this way on recrawls. The index lives where the crawl's
state lives, so a later crawl, or another worker of a fleet, finds what this one stored:
SQLite beside the crawl database (``crawler.backends.sqlite.warc_digests``) or Redis
(``crawler.backends.redis.warc_digests``), chosen by ``warc_digest_index`` through
``crawler.backends.registry`` like the other state.

``claim`` is one atomic step (store unless present, answer what was there), so two workers that
fetch the same payload at once do not both write revisits pointing at nothing: at worst both
keep a full copy. Used on the archive thread only, never on the reactor.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import UTC, datetime

from crawler.archive.records import Capture


class DigestIndex(ABC):
    @abstractmethod
    def claim(self, digest: str, capture: Capture) -> Capture | None:
        """Record ``capture`` as the first archived copy of ``digest`` unless one is known;
        return the one already known (the payload is a revisit), or None (it was not: the
        caller writes the payload)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files or connections."""


class MemoryDigestIndex(DigestIndex):
    """For one process and one crawl (tests, a crawl that keeps nothing on disk)."""

    def __init__(self) -> None:
        self._known: dict[str, Capture] = {}

    @classmethod
    def from_crawler(cls, crawler: object, path: str | None = None) -> MemoryDigestIndex:
        return cls()

    def claim(self, digest: str, capture: Capture) -> Capture | None:
        known = self._known.get(digest)
        if known is None:
            self._known[digest] = capture
        return known

    def __len__(self) -> int:
        return len(self._known)


def encode_capture(capture: Capture) -> str:
    """``uri date record_id`` on one line (a URI has no space): the stored form."""
    return f"{capture.date.timestamp():.6f} {capture.record_id} {capture.uri}"


def decode_capture(text: str) -> Capture:
    stamp, record_id, uri = text.split(" ", 2)
    return Capture(uri, datetime.fromtimestamp(float(stamp), UTC), record_id)
