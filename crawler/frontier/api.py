"""The frontier's interface: what the scheduler adapter needs, and what every backend implements.

The interface is shaped for several worker processes sharing one frontier (the Redis backend):

* every call is one atomic step on shared state (a Lua script in Redis);
* work handed out is a *lease* with a deadline: the host's slot is freed when the fetch ends
  (``complete``), but the URL is forgotten only when the page's item and links have left the
  spider and the pipelines (``ack``); a lease that is neither renewed nor acknowledged before its
  deadline puts its URL back at the head of its host's queue, so a dead worker loses nothing;
* time comes from one clock, the frontier's own (Redis ``TIME`` inside the scripts, the process's
  monotonic clock in memory; a test passes a clock of its own); callers speak in relative delays
  (``due_in``, "hold for N seconds") so workers' clocks never meet.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Clock = Callable[[], float]

# The payload of a seed that needs no Request of its own (a URL of a seeds file or of
# ``<site>:start_urls``): a store keeps it as a flag (crawler.backends.redis.entries: no
# bytes), the adapter rebuilds the seed's Request from it (crawler.scheduler.codec).
SEED = "seed"
# The payload of a host's first request, its robots.txt: queued for every new host of a crawl,
# so kept as this word (a few bytes in a shared store, where a serialized Request took ~190),
# rebuilt from the URL by the adapter.
ROBOTS_FIRST = "robots"


@dataclass(slots=True)
class Entry:
    """One URL waiting in the frontier: a compact record, not a Request.

    ``url`` is the request URL: the link as found, made safe (``crawler.net.weburl``), what
    is fetched, checked against robots.txt and recorded. ``key``: the seen-test key, the 64-bit
    hash (``crawler.frontier.store.url_key``) of the URL's canonical form
    (``crawler.frontier.urls.url_forms``), or 0 when the request URL is its own canonical form
    (most links: then the key is ``url_key(url)``, computed when needed and not stored: a
    Python int costs 32 bytes an entry); see ``crawler.frontier.store.identity``. ``payload``
    is what the adapter needs to rebuild a request that is more than a plain link (None for a
    plain link); a persistent or shared store needs it as bytes. ``id`` is the store's row id (0 in
    memory). ``cash``: OPIC cash (``crawler.frontier.opic``): what the page that linked it
    hands it when added; what it accumulated when leased. ``policy``: the crawl policy it was
    found under (``crawler.frontier.policies``; "" the site's default). ``referrer``: the page
    it was found on ("" for a seed, a robots.txt URL, a URL of unknown origin); the request
    carries it as ``Referer``, and a broken link is reported with it. In memory all the links
    of one page share that page's URL string (8 bytes of reference each); a persistent or shared
    store keeps it as a delta against the URL (``crawler.frontier.urlcode.pack_referrer``).
    """

    url: str
    host: str
    priority: int = 0
    depth: int = 0
    payload: Any = None
    id: int = 0
    cash: float = 0.0
    policy: str = ""
    referrer: str = ""
    key: int = 0


@dataclass(frozen=True, slots=True)
class Settlement:
    """One completion or acknowledgement of a lease, for :meth:`Frontier.settle_many`:
    ``kind`` ``complete``, ``finish`` (complete and acknowledge) or ``ack``."""

    kind: str
    token: str
    duration: float | None = None
    outcome: Outcome | str = "fetched"
    size: int = 0


@dataclass(slots=True)
class Lease:
    """A URL handed out for fetching. ``token`` is unique across processes; ``issued_at`` is on
    the frontier's clock."""

    token: str
    entry: Entry
    slot: int
    issued_at: float


class Outcome(StrEnum):
    """How a leased fetch ended, as far as politeness is concerned."""

    FETCHED = "fetched"  # the server answered (below 500)
    FAILED = "failed"  # timeout, refused, reset, or a 5xx: counts towards giving a host up
    NOT_SENT = "not_sent"  # never reached the network: filtered, denied, dropped


@dataclass(frozen=True, slots=True)
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
      delay (``Outcome.NOT_SENT`` frees it without moving its time), and ``complete`` says how
      long the slot rests from now. The lease stays open until ``ack``: the crawl has work
      while any lease is open.
    * ``ack`` forgets the URL for good. Completing or acknowledging an unknown, expired or
      already finished lease does nothing.
    * A lease not acknowledged within ``lease_ttl`` seconds of its issue or last ``renew``
      expires: its URL goes back to the head of its host's queue; if its fetch had not completed,
      the slot rests for the politeness delay (the fetch may have happened).
    * ``release`` hands unstarted leases back at once (a worker stopping cleanly): URL at the
      head of its host's queue, slot free, its time unchanged (with ``rest``, for a download
      cut short, the slot rests for the politeness delay as after an expiry).
    * A host with a pending *first* entry hands out nothing else until that entry completes.
    """

    lease_ttl: float
    # True for a frontier whose ``complete`` returns before the completion is done (a shared
    # frontier behind a worker thread): it returns None at once, and tells the rest it applied
    # to the ``on_completed(token, rest)`` callback it was built with, once known.
    completes_later: bool = False

    @abc.abstractmethod
    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        """Queue a URL. ``force`` skips the seen-test (retries, redirects); ``first`` makes the
        entry its host's next request and holds the host's other URLs until it completes."""

    def add_many(self, entries: Sequence[Entry]) -> list[AddResult]:
        """Queue a page's links: one result per entry, in order. A shared backend sends them in
        chunks of bounded size, one atomic call per chunk."""
        return [self.add(e) for e in entries]

    def credit(self, links: Sequence[tuple[Any, ...]]) -> None:  # noqa: B027
        """OPIC cash for URLs seen before (the URL's ``crawler.frontier.store.identity``,
        cash, crawl policy label and, for a sharded frontier, the URL's host), e.g. links a
        page repeats that the link intake did not send again: a queued URL's priority may
        rise. Ignored by a frontier that does not order by cash."""

    @abc.abstractmethod
    def mark_seen(self, keys: Iterable[str]) -> int:
        """Make these keys (canonical URLs, ``crawler.frontier.urls.normalize_url``) seen
        without queueing them, e.g. pages a crawl database fetched before and that are not
        due; returns how many were new."""

    @abc.abstractmethod
    def next(self) -> Lease | None:
        """The next URL whose host may be fetched now, or None."""

    def next_many(self, n: int) -> list[Lease]:
        """Up to ``n`` leases at once (a worker's read-ahead buffer)."""
        leases = []
        while len(leases) < n:
            lease = self.next()
            if lease is None:
                break
            leases.append(lease)
        return leases

    @abc.abstractmethod
    def complete(
        self,
        token: str,
        duration: float | None,
        outcome: Outcome = Outcome.FETCHED,
        *,
        size: int = 0,
    ) -> float | None:
        """The leased fetch ended now after ``duration`` seconds on the network: the host's slot
        is free again, after the politeness delay. ``size``: bytes received (a shared
        frontier counts them against the operator's byte budget).

        Returns the rest the slot was given, in seconds from now: the politeness delay after
        a fetch that long, Crawl-delay included, or longer if a hold placed meanwhile lasts
        longer. None when the fetch moved no time (``Outcome.NOT_SENT``) or the lease was not
        open and uncompleted (unknown, expired, completed before). This is the one source of
        "the delay the frontier applied": nobody else rebuilds the politeness rule."""

    @abc.abstractmethod
    def ack(self, token: str) -> None:
        """The page's item and links have left the spider and the pipelines: forget the URL."""

    def finish(
        self,
        token: str,
        duration: float | None,
        outcome: Outcome = Outcome.FETCHED,
        *,
        size: int = 0,
    ) -> float | None:
        """``complete`` and ``ack`` in one step (a fetch that produces nothing to process);
        returns what ``complete`` returns."""
        rest = self.complete(token, duration, outcome, size=size)
        self.ack(token)
        return rest

    def settle_many(self, settlements: Sequence[Settlement]) -> list[float | None]:
        """Several completions and acknowledgements, in order; returns what each completion
        returned (None for an ``ack``). A shared backend sends them in one round trip."""
        out: list[float | None] = []
        for s in settlements:
            if s.kind == "ack":
                self.ack(s.token)
                out.append(None)
            elif s.kind == "finish":
                out.append(self.finish(s.token, s.duration, Outcome(s.outcome), size=s.size))
            else:
                out.append(self.complete(s.token, s.duration, Outcome(s.outcome), size=s.size))
        return out

    def apply(
        self,
        entries: Sequence[Entry],
        settlements: Sequence[Settlement],
        credits: Sequence[tuple[Any, ...]] = (),
    ) -> tuple[list[AddResult], list[float | None]]:
        """OPIC cash for URLs seen before, links, then completions and acknowledgements:
        ``credit``, ``add_many`` then ``settle_many`` (a shared backend sends them in one
        round trip, the cash in the script call of the links)."""
        if credits:
            self.credit(credits)
        results = self.add_many(entries) if entries else []
        return results, self.settle_many(settlements) if settlements else []

    @abc.abstractmethod
    def renew(self, tokens: Iterable[str]) -> int:
        """Push these leases' deadlines ``lease_ttl`` ahead; returns how many were still held."""

    @abc.abstractmethod
    def release(self, tokens: Iterable[str], *, rest: bool = False) -> int:
        """Hand back leases whose fetch never started; returns how many were still held.
        ``rest``: the fetch had started and was cut short (a worker stopping mid-download):
        the URL goes back all the same, but the slot rests for the politeness delay, since
        the server may have seen the request."""

    @abc.abstractmethod
    def expire(self) -> int:
        """Put the URLs of expired leases back; returns how many expired."""

    @abc.abstractmethod
    def due_in(self) -> float | None:
        """Seconds until ``next`` may return something: 0 if it may now, None if nothing is
        queued (leases in flight do not count)."""

    @abc.abstractmethod
    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        """Record a host's robots.txt Crawl-delay. False if the host is skipped for asking more
        than the frontier accepts."""

    @abc.abstractmethod
    def hold_host(self, host: str, seconds: float) -> None:
        """Hand out nothing of ``host`` for ``seconds`` (its robots.txt is unavailable for now,
        or it asked to be left alone); its URLs stay queued. Never shortens an earlier hold."""

    @abc.abstractmethod
    def has_work(self, horizon: float) -> bool:
        """True while a lease is open or queued work is due within ``horizon`` seconds."""

    @abc.abstractmethod
    def in_flight(self) -> int:
        """Open leases (handed out and not yet acknowledged)."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """URLs queued (not counting open leases)."""

    @abc.abstractmethod
    def counts(self) -> FrontierCounts: ...

    @abc.abstractmethod
    def waiting_hosts(self) -> list[HostReport]:
        """Hosts with queued work that ``next`` would not serve now, and why."""

    def hosts(self) -> list[str]:
        """Hosts the frontier has admitted URLs of, this run or (persistent and shared backends)
        an earlier one: budgets kept outside the frontier (hosts per registered domain) are
        rebuilt from them when a crawl resumes or a worker joins. [] if a backend cannot say."""
        return []

    def busiest_hosts(self, n: int = 3) -> list[tuple[str, int, float]]:
        """``(host, fetches, mean real gap in seconds)`` of the hosts fetched most."""
        return []

    def status(self) -> tuple[float | None, int, int]:
        """``(due_in(), in_flight(), len(self))`` at once: one round trip for a shared
        backend."""
        return self.due_in(), self.in_flight(), len(self)

    def halted(self) -> str:
        """Why the operator stopped this frontier handing out work, as last seen: "" (it
        hands out), "paused" (the crawl holds: it has work), or why the crawl is over:
        "deadline", "byte_budget". Only a shared frontier has operator controls."""
        return ""

    def watch(self, on_change: Callable[[], None]) -> Callable[[], None] | None:
        """Call ``on_change`` (from any thread) whenever another process may have made work
        available sooner than this one knows: a host became ready, leases drained, an
        operator acted. Returns the function that stops watching, or None when the backend
        cannot tell (an embedded one has no other process; the caller then polls)."""
        return None

    def ping(self) -> None:  # noqa: B027 - an embedded frontier is always there
        """Raise if the shared state cannot be reached now (a shared frontier)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (files, connections). Shared state is never deleted here."""


GiveUpCallback = Callable[[str, str, int], None]


@dataclass
class FrontierCallbacks:
    """What a frontier tells the scheduler. An embedded frontier calls ``on_give_up`` only; a
    shared one also says that leases are ready (``notify``), answers queued adds
    (``on_added``), hands over seeds pushed from outside (``on_seeds``) and hosts other workers
    brought into scope (``on_scope``), all on the scheduler's thread."""

    on_give_up: GiveUpCallback | None = None
    notify: Callable[[], None] | None = None
    on_added: Callable[..., None] | None = None
    on_completed: Callable[[str, float | None], None] | None = None  # see Frontier.completes_later
    on_seeds: Callable[[list[str]], None] | None = None
    on_scope: Callable[[set[str]], None] | None = None
