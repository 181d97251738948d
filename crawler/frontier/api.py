"""The frontier's interface: what the scheduler adapter needs, and what every backend implements.

The interface is shaped by the distributed backend that will follow: every call is one atomic step
on shared state (a Lua script in Redis), work handed out is a *lease* that must be completed,
and time is always passed in, so a backend never reads a clock of its own and tests can drive time.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Entry:
    """One URL waiting in the frontier: a compact record, not a Request.

    ``url`` is the normalized URL (its 64-bit hash is the seen-test key). ``payload`` is what
    the adapter needs to rebuild a request that is more than a plain link (None for a plain
    link); a persistent store needs it as bytes. ``id`` is the store's row id (0 in memory).
    """

    url: str
    host: str
    priority: int = 0
    depth: int = 0
    payload: Any = None
    id: int = 0


@dataclass(slots=True)
class Lease:
    """A URL handed out for fetching: the host's slot stays taken until the lease is completed."""

    token: int
    entry: Entry
    slot: int
    issued_at: float


class Outcome:
    """How a leased fetch ended, as far as politeness is concerned."""

    FETCHED = "fetched"  # the server answered (any status)
    FAILED = "failed"  # timeout, refused, reset: counts towards giving a host up
    NOT_SENT = "not_sent"  # never reached the network: filtered, denied, dropped


@dataclass(slots=True)
class AddResult:
    added: bool
    reason: str = ""  # why not: "seen", "host_budget", "host_skipped", "host_dead"


@dataclass
class HostReport:
    host: str
    queued: int
    due_in: float
    reason: str


@dataclass
class FrontierCounts:
    queued: int = 0
    in_flight: int = 0
    seen: int = 0
    hosts: int = 0
    hosts_ready: int = 0
    hosts_waiting: int = 0
    hosts_busy: int = 0
    front_queued: int = 0
    back_queues_used: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class Frontier(abc.ABC):
    """A Mercator URL frontier.

    Semantics every backend guarantees (tests/frontier_contract.py checks them):

    * ``add`` admits a URL once per crawl (by its normalized URL) unless ``force`` is set.
    * ``next`` hands out at most ``host_concurrency`` leases per host at once, and a host's slot
      only when its time has come; otherwise ``None``.
    * ``complete`` frees the slot; the slot's next time is the fetch's end plus the politeness
      delay (``Outcome.NOT_SENT`` frees it without moving its time).
    * A host with a pending *first* entry hands out nothing else until that entry completes.
    """

    @abc.abstractmethod
    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        """Queue a URL. ``force`` skips the seen-test (retries, redirects); ``first`` makes the
        entry its host's next request and holds the host's other URLs until it completes."""

    @abc.abstractmethod
    def mark_seen(self, keys: Iterable[str]) -> int:
        """Make these keys (normalized URLs) seen without queueing them, e.g. pages a crawl
        database fetched before and that are not due; returns how many were new."""

    def add_many(self, entries: Iterable[Entry]) -> int:
        return sum(self.add(e).added for e in entries)

    @abc.abstractmethod
    def next(self, now: float) -> Lease | None:
        """The next URL whose host may be fetched at ``now``, or None."""

    @abc.abstractmethod
    def complete(
        self, token: int, now: float, duration: float | None, outcome: str = Outcome.FETCHED
    ) -> None:
        """The leased fetch ended at ``now`` after ``duration`` seconds on the network."""

    @abc.abstractmethod
    def next_due(self, now: float) -> float | None:
        """When ``next`` may next return something: ``now`` if it may already, a later time if
        every host with work is waiting out its delay, None if nothing is queued."""

    @abc.abstractmethod
    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        """Record a host's robots.txt Crawl-delay. False if the host is skipped for asking more
        than the frontier accepts."""

    @abc.abstractmethod
    def hold_host(self, host: str, until: float) -> None:
        """Hand out nothing of ``host`` before ``until`` (its robots.txt is unavailable for now,
        or it asked to be left alone); its URLs stay queued."""

    @abc.abstractmethod
    def has_work(self, now: float, horizon: float) -> bool:
        """True while something is in flight or queued work is due within ``horizon``."""

    @abc.abstractmethod
    def in_flight(self) -> int: ...

    @abc.abstractmethod
    def __len__(self) -> int:
        """URLs queued (not counting leases in flight)."""

    @abc.abstractmethod
    def counts(self, now: float) -> FrontierCounts: ...

    @abc.abstractmethod
    def waiting_hosts(self, now: float) -> list[HostReport]:
        """Hosts with queued work that ``next`` would not serve now, and why."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (files, connections)."""
