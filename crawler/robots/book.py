"""Per-origin robots.txt bookkeeping: what a URL's verdict is right now, and what happens when a
fetch of robots.txt ends. Scrapy-free: the fetcher (``crawler.middlewares.robots_fetcher``) turns
its answers into Scrapy actions and drives time; the gate middleware only reads verdicts.

The book is the only writer of an :class:`OriginState`: everything that changes one goes through
a method here (``queued``, ``start_fetch``, ``fetched``, ``failed``, ``refused``, ``park``,
``give_up``...), so the state machine can be read in one place.

States of an origin, and the verdict for its URLs:

* a copy in force (fresh, or expired while a refresh is due or failing): its rules decide,
  ALLOW or DENY. RFC 9309 2.4: when a refresh fails, the last good copy stays in force.
* no copy, the last fetch failed (5xx, 429, unreachable): UNAVAILABLE, the whole origin is
  disallowed for now; a retry is due at ``retry_at`` (RFC 9309 2.3.1.4).
* no copy, a fetch in flight: WAIT for it (every waiter gets the answer, unlike Scrapy's own
  middleware). With a cache shared by several workers the fetch may be another worker's
  (``fetching == ELSEWHERE``): its outcome arrives through :meth:`RobotsBook.sync`.
* no copy and nothing in flight: FETCH one.

Several workers on one shared cache: a fetch starts only with a claim on the origin
(:meth:`RobotsCache.claim`), and a failed one records "unreachable, next try in N s" for all
of them, so robots.txt is fetched once per host, and once per retry period while it fails, for
the whole crawl.

A broad crawl meets millions of origins, and a parsed copy costs ~10 KB (a 30-line robots.txt):
the book keeps at most ``max_origins`` settled origins (a copy in force, nothing under way,
nothing parked), the least recently used going first; one met again is read back from the cache
(the crawl's store of record: memory, SQLite or Redis). Origins with something under way or a
failure to remember are never dropped, and are kept apart from the settled ones: the settled
ones are an LRU of their own (every transition files its origin in or out of it), so a crawl
that has met far more origins than the bound, most of them waiting for their robots.txt, pays
O(1) per origin met. (A single LRU of all origins had to scan past the unsettled ones at its
old end on every new origin, and dropped nothing: 56 % of a worker's time at 30,000 hosts.)
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from email.utils import parsedate_to_datetime
from typing import Any

from crawler.config.tuning import knob_default
from crawler.robots.cache import RobotsCache, SharedOrigin
from crawler.robots.rules import (
    ALLOW_ALL,
    DEFAULT_EXPIRY,
    DISALLOW_ALL,
    MAX_SIZE,
    RULES,
    RobotsRecord,
    RobotsRules,
    classify,
    decode_body,
)


class Verdict(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    FETCH = "fetch"
    WAIT = "wait"
    UNAVAILABLE = "unavailable"


#: Longest wait before a failing robots.txt is tried again (its delay doubles from
#: TUNING's robots_retry_delay, or follows the server's Retry-After, up to this).
MAX_RETRY_DELAY = 3600.0

QUEUED = "queued"  # a robots.txt request is in the frontier (or about to be)
IN_FLIGHT = "in_flight"  # a robots.txt request is being downloaded
ELSEWHERE = "elsewhere"  # another worker of a shared crawl is fetching it


@dataclass(eq=False)
class OriginState:
    """One origin's robots.txt state. Read it anywhere; change it through :class:`RobotsBook`."""

    origin: str
    host: str = ""
    rules: RobotsRules | None = None  # the copy in force
    fetching: str = ""  # "", QUEUED, IN_FLIGHT, ELSEWHERE
    unreachable: bool = False  # the last fetch failed and there is no copy: disallowed for now
    failures: int = 0  # consecutive failed fetches
    retry_at: float | None = None  # when to try again after a failure
    gave_up: bool = False  # out of retries for this crawl
    parked: list[Any] = field(default_factory=list)  # requests waiting for a retry to succeed
    truncated: bool = False  # the last file read was cut at max_size
    direct: bool = False  # fetched outside the frontier (it refused the robots.txt request)
    owner: Any = None  # the request of the fetch in flight (not a redirect hop of it)


