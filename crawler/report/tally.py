"""One tally per host of what the crawl did to it, and the one definition of a broken link.

The progress line, the end summary, the crawl record, the report and ``scrapy frontier`` all
count and measure a host with :class:`HostTally`, so "pages", "errors", "broken links", "gap"
and "delay" mean the same everywhere:

* a **fetch** is one request that reached the network (retries, redirects and robots.txt
  fetches each count); it **failed** when no answer came (refused, reset, timed out), and got
  an **HTTP error** when the answer was 4xx or 5xx;
* a **page** is an answer 2xx or 304 that went on to the spider, robots.txt apart;
* a **broken link** is a page URL (robots.txt apart) whose *final* answer, once retries and
  redirects are over, was 4xx or 5xx, or that got no answer at all: a link a reader following
  it would find dead, whatever the reason (404 and 410 as much as a 500 that every retry met, or
  a host that never answered). A 503 that a retry turned into a page is no broken link, nor is
  a fetch cut short because the crawl was stopping;
* a **gap** is the time from the end of the host's latest fetch to the start of its next one,
  taken only when no other fetch of the host was in flight: what the site owner sees of our
  politeness. It is held against the **delay** the frontier applied after that latest fetch
  (``fetch_completed``); a gap more than ``GAP_TOLERANCE`` below it is **short** (impolite).

Free of Scrapy: the crawl feeds a live tally (``crawler.extensions.tally``), the report replays
the crawl record into one (:func:`replay`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields

# A gap may read up to this much below the delay from rounding (the record keeps milliseconds)
# and from two clocks (the frontier's and the downloader's).
GAP_TOLERANCE = 0.002
BROKEN_LINK = (
    "Page URLs (robots.txt left out) whose final answer, once retries and redirects were over, "
    "was 4xx or 5xx, or that got no answer at all"
)


def is_ok(status: int | None) -> bool:
    return status is not None and (200 <= status < 300 or status == 304)


def is_broken(status: int | None, *, final: bool = True, robots: bool = False) -> bool:
    """The one definition (module docstring); ``status`` None or 0: no answer. ``final``: no
    retry or redirect follows this answer."""
    return final and not robots and (not status or status >= 400)


@dataclass(frozen=True, slots=True)
class Tallied:
    """What one fetch added to its host's tally."""

    gap: float | None  # the gap before it, if it had one
    delay: float | None  # the delay that gap is held against (None: not known)
    short: bool
    broken: bool


@dataclass(slots=True)
class HostTally:
    """One host's figures (module docstring), and what measuring its gaps needs."""

    fetches: int = 0
    failed: int = 0  # fetches with no answer
    http_errors: int = 0  # fetches answered 4xx or 5xx
    pages: int = 0
    broken: int = 0
    gaps: int = 0
    gap_sum: float = 0.0
    gap_min: float | None = None
    short: int = 0
    delays: int = 0
    delay_sum: float = 0.0
    in_flight: int = 0
    last_end: float | None = None
    last_delay: float | None = None  # the delay applied after the fetch that ended last

    @property
    def errors(self) -> int:
        return self.failed + self.http_errors

    @property
    def gap(self) -> float | None:
        """The mean gap."""
        return self.gap_sum / self.gaps if self.gaps else None

    @property
    def delay(self) -> float | None:
        """The mean delay applied."""
        return self.delay_sum / self.delays if self.delays else None

    def started(self, t: float) -> tuple[float, float | None] | None:
        """A fetch started at ``t``: its gap and the delay it is held against, if it had one."""
        gap = None
        last = self.last_end
        if self.in_flight == 0 and last is not None and t + GAP_TOLERANCE >= last:
            gap = max(0.0, t - last)
            self.gaps += 1
            self.gap_sum += gap
            self.gap_min = gap if self.gap_min is None else min(self.gap_min, gap)
            if self.last_delay is not None and gap < self.last_delay - GAP_TOLERANCE:
                self.short += 1
        self.in_flight += 1
        return None if gap is None else (gap, self.last_delay)

    def ended(self, t: float, delay: float | None = None) -> None:
        """A fetch ended at ``t`` (``delay``: the one applied after it, when known already)."""
        self.in_flight = max(0, self.in_flight - 1)
        if self.last_end is None or t >= self.last_end:
            self.last_end = t
            self.last_delay = None
        if delay is not None:
            self.delay_applied(delay, latest=t >= self.last_end)

    def delay_applied(self, delay: float, *, latest: bool = True) -> None:
        """The frontier applied ``delay`` after a fetch of the host (``latest``: the one that
        ended last, which the next gap is held against)."""
        self.delays += 1
        self.delay_sum += delay
        if latest:
            self.last_delay = delay

    def answered(self, status: int | None, *, page: bool, final: bool, robots: bool) -> bool:
        """Count a fetch's answer (``status`` None: none came; ``page``: it went on to the
        spider); True if it makes a broken link."""
        self.fetches += 1
        if not status:
            self.failed += 1
        elif status >= 400:
            self.http_errors += 1
        if page and not robots and is_ok(status):
            self.pages += 1
        broken = is_broken(status, final=final, robots=robots)
        self.broken += broken
        return broken

    def fetched(self, start: float, end: float, status: int | None, *, page: bool,
                final: bool, robots: bool) -> Tallied:
        """One fetch, told once it is over (the live crawl: fetches of a host that overlap, with
        ``FRONTIER_HOST_CONCURRENCY`` above 1, may then miss a gap)."""
        gap = self.started(start)
        self.ended(end)
        broken = self.answered(status, page=page, final=final, robots=robots)
        if gap is None:
            return Tallied(None, None, False, broken)
        g, delay = gap
        return Tallied(g, delay, delay is not None and g < delay - GAP_TOLERANCE, broken)

    def add(self, other: HostTally) -> None:
        """Sum ``other``'s counts into this one (several workers, or intervals)."""
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.gap_min is not None:
            self.gap_min = other.gap_min if self.gap_min is None else min(self.gap_min,
                                                                          other.gap_min)

    def counts(self) -> list[float]:
        """The counts, in :data:`COUNT_FIELDS` order (a worker's heartbeat sends them)."""
        return [getattr(self, name) for name in _COUNTS]

    @classmethod
    def of_counts(cls, values: Iterable[float]) -> HostTally:
        return cls(**dict(zip(_COUNTS, values, strict=False)))  # type: ignore[arg-type]


