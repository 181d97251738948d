"""The crawl database's interface: what was fetched, when, with what result, and when it is due.

One interface so a shared backend (Redis) can follow the embedded SQLite one. Like the frontier,
time is always passed in (wall-clock epoch seconds here, since records outlive the process),
and URLs are keyed by the frontier's canonical form (``crawler.frontier.normalize_url(url)[0]``,
the seen-test's key); ``request_url`` is the URL as it was requested (the link as found, made
safe: ``crawler.frontier.urls.url_forms``) when it differs from the key, so a refetch requests
what the site linked, never the canonical form (``index.php?/blog/post/1``, not
``index.php?%2Fblog%2Fpost%2F1=``).
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from crawler.config.features import crawldb_enabled  # re-exported: the crawl database's switch

Outlink = tuple[str, str]  # (absolute URL, anchor text)


@dataclass(slots=True)
class Visit:
    """One fetch as the crawler saw it. ``fingerprint`` None: no content this time (304, error,
    redirect); ``outlinks`` None: keep the ones stored. ``max_age``, ``no_store``: the
    answer's caching directives (:mod:`crawler.net.freshness`), hints for the schedule."""

    url: str
    status: int
    fetched_at: float
    depth: int = 0
    last_modified: str | None = None
    etag: str | None = None
    fingerprint: str | None = None
    outlinks: list[Outlink] | None = None
    request_url: str | None = None  # None: the key itself
    max_age: float | None = None  # fresh for this long (max-age, or Expires - Date)
    no_store: bool = False  # Cache-Control: no-store


@dataclass(slots=True)
class PageRecord:
    url: str
    depth: int = 0
    status: int | None = None  # None: known (discovered, parked) but never fetched
    fetched_at: float | None = None
    last_modified: str | None = None
    etag: str | None = None
    fingerprint: str | None = None  # of the page's normalized text
    fetch_count: int = 0
    change_count: int = 0
    changed_at: float | None = None  # last change seen (or Last-Modified)
    interval: float = 0.0
    next_fetch: float = 0.0
    priority: int = 0
    outlinks: list[Outlink] = field(default_factory=list)
    request_url: str | None = None  # None: the key itself


@dataclass(frozen=True, slots=True)
class DueUrl:
    url: str
    depth: int
    priority: int
    next_fetch: float
    request_url: str | None = None  # None: the key itself

    @property
    def fetch_url(self) -> str:
        """The URL to request: as it was requested before."""
        return self.request_url or self.url


@dataclass(frozen=True, slots=True)
class RecordResult:
    record: PageRecord
    changed: bool
    new: bool  # first fetch of this URL


class CrawlDb(abc.ABC):
    @abc.abstractmethod
    def get(self, url: str) -> PageRecord | None: ...

    def validators(self, url: str) -> tuple[str | None, str | None]:
        """(ETag, Last-Modified) of ``url``'s last fetch; read for every request, so a backend
        should read just these two."""
        rec = self.get(url)
        if rec is None or rec.status is None:
            return None, None
        return rec.etag, rec.last_modified

    @abc.abstractmethod
    def record(self, visit: Visit) -> RecordResult:
        """Store a fetch and reschedule the page (see :class:`AdaptiveSchedule.apply`)."""

    @abc.abstractmethod
    def add_unfetched(self, urls: Iterable[tuple[str, int, str | None]], due: float) -> int:
        """Remember (url, depth, request_url) the crawl could not fetch (robots.txt
        unreachable until the end, a page budget), due at ``due``, so a later crawl fetches
        them; known URLs are left alone."""

    @abc.abstractmethod
    def urls(self) -> Iterator[str]:
        """Every known URL (to mark them seen in a new crawl's frontier)."""

    @abc.abstractmethod
    def due(self, now: float, limit: int | None = None) -> list[DueUrl]:
        """URLs due at ``now``: highest priority first, then the longest overdue."""

    @abc.abstractmethod
    def claim_due(self, now: float, lease: float, limit: int) -> list[DueUrl]:
        """Like :meth:`due`, and push the returned URLs' next fetch ``lease`` seconds ahead, so
        a continuous crawl does not schedule them again while they wait in the frontier; a
        fetch that never happens (denied, failed) makes them due again when the lease ends."""

    @abc.abstractmethod
    def next_due(self) -> float | None:
        """The earliest next-fetch time, or None for an empty database."""

    @abc.abstractmethod
    def __len__(self) -> int: ...

    def commit(self) -> None:  # noqa: B027 - optional hook
        """Make writes durable (backends that batch them)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Commit and release resources."""


def crawldb_path(settings: Any, spider_name: str) -> str | None:
    """The crawl database file of a crawl (``%(name)s`` in ``CRAWLDB_PATH`` is the site name;
    default: ``JOBDIR/crawldb.sqlite``, else ``crawldb-<site>.sqlite``), or None when the crawl
    keeps none."""
    if not crawldb_enabled(settings):
        return None
    path = settings.get("CRAWLDB_PATH")
    if not path:
        jobdir = settings.get("JOBDIR")
        path = os.path.join(jobdir, "crawldb.sqlite") if jobdir else f"crawldb-{spider_name}.sqlite"
    return str(path).replace("%(name)s", spider_name)


class CrawlDbError(Exception):
    pass
