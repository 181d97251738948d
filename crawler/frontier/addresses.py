"""Politeness per server address: host names that resolve to one IP address share its budget.

The frontier is polite per host name; on the web thousands of names share one server (shared
hosting, a CDN edge, wildcard subdomains), and a crawl that waits between requests to each name
can still send hundreds a second to one machine. An :class:`AddressBudget` is the second gate a
lease passes, after the frontier chose its host: at most ``concurrency`` fetches in flight at an
address, and between a fetch's end and the next start at that address a gap of at least the
address's delay (``delay``, growing with the server's response time by ``factor`` up to
``max_delay``, as a host's does), split over its ``concurrency``.

A lease the address refuses goes back to the frontier with its host held until its *turn*. The
address keeps the hosts it refused in line, best first by the priority of the URL each wanted
(the frontier's front queue: depth, the OPIC cash bucket; a robots.txt ranks first), then by how
long each has waited, and tells each to come back when the fetches ahead of it should be done. A
free address goes to the best host in line, not to whichever asks first: a host whose own delay
ends as the address frees (it just fetched there) would otherwise keep the address while names
due long before, with better URLs, wait. So under depth order every name's home page comes
before any name's second page; under FIFO (one priority) the names take turns; OPIC's cash
decides. The line never idles the address for long: only a waiter due back within half a gap
holds it, and one that missed its turn (its host given up, its worker gone or stalled) is out of
the line. Missed means that a host in line told a turn more than ``LATE`` after the waiter's
asks, also ``LATE`` past the waiter's turn, and the waiter still has not come: the frontier
hands hosts out in the order of their turns, so a waiter alive in this worker asks before any
host told a later turn. Its turn merely ``LATE`` past is not enough: after a stall of the whole
process (CPU starved, a long GC) every waiter is late, and the hosts due ask within
milliseconds, in turn order, others among them (the host that just fetched there, whose own
delay ended before the waiters' turns); an ask by one not in line, or by one told a turn not
``LATE`` after the late waiter's, drops nobody. A waiter really gone costs one refusal more,
``LATE`` of idling: the asker it held is told to come back ``LATE`` later (not after the late
ones' turns, they are counted out), and that ask drops it. Out, a waiter holds the address no
more, but its wait is kept: the turn order holds within one worker only, and in a fleet a waiter
whose worker stalls (or is busy with other fetches) while another worker's hosts ask is out
though alive. When it comes back it takes the place its wait gives it, not one behind every host
that joined the line after it (the ``MISSED_KEPT`` latest joined are kept).

A waiter told to come back too late loses its turn to a worse one that asks while the address
is free, so the times told err early: the head of the line comes back at the earliest moment
the address could be free (the rest's end; with every slot busy, a gap after the earliest fetch
in flight began plus the quickest recent fetch time, and never sooner than a gap from now: a
slot that frees later still rests a gap, so a fetch running long costs the head one look per
gap, not one per loop turn). The waiters behind it come back a gap and a fetch time apart per
place. The fetch time is a low estimate (:func:`quick_fetch`): a faster fetch lowers it at
once; a slower one raises it by an eighth of the difference, and only as far as the fetch
before it was slow too: one fetch that a stall of the worker (or one big page) made long would
otherwise send the waiters behind the head back late, more so the further back they are. None
is trusted before ``SEED`` fetches, as a cold first fetch (a new connection, a cold server) is
slow.

:class:`LocalAddressBudget` is one worker's (the ``memory`` and ``sqlite`` backends); the
``redis`` backend's (:mod:`crawler.backends.redis.addresses`) keeps the same state in Redis for
the whole fleet. Tokens are the frontier's lease tokens: a worker that dies leaves its tokens to
expire after ``ttl`` (the lease TTL), as its leases do.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

from crawler.config import defaults

LATE = 0.25  # seconds a waiter's turn must precede both now and the asker's for it to be out
SCAN = 16  # waiters ahead looked at per request (those due back now are at the head)
SEED = 2  # fetch times seen at an address before its estimate is used (the first is cold)
RISE = 0.125  # share of a slower fetch's excess its estimate takes (a faster one: all of it)
POLL = 0.01  # the shortest wait told while every slot is busy (a gap of 0 would spin)
# Addresses looked at per take for pruning, least recently taken first: an idle one (nothing in
# flight, its rest over, nobody in line) is dropped, a busy one goes to the back. Two per take
# against at most one new address per take keeps only the busy ones, at O(1) per take.
PRUNE = 2
RETIRED_KEPT = 16  # the busiest pruned addresses whose counts are kept for busiest()
MISSED_KEPT = 64  # waiters out for missing their turns whose waits are kept, the latest joined


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """The budget of one server address (see the module docstring). ``concurrency`` 0: off."""

    concurrency: int = defaults.FRONTIER_IP_CONCURRENCY
    delay: float = defaults.FRONTIER_MIN_DELAY
    factor: float = defaults.FRONTIER_DELAY_FACTOR
    max_delay: float = defaults.FRONTIER_MAX_DELAY
    ttl: float = 300.0

    def gap(self, duration: float | None) -> float:
        """The rest after a fetch of ``duration`` seconds, before the next start."""
        rest = self.delay if duration is None else max(self.delay, self.factor * duration)
        return min(max(rest, self.delay), max(self.max_delay, self.delay)) / max(
            1, self.concurrency
        )

    @classmethod
    def from_settings(cls, settings: Any, ttl: float = 300.0) -> AddressPolicy:
        delay = settings.get("FRONTIER_IP_DELAY")
        if delay is None or delay == "":
            delay = settings.getfloat("FRONTIER_MIN_DELAY", defaults.FRONTIER_MIN_DELAY)
        policy = cls(
            settings.getint("FRONTIER_IP_CONCURRENCY", defaults.FRONTIER_IP_CONCURRENCY),
            float(delay),
            settings.getfloat("FRONTIER_DELAY_FACTOR", defaults.FRONTIER_DELAY_FACTOR),
            settings.getfloat("FRONTIER_MAX_DELAY", defaults.FRONTIER_MAX_DELAY),
            ttl,
        )
        if policy.concurrency < 0 or policy.delay < 0:
            raise ValueError(
                "FRONTIER_IP_CONCURRENCY and FRONTIER_IP_DELAY must be >= 0 "
                f"(got {policy.concurrency}, {policy.delay})"
            )
        return policy


@dataclass(frozen=True, slots=True)
class AddressLoad:
    """One address as ``scrapy frontier`` and the report show it."""

    address: str
    in_flight: int
    fetches: int
    refusals: int


class AddressBudget(Protocol):
    """See the module docstring."""

    policy: AddressPolicy

    def take(
        self, address: str, token: str, now: float, host: str = "", priority: int = 0
    ) -> float:
        """0: the fetch of lease ``token`` (of ``host``, a URL of front queue ``priority``)
        may start at ``address`` now (counted in flight); else the seconds until its turn."""

    def done(self, address: str, token: str, now: float, duration: float | None) -> None:
        """The fetch of ``token`` ended after ``duration`` s (None: it never reached the server,
        which then needs no rest)."""

    def busiest(self, n: int) -> list[AddressLoad]:
        """The ``n`` addresses with the most fetches in flight, then the most fetched."""

    def close(self) -> None: ...


@dataclass
class _Address:
    in_flight: dict[str, float] = field(default_factory=dict)  # token -> expiry
    ready_at: float = 0.0  # the next start may not be earlier
    typical: float = 0.0  # fetch time, a low estimate (quick_fetch)
    last: float = 0.0  # the last fetch's time
    samples: int = 0  # fetch times seen, up to SEED
    fetches: int = 0
    refusals: int = 0
    line: list[tuple[int, float, str]] = field(default_factory=list)  # (p, since, who), best 1st
    back: dict[str, tuple[int, float, float]] = field(default_factory=dict)  # who -> p, since, at
    missed: dict[str, float] = field(default_factory=dict)  # who -> since: out, its wait kept


class LocalAddressBudget:
    """One worker's budgets, in memory (see the module docstring)."""

    def __init__(self, policy: AddressPolicy | None = None) -> None:
        self.policy = policy or AddressPolicy()
        # least recently taken first; idle ones are pruned as takes come (PRUNE)
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        # (fetches, refusals) of the busiest pruned addresses, taken back if one comes back
        self._retired: dict[str, tuple[int, int]] = {}

    @classmethod
    def from_crawler(cls, crawler: Any, ttl: float = 300.0) -> LocalAddressBudget:
        return cls(AddressPolicy.from_settings(crawler.settings, ttl))

    def take(
        self, address: str, token: str, now: float, host: str = "", priority: int = 0
    ) -> float:
        policy = self.policy
        if policy.concurrency <= 0:
            return 0.0
        addresses = self._addresses
        state = addresses.get(address)
        if state is None:
            self._prune(now)
            state = addresses[address] = _Address()
            counts = self._retired.pop(address, None)
            if counts is not None:
                state.fetches, state.refusals = counts
        else:
            addresses.move_to_end(address)
        _expire(state, now)
        who = host or token
        told = state.back.get(who)  # the turn this asker was told (None: it was not in line)
        missed = state.missed.pop(who, None)  # it missed its turn: it comes back to its place
        since = _leave_line(state, who)
        since = missed if since is None else since
        rank = (priority, now if since is None else since, who)
        line, gap = state.line, policy.gap(None)
        insort(line, rank)
        state.back[who] = (priority, rank[1], now)
        held = False  # a better waiter is due back about now
        late = 0  # waiters ahead LATE past their turn: out at the next ask if they do not come
        for ahead in line[:SCAN]:
            if ahead == rank:
                break
            back_at = state.back[ahead[2]][2]
            # its turn came LATE before the asker's (the frontier hands hosts out in turn
            # order) and LATE before now, and it has not come: out
            if told is not None and back_at < min(told[2], now) - LATE:
                _miss(state, ahead[2])
                continue
            if back_at <= now + gap / 2:
                held = True
            if back_at < now - LATE:
                late += 1
        full = len(state.in_flight) >= policy.concurrency
        if not full and not held and now >= state.ready_at:
            _leave_line(state, who)
            state.in_flight[token] = now + policy.ttl
            state.ready_at = now + gap if policy.concurrency > 1 else now
            state.fetches += 1
            return 0.0
        state.refusals += 1
        took = state.typical if state.samples >= SEED else 0.0
        begun = min(state.in_flight.values()) - policy.ttl if full else None
        place = bisect_left(line, rank) - late
        back_at = turn_at(now, state.ready_at, begun, took, gap, place, policy.concurrency)
        if late:  # they have LATE to come; those that do not are out when this one asks again
            back_at = max(back_at, now + LATE)
        state.back[who] = (priority, rank[1], back_at)
        return max(back_at - now, 1e-3)

    def done(self, address: str, token: str, now: float, duration: float | None) -> None:
        state = self._addresses.get(address)
        if state is None or state.in_flight.pop(token, None) is None:
            return
        if duration is not None:
            state.ready_at = max(state.ready_at, now + self.policy.gap(duration))
            state.typical = quick_fetch(state.typical, state.samples, duration, state.last)
            state.last = duration
            state.samples = min(state.samples + 1, SEED)

    def _prune(self, now: float) -> None:
        """Drop the idle among the :data:`PRUNE` least recently taken addresses: one that
        comes back starts afresh, as its rest is over and nobody waits there (its fetch time
        estimate is learned again)."""
        addresses = self._addresses
        for _ in range(min(PRUNE, len(addresses))):
            address, state = next(iter(addresses.items()))
            _expire(state, now)
            if state.in_flight or state.line or state.ready_at > now:
                addresses.move_to_end(address)
                continue
            del addresses[address]
            if state.fetches or state.refusals:
                self._retire(address, state)

    def _retire(self, address: str, state: _Address) -> None:
        retired = self._retired
        retired[address] = (state.fetches, state.refusals)
        if len(retired) > RETIRED_KEPT:
            del retired[min(retired, key=lambda a: (retired[a], a))]

    def busiest(self, n: int) -> list[AddressLoad]:
        loads = [
            AddressLoad(address, len(s.in_flight), s.fetches, s.refusals)
            for address, s in self._addresses.items()
        ]
        loads += [AddressLoad(a, 0, f, r) for a, (f, r) in self._retired.items()]
        loads.sort(key=lambda a: (-a.in_flight, -a.fetches, a.address))
        return loads[:n]

    def close(self) -> None:
        return None