_STATE = frozenset({"in_flight", "last_end", "last_delay", "gap_min"})
_COUNTS = tuple(f.name for f in fields(HostTally) if f.name not in _STATE)
COUNT_FIELDS = _COUNTS


# Hosts kept as candidates for the busiest (by pages, by fetches): the heartbeat sends 10, the
# summary shows a few; a view asking for more ranks every host.
LEADERS_KEPT = 32


class _Leaders:
    """The hosts that can be among the ``LEADERS_KEPT`` with the most ``by``, kept as fetches
    go (counts only grow): every host outside has at most ``floor``, and at least
    ``LEADERS_KEPT`` inside have ``floor`` or more, so the top ``n <= LEADERS_KEPT`` of the
    candidates is the top of all hosts. A fetch costs O(1); a trim, every ``LEADERS_KEPT``
    new candidates, O(LEADERS_KEPT log LEADERS_KEPT): no beat scans every host met."""

    __slots__ = ("by", "floor", "members")

    def __init__(self, by: str) -> None:
        self.by = by
        self.floor = 0
        self.members: dict[str, HostTally] = {}

    def touched(self, host: str, tally: HostTally) -> None:
        members = self.members
        if host in members or getattr(tally, self.by) <= self.floor:
            return
        members[host] = tally
        if len(members) > 2 * LEADERS_KEPT:
            by = self.by
            ranked = heapq.nlargest(LEADERS_KEPT + 1, members.items(),
                                    key=lambda kv: getattr(kv[1], by))
            self.floor = max(self.floor, getattr(ranked[-1][1], by))
            self.members = dict(ranked[:LEADERS_KEPT])


class HostTallies:
    """Every host's tally, by host name: O(1) per fetch, one ``HostTally`` (~200 B) per host
    met; the busiest hosts from a bounded set of candidates (:class:`_Leaders`)."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostTally] = {}
        self._leaders = {by: _Leaders(by) for by in ("pages", "fetches")}
        self._ranked = False  # counts went through fetched(): the candidates hold the top

    def __getitem__(self, host: str) -> HostTally:
        tally = self.hosts.get(host)
        if tally is None:
            tally = self.hosts[host] = HostTally()
        return tally

    def __iter__(self) -> Iterator[tuple[str, HostTally]]:
        return iter(self.hosts.items())

    def __len__(self) -> int:
        return len(self.hosts)

    def fetched(self, host: str, start: float, end: float, status: int | None, *, page: bool,
                final: bool, robots: bool) -> Tallied:
        """:meth:`HostTally.fetched` of ``host``, keeping the busiest hosts' candidates."""
        tally = self[host]
        tallied = tally.fetched(start, end, status, page=page, final=final, robots=robots)
        self._ranked = True
        for leaders in self._leaders.values():
            leaders.touched(host, tally)
        return tallied

    def busiest(self, n: int, *, by: str = "pages") -> list[tuple[str, HostTally]]:
        """The ``n`` hosts with the most ``by`` (pages, fetches), none with zero: from the
        candidates when every count came through :meth:`fetched`, else from every host."""
        leaders = self._leaders.get(by)
        if self._ranked and leaders is not None and n <= LEADERS_KEPT:
            pool = leaders.members.items()
        else:
            pool = self.hosts.items()
        top = heapq.nlargest(n, pool, key=lambda kv: getattr(kv[1], by))
        return [(host, t) for host, t in top if getattr(t, by)]

    def with_pages(self) -> int:
        return sum(1 for t in self.hosts.values() if t.pages)


def busiest_line(busiest: Iterable[tuple[str, int, float | None]], noun: str = "pages",
                 sep: str = "; ") -> str:
    """``host N pages, gap 1.23s; ...``: the busiest hosts as every one-line view says them."""
    return sep.join(f"{host} {n} {noun}, gap {'-' if gap is None else f'{gap:.2f}s'}"
                    for host, n, gap in busiest)


def replay(tally: HostTally, fetches: Iterable[tuple[float, float, int | None, float | None]],
           ) -> Iterator[tuple[float, float, float | None]]:
    """Feed ``(start, end, status, delay applied after it)`` fetches of one host, sorted by
    start, into ``tally`` as a crawl would have (an end at most ``GAP_TOLERANCE`` after a start
    counts as before it); yields ``(start, gap, delay)`` of each gap."""
    ends: list[tuple[float, int, float | None]] = []  # (end, order, delay)
    for i, (start, end, status, delay) in enumerate(fetches):
        while ends and ends[0][0] <= start + GAP_TOLERANCE:
            e, _, d = heapq.heappop(ends)
            tally.ended(e, d)
        gap = tally.started(start)
        if gap is not None:
            yield start, gap[0], gap[1]
        tally.answered(status, page=False, final=False, robots=False)
        heapq.heappush(ends, (end, i, delay))
    while ends:
        e, _, d = heapq.heappop(ends)
        tally.ended(e, d)