class RobotsBook:
    def __init__(
        self,
        cache: RobotsCache,
        token: str,
        *,
        expiry: float = DEFAULT_EXPIRY,
        max_size: int = MAX_SIZE,
        retry_delay: float = knob_default("robots_retry_delay"),
        retry_times: int = knob_default("robots_retry_times"),
        max_retry_delay: float = MAX_RETRY_DELAY,
        claim_seconds: float = 600.0,
        max_origins: int = knob_default("robots_book_size"),
    ) -> None:
        self.cache = cache
        self.token = token
        self.expiry = expiry
        self.max_size = max_size
        self.retry_delay = retry_delay
        self.retry_times = retry_times
        self.max_retry_delay = max(max_retry_delay, retry_delay)
        self.claim_seconds = claim_seconds  # the longest a fetch may take (a dead one's claim)
        self.max_origins = max_origins  # settled origins kept parsed (0: no bound)
        self._origins: dict[str, OriginState] = {}  # every origin kept
        # the settled ones among them, least recently used first (see the module docstring)
        self._settled: OrderedDict[str, None] = OrderedDict()
        self._parked: set[str] = set()  # origins with parked requests
        # copies read ahead for origins about to be met (:meth:`prefetch`), each used once
        self._prefetched: dict[str, RobotsRecord | None] = {}
        self._batch: set[str] | None = None  # origins read in the open :meth:`batch`

    def state(self, origin: str) -> OriginState:
        """The origin's state, with the cached copy (even an expired one) loaded on first use,
        and looked up again while the origin has no rules and nothing under way (once per
        :meth:`batch`)."""
        st = self._origins.get(origin)
        if st is None:
            st = self._origins[origin] = OriginState(origin)
            self._load(st)
            self._file(st)
            return st
        if origin in self._settled:
            self._settled.move_to_end(origin)
        if (
            st.rules is None
            and st.fetching not in (IN_FLIGHT, ELSEWHERE)
            and not (st.unreachable or st.gave_up)
            and (self._batch is None or origin not in self._batch)
        ):
            self._load(st)  # a cache shared by several workers: another may have fetched it
            self._file(st)
        return st

    @staticmethod
    def _is_settled(st: OriginState) -> bool:
        """A copy in force and nothing under way, parked or failed: dropping it loses nothing
        the cache cannot give back."""
        return (
            st.rules is not None
            and not st.fetching
            and not st.parked
            and st.owner is None
            and not st.failures
        )

    def _file(self, st: OriginState) -> OriginState:
        """File the origin in or out of the settled LRU after a transition, and drop the least
        recently used settled origin while there are more than ``max_origins``: O(1)."""
        if not self.max_origins:
            return st
        origin = st.origin
        if not self._is_settled(st):
            self._settled.pop(origin, None)
            return st
        self._settled[origin] = None
        self._settled.move_to_end(origin)
        while len(self._settled) > self.max_origins:
            oldest, _ = self._settled.popitem(last=False)
            if oldest != origin:
                self._origins.pop(oldest, None)
        return st

    def _load(self, st: OriginState) -> None:
        origin = st.origin
        if origin in self._prefetched:
            record = self._prefetched.pop(origin)
        else:
            record = self.cache.get(origin)
        if self._batch is not None:
            self._batch.add(origin)
        if record is not None and record.kind != DISALLOW_ALL:
            st.rules = RobotsRules(record, self.token)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The steps of one decision (an origin met, checked, queued): within it an origin's
        cached copy is read at most once, not at every step. The steps follow each other in
        one reactor call, so a second read could only see the same copy (or race another
        worker's write that the first read raced too)."""
        if self._batch is not None:
            yield
            return
        self._batch = set()
        try:
            yield
        finally:
            self._batch = None

    def prefetch(self, origins: Iterable[str]) -> None:
        """Read the cached copies of origins about to be met (a batch of seeds' new hosts) in
        one look-up (:meth:`RobotsCache.get_many`: one round trip to a shared cache, not one
        per origin). Each is used by the origin's first :meth:`state`, moments later in the
        same reactor call; what a batch leaves unused is dropped by the next one."""
        new = [o for o in dict.fromkeys(origins) if o not in self._origins]
        self._prefetched = self.cache.get_many(new) if new else {}

    def states(self) -> list[OriginState]:
        return list(self._origins.values())

    # -- transitions ----------------------------------------------------------------------------

    def discovered(self, origin: str, host: str) -> OriginState:
        """The frontier met ``origin`` (served by ``host``, the frontier's politeness key)."""
        st = self.state(origin)
        st.host = host
        return st  # nothing filed changed

    def queued(self, origin: str) -> None:
        """A robots.txt request of the origin is in the frontier (or about to be)."""
        st = self.state(origin)
        st.fetching = QUEUED
        self._file(st)

    def unqueued(self, origin: str) -> None:
        """The queued robots.txt request will not be fetched (skipped, or dropped)."""
        st = self.state(origin)
        if st.fetching == QUEUED:
            st.fetching = ""
            self._file(st)

    def start_fetch(
        self, origin: str, owner: Any = None, *, direct: bool = False, now: float = 0.0
    ) -> bool:
        """A robots.txt fetch is in flight. ``owner`` is its first request (not a redirect hop):
        the end of that request's download is the end of the fetch. ``direct``: fetched
        outside the frontier, and so are its retries.

        False: the fetch must not happen, because another worker of a shared crawl is fetching
        it or a failed fetch is waiting out its retry delay; the state now says which."""
        st = self.state(origin)
        if st.fetching != IN_FLIGHT:
            shared = self.cache.claim(origin, self.claim_seconds)
            if not shared.claimed:
                if st.fetching == QUEUED:
                    st.fetching = ""  # this request will not be the fetch
                self._apply(st, shared, now)
                self._file(st)
                return False
            st.failures = max(st.failures, shared.failures)
        st.fetching = IN_FLIGHT
        if owner is not None:
            st.owner = owner
        if direct:
            st.direct = True
        self._file(st)
        return True

    def sync(self, origin: str, now: float) -> OriginState:
        """Read what other workers of a shared crawl did with the origin: a copy one of them
        fetched, or their fetch state (fetching, unreachable until a retry, given up)."""
        st = self.state(origin)
        if st.rules is None and st.fetching != IN_FLIGHT:
            self._load(st)
        if st.rules is not None:
            if st.fetching == ELSEWHERE:
                st.fetching = ""
            st.unreachable = False
            st.retry_at = None
            return self._file(st)
        shared = self.cache.peek(origin)
        if shared is not None and st.fetching != IN_FLIGHT:
            self._apply(st, shared, now)
        elif st.fetching == ELSEWHERE:
            self._claim_gone(st, now)
        return self._file(st)

    @staticmethod
    def _claim_gone(st: OriginState, now: float) -> None:
        """Another worker's claim ended with nothing to tell: a retry is due at once."""
        st.fetching = ""
        st.retry_at = now if st.unreachable else None

    def _apply(self, st: OriginState, shared: SharedOrigin, now: float) -> None:
        st.failures = max(st.failures, shared.failures)
        if shared.gave_up:
            st.fetching = ""
            st.unreachable = st.rules is None
            st.gave_up = True
            st.retry_at = None
        elif shared.fetching_for > 0:
            st.fetching = ELSEWHERE
            st.retry_at = now + shared.fetching_for  # when that claim lapses
        elif shared.retry_in is not None:
            if st.fetching == ELSEWHERE:
                st.fetching = ""
            st.unreachable = st.rules is None
            st.retry_at = now + shared.retry_in
        elif st.fetching == ELSEWHERE:
            self._claim_gone(st, now)

    def refused(self, origin: str) -> None:
        """Another component refused the robots.txt request (address safety): it refuses the
        origin's pages too, so there is nothing to retry this crawl."""
        st = self.state(origin)
        if st.fetching == IN_FLIGHT:
            self.cache.unclaim(origin)
        st.fetching = ""
        st.owner = None
        st.unreachable = st.rules is None
        st.gave_up = True
        st.retry_at = None
        self._file(st)

    def abandoned(self, origin: str) -> None:
        """The fetch of the origin's robots.txt was cut short by a stop (Ctrl-C): nothing is
        learned; the shared claim is given up, so another worker (or the resumed crawl)
        fetches it at once rather than after the claim lapses."""
        st = self.state(origin)
        if st.fetching == IN_FLIGHT:
            self.cache.unclaim(origin)
            st.fetching = ""
            st.owner = None
            self._file(st)

    def park(self, origin: str, request: Any) -> None:
        """Keep a request of an origin that is disallowed for now until a retry succeeds."""
        st = self.state(origin)
        st.parked.append(request)
        self._parked.add(origin)
        self._file(st)

    def take_parked(self, origin: str) -> list[Any]:
        st = self.state(origin)
        parked, st.parked = st.parked, []
        self._parked.discard(origin)
        self._file(st)
        return parked

    def give_up(self, origin: str) -> list[Any]:
        """No more tries this crawl; returns the parked requests, now the caller's."""
        st = self.state(origin)
        st.gave_up = True
        st.retry_at = None
        return self.take_parked(origin)

    def retry_pending(self) -> bool:
        """Whether requests are parked for a retry still to come (the crawl must not end)."""
        return bool(self.waiting_origins())

    def waiting_origins(self) -> list[str]:
        """The origins whose parked requests wait for a retry still to come."""
        origins = self._origins
        return [o for o in self._parked if o in origins and origins[o].retry_at is not None]

    def all_parked(self) -> list[Any]:
        origins = self._origins
        return [r for o in self._parked if o in origins for r in origins[o].parked]

    def fresh(self, origin: str, now: float) -> bool:
        rules = self.state(origin).rules
        return rules is not None and rules.record.fresh(now)

    def needs_fetch(self, origin: str, now: float) -> bool:
        """Whether robots.txt should be (re)fetched now: no fresh copy, nothing in flight or
        queued, and no failed fetch waiting out its retry delay."""
        st = self.state(origin)
        if st.fetching or st.gave_up or self.fresh(origin, now):
            return False
        return st.retry_at is None or st.retry_at <= now

    def verdict(self, origin: str, url: str) -> Verdict:
        st = self.state(origin)
        if st.rules is not None:
            return Verdict.ALLOW if st.rules.allowed(url) else Verdict.DENY
        if st.unreachable:
            return Verdict.UNAVAILABLE
        if st.fetching in (IN_FLIGHT, ELSEWHERE):
            return Verdict.WAIT
        return Verdict.FETCH

    # -- outcomes of a robots.txt fetch ---------------------------------------------------------

    def fetched(
        self,
        origin: str,
        status: int,
        body: bytes,
        now: float,
        *,
        kind: str | None = None,
        lifetime: float | None = None,
        cut: bool = False,
        validators: tuple[str, str] = ("", ""),
    ) -> RobotsRecord | None:
        """A final answer (no redirect left to follow). Returns the new record, or None when the
        answer means "unreachable" (the caller then asks :meth:`failed` for the retry delay).
        ``lifetime``: how long it stays fresh (its caching headers); None: ``expiry``.
        ``cut``: ``body`` is the file's beginning only (its download was stopped).
        ``validators``: the answer's ``ETag`` and ``Last-Modified`` ("" when absent)."""
        kind = kind or classify(status)
        if kind == DISALLOW_ALL:
            return None
        st = self.state(origin)
        if kind == ALLOW_ALL:
            text, st.truncated = "", False
            validators = ("", "")  # nothing to revalidate: a 4xx has no file
        else:
            text, st.truncated = decode_body(body, self.max_size, cut=cut)
        expires_at = now + (self.expiry if lifetime is None else lifetime)
        record = RobotsRecord(origin, kind, status, now, expires_at, text, *validators)
        return self._in_force(st, record)

    def validators(self, origin: str) -> tuple[str, str]:
        """The ``ETag`` and ``Last-Modified`` of the origin's copy, for a conditional refresh
        ("" when there is none)."""
        rules = self.state(origin).rules
        if rules is None or rules.kind != RULES:
            return "", ""
        return rules.record.etag, rules.record.last_modified

    def names_copy(self, origin: str, validators: tuple[str, str]) -> bool:
        """Whether a 304's validators (its ``ETag`` and ``Last-Modified``, "" when absent) name
        the origin's copy, so that it may renew it (RFC 9111 4.3.4). A strong ``ETag`` must be
        the copy's, alone, compared weakly: nginx answers the refresh of a file it gzipped
        (``W/"x"``) with a 304 naming ``"x"``, the same file, and RFC 9111's strong comparison
        would download it again after every such 304; the copy is robots.txt's rules, not
        bytes to serve. A weak ``ETag`` and a ``Last-Modified`` must match the copy's own of
        the kind (the tag weakly, the date as a date), and at least one must be there to
        match. A 304 that
        names no validator renews the copy: RFC 9111 would select only a copy without
        validators, but the request's validators came from this one copy, so there is no
        other it can be about, and servers that send a bare 304 (RFC 9110 15.4.5 asks for
        the ``ETag``, not every server sends it) would cost a full download every refresh."""
        rules = self.state(origin).rules
        if rules is None or rules.kind != RULES:
            return False
        return selects(rules.record, *validators)

    def renewed(
        self,
        origin: str,
        now: float,
        *,
        lifetime: float | None = None,
        validators: tuple[str, str] = ("", ""),
    ) -> RobotsRecord | None:
        """A 304 to a conditional refresh: the copy in force is still the file, fresh again
        for ``lifetime`` (None: as long as the copy was, its own caching headers or
        ``expiry``), with the answer's validators where it sends some (RFC 9110 15.4.5).
        None: there is no copy to renew."""
        st = self.state(origin)
        if st.rules is None or st.rules.kind != RULES:
            return None
        old = st.rules.record
        etag, last_modified = validators
        if lifetime is None:
            lifetime = old.expires_at - old.fetched_at
        record = replace(
            old,
            fetched_at=now,
            expires_at=now + lifetime,
            etag=etag or old.etag,
            last_modified=last_modified or old.last_modified,
        )
        return self._in_force(st, record)

    def _in_force(self, st: OriginState, record: RobotsRecord) -> RobotsRecord:
        """``record`` is the origin's copy from now on: cached, parsed, its fetch over."""
        self.cache.put(record)
        st.rules = RobotsRules(record, self.token)
        st.fetching = ""
        st.owner = None
        st.unreachable = False
        st.failures = 0
        st.retry_at = None
        st.gave_up = False
        self._file(st)
        return record

    def failed(self, origin: str, now: float, retry_after: float | None = None) -> float | None:
        """The fetch failed (5xx, 429, timeout, refused). Returns the delay until the next try,
        or None when the retries for this crawl are used up.

        Without a copy in force the origin becomes UNAVAILABLE; with one (a failed refresh),
        that copy stays in force.
        """
        st = self.state(origin)
        st.fetching = ""
        st.owner = None
        st.failures += 1
        if st.rules is None:
            st.unreachable = True
        if st.failures > self.retry_times:
            st.gave_up = True
            st.retry_at = None
            self.cache.failed(origin, None, st.failures)
            self._file(st)
            return None
        if retry_after is not None:
            delay = min(max(retry_after, self.retry_delay), self.max_retry_delay)
        else:
            delay = min(self.retry_delay * 2 ** (st.failures - 1), self.max_retry_delay)
        st.retry_at = now + delay
        self.cache.failed(origin, delay, st.failures)
        self._file(st)
        return delay


def selects(copy: RobotsRecord, etag: str, last_modified: str) -> bool:
    """:meth:`RobotsBook.names_copy` for one record."""
    if not etag and not last_modified:
        return True
    if etag and not etag.startswith("W/"):
        return bool(copy.etag) and _opaque(etag) == _opaque(copy.etag)
    compared = []
    if etag and copy.etag:
        compared.append(_opaque(etag) == _opaque(copy.etag))
    if last_modified and copy.last_modified:
        compared.append(_same_date(last_modified, copy.last_modified))
    return bool(compared) and all(compared)


def _opaque(etag: str) -> str:
    """An entity tag without its weakness indicator (RFC 9110 8.8.3.2's weak comparison)."""
    return etag[2:] if etag.startswith("W/") else etag


def _same_date(a: str, b: str) -> bool:
    """Whether two ``Last-Modified`` values name the same second (as text when one is not a
    date)."""
    try:
        return parsedate_to_datetime(a) == parsedate_to_datetime(b)
    except (TypeError, ValueError):
        return a.strip() == b.strip()