def quick_fetch(estimate: float, samples: int, duration: float, last: float) -> float:
    """The address's fetch time estimate after a fetch of ``duration`` s (``last``: the one
    before): low rather than typical, since a waiter told to come back late loses its turn while
    one told early only asks again; a lone slow fetch (a stall of the worker) does not raise it.
    ``lua/address.lua`` keeps the same rule."""
    if not samples or duration < estimate:
        return duration
    return estimate + RISE * max(0.0, min(duration, last) - estimate)


def turn_at(
    now: float,
    ready: float,
    begun: float | None,
    took: float,
    gap: float,
    ahead: int,
    concurrency: int,
) -> float:
    """When a refused waiter with ``ahead`` waiters before it should come back: the earliest
    moment the address could be free (``ready``: the rest's end; ``begun``: when the earliest
    fetch in flight began, None if a slot is free), then a gap and a fetch time (``took``) per
    waiter ahead. ``lua/address.lua`` computes the same."""
    start = max(ready, now)
    if begun is not None:  # every slot busy: the first to free still rests a gap after it
        start = max(start, begun + took + gap, now + max(gap, POLL))
    return start + ahead * (gap + took / max(1, concurrency))


def _expire(state: _Address, now: float) -> None:
    """Forget the fetches in flight whose tokens expired (their worker died)."""
    if state.in_flight:
        for stale in [t for t, expiry in state.in_flight.items() if expiry <= now]:
            del state.in_flight[stale]


def _miss(state: _Address, who: str) -> None:
    """``who`` missed its turn: out of the line, so it holds the address no more, but its wait
    is kept (the :data:`MISSED_KEPT` latest joined) for when it comes back: a waiter late for
    cause (its worker stalled or busy while others asked) keeps its place among those waiting
    instead of joining behind every host that came after it."""
    missed = state.missed
    since = _leave_line(state, who)
    if since is not None:
        missed[who] = since
        if len(missed) > MISSED_KEPT:
            del missed[min(missed, key=lambda w: (missed[w], w))]


def _leave_line(state: _Address, who: str) -> float | None:
    """Take ``who`` out of the address's line; since when it waited (None: it was not in it)."""
    waiting = state.back.pop(who, None)
    if waiting is None:
        return None
    del state.line[bisect_left(state.line, (waiting[0], waiting[1], who))]
    return waiting[1]

