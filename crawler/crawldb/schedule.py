"""When a page comes back: Nutch's AdaptiveFetchSchedule, plus the bookkeeping of one visit.

Each refetch adjusts the page's interval: shorter by ``dec_rate`` when the page had changed
since the previous fetch, longer by ``inc_rate`` when it had not, always within
``[min_interval, max_interval]``. With ``sync_delta`` a page that has not changed for a long time
(by its Last-Modified or the last change the crawler saw) gets an interval of at least that time,
and its next fetch is pulled forward by ``sync_delta_rate`` of it, as in Nutch: a page unchanged
for a month is unlikely to change tomorrow, and probing it a little early keeps the estimate
honest.

The server's caching directives are hints on top (RFC 9111, read as a private cache):

* ``max-age`` (or ``Expires`` - ``Date``) of a 2xx or 304: the next fetch is no sooner than
  the answer stays fresh (the server says it will not change before), unless the adaptive
  schedule says later; never later than ``max_interval``. The interval itself still adapts.
* ``no-store``: the validators are not kept, so the next fetch is a full GET, not a
  conditional one (keeping them would store part of an answer the server asked not to store).
* ``no-cache`` and ``max-age=0`` say nothing about how often the page changes: no effect.
* No heuristic lifetime (RFC 9111 4.2.2, a tenth of the time since ``Last-Modified``): the
  sync delta above already reads ``Last-Modified`` (a page unchanged for a time waits 0.7 of
  it or more, within ``max_interval``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Any

from crawler.config.tuning import knob_default
from crawler.crawldb.api import PageRecord, Visit
from crawler.crawldb.config import RecrawlConfig

DAY = 86400.0


@dataclass(frozen=True)
class AdaptiveSchedule:
    """Nutch's adaptive schedule: ``interval`` and ``sync_delta`` from the ``RECRAWL_*``
    settings, the rest its tuning constants (Nutch's own defaults of
    ``db.fetch.schedule.adaptive.*``), not settings.

    ``min_interval`` and ``max_interval`` are these bounds widened by the first interval
    (:meth:`from_settings`): a page may come back up to ten times as often as the first interval
    says (at most once a minute), and waits at most 30 days, or the first interval when that is
    longer.
    """

    interval: float = DAY  # the first interval of a new page (RECRAWL_INTERVAL = 0)
    min_interval: float = 60.0
    max_interval: float = 30 * DAY
    inc_rate: float = 0.4  # Nutch's db.fetch.schedule.adaptive.inc_rate
    dec_rate: float = 0.2  # Nutch's db.fetch.schedule.adaptive.dec_rate
    sync_delta: bool = knob_default("recrawl_sync_delta")
    # a page long unchanged: its next fetch pulled forward by this share of its interval
    sync_delta_rate: float = 0.3
    priority_levels: int = 3  # a page that changed at every refetch gets this priority boost

    @classmethod
    def from_settings(cls, settings: Any) -> AdaptiveSchedule:
        """The schedule the ``RECRAWL_*`` settings describe (Scrapy settings or alike)."""
        config = RecrawlConfig.from_settings(settings)
        interval = config.interval or DAY
        return cls(
            interval=interval,
            min_interval=min(cls.min_interval, interval / 10),
            max_interval=max(cls.max_interval, interval),
            sync_delta=config.sync_delta,
        )

    def __post_init__(self) -> None:
        if not 0 <= self.min_interval <= self.max_interval:
            raise ValueError("need 0 <= min_interval <= max_interval")
        if not 0 <= self.dec_rate < 1 or self.inc_rate < 0:
            raise ValueError("need 0 <= dec_rate < 1 and inc_rate >= 0")

    def clamp(self, interval: float) -> float:
        return min(max(interval, self.min_interval), self.max_interval)

    def adjust(
        self, interval: float, fetched_at: float, changed: bool | None, modified_at: float
    ) -> tuple[float, float]:
        """(new interval, next fetch time) after a fetch at ``fetched_at``.

        ``changed`` is None when the fetch says nothing about change (a new page, an error).
        ``modified_at`` is when the page last changed as far as anyone knows.
        """
        if changed is True:
            interval *= 1.0 - self.dec_rate
        elif changed is False:
            interval *= 1.0 + self.inc_rate
        # The first fetch keeps the configured interval: a sync delta needs a refetch to mean
        # anything (and an old Last-Modified alone would push a new page to the maximum).
        sync = self.sync_delta and changed is not None
        delta = max(0.0, fetched_at - modified_at) if sync else 0.0
        interval = self.clamp(max(interval, delta))
        # Nutch pulls the next fetch forward by sync_delta_rate x delta, which lands in the past
        # for a page unchanged for longer than the interval; the pull is capped at that share
        # of the interval, and the next fetch is never sooner than the minimum interval.
        ahead = min(delta, interval) * self.sync_delta_rate
        return interval, fetched_at + max(interval - ahead, self.min_interval)

    def priority(self, fetch_count: int, change_count: int) -> int:
        """Pages that change often come first: the share of refetches that found a change,
        scaled to ``0..priority_levels``."""
        if fetch_count < 2 or self.priority_levels <= 0:
            return 0
        rate = min(1.0, change_count / (fetch_count - 1))
        return round(rate * self.priority_levels)

    def apply(self, previous: PageRecord | None, visit: Visit) -> tuple[PageRecord, bool]:
        """The page's record after ``visit``, and whether the visit found a change.

        * 2xx with a fingerprint: changed when the fingerprint differs from the stored one
          (the first fetch is not a change).
        * 304: not changed; validators refreshed if the 304 carries new ones.
        * 3xx (a redirecting URL), 404 and 410: come back after ``max_interval`` only.
        * anything else (5xx, 429, other 4xx): nothing learned about change; same interval.
        """
        now = visit.fetched_at
        status = visit.status
        if previous is None:
            previous = PageRecord(
                url=visit.url, depth=visit.depth, interval=self.interval,
                request_url=visit.request_url,
            )
        header_time = _http_date(visit.last_modified)
        changed: bool | None = None
        rec = replace(
            previous,
            depth=min(previous.depth, visit.depth) if previous.fetch_count else visit.depth,
            status=status,
            fetched_at=now,
            fetch_count=previous.fetch_count + 1,
            request_url=visit.request_url,
        )
        modified_at = previous.changed_at if previous.changed_at is not None else now
        if 200 <= status < 300:
            rec.last_modified = visit.last_modified
            rec.etag = visit.etag
            if visit.outlinks is not None:
                rec.outlinks = visit.outlinks
            if visit.fingerprint is not None:
                if previous.fingerprint is not None:
                    changed = previous.fingerprint != visit.fingerprint
                rec.fingerprint = visit.fingerprint
            if previous.changed_at is None:
                # First content: it changed at Last-Modified if the server says so, else now.
                plausible = header_time is not None and header_time <= now
                modified_at = header_time if plausible else now
                rec.changed_at = modified_at
            elif changed:
                plausible = header_time is not None and modified_at < header_time <= now
                modified_at = header_time if plausible else now
                rec.changed_at = modified_at
        elif status == 304:
            changed = False
            rec.last_modified = visit.last_modified or previous.last_modified
            rec.etag = visit.etag or previous.etag
        if changed:
            rec.change_count = previous.change_count + 1
        if (300 <= status < 400 and status != 304) or status in (404, 410):
            rec.interval = self.max_interval
            rec.next_fetch = now + self.max_interval
            if status in (404, 410):
                rec.etag = rec.last_modified = None
        elif 200 <= status < 300 or status == 304:
            rec.interval, rec.next_fetch = self.adjust(
                previous.interval or self.interval, now, changed, modified_at
            )
        else:
            rec.interval = self.clamp(previous.interval or self.interval)
            rec.next_fetch = now + rec.interval
        if 200 <= status < 300 or status == 304:
            self._caching_hints(rec, visit)
        rec.priority = self.priority(rec.fetch_count, rec.change_count)
        return rec, bool(changed)


    def _caching_hints(self, rec: PageRecord, visit: Visit) -> None:
        """The answer's caching directives (see the module docstring)."""
        if visit.max_age is not None and visit.max_age > 0:
            fresh_until = visit.fetched_at + min(visit.max_age, self.max_interval)
            rec.next_fetch = max(rec.next_fetch, fresh_until)
        if visit.no_store:
            rec.etag = rec.last_modified = None


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
