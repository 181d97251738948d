"""Politeness per server address: host names that resolve to one IP address share its budget.

The frontier is polite per host name; on the web thousands of names share one server (shared
hosting, a CDN edge, wildcard subdomains), and a crawl that waits between requests to each name
can still send hundreds a second to one machine. An :class:`AddressBudget` is the second gate a
lease passes, after the frontier chose its host: at most ``concurrency`` fetches in flight at an
address, and between a fetch's end and the next start at that address a gap of at least the
address's delay (``delay``, growing with the server's response time by ``factor`` up to
``max_delay``, as a host's does), split over its ``concurrency``.

A lease the address refuses goes back to the frontier with its host held until a *reserved
slot*: each refused host reserves the next free slot of the address (its ``horizon`` moves one
gap plus the address's typical fetch time later per reservation), so a thousand names on one
server come back one per slot, in turn, instead of all of them asking again at each gap. A
reservation is a promise of order, not a lock: a host that comes back a little early (less than
half a gap before the address is free) waits out the rest without losing its turn; one that
finds the address busy reserves again.

:class:`LocalAddressBudget` is one worker's (the ``memory`` and ``sqlite`` backends); the
``redis`` backend's (:mod:`crawler.backends.redis.addresses`) keeps the same state in Redis for
the whole fleet. Tokens are the frontier's lease tokens: a worker that dies leaves its tokens to
expire after ``ttl`` (the lease TTL), as its leases do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from crawler.config import defaults


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

    def take(self, address: str, token: str, now: float) -> float:
        """0: the fetch of lease ``token`` may start at ``address`` now (counted in flight);
        else the seconds until the slot reserved for it."""

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
    horizon: float = 0.0  # the end of the slots reserved so far
    typical: float = 0.0  # fetch time, moving average
    fetches: int = 0
    refusals: int = 0


class LocalAddressBudget:
    """One worker's budgets, in memory (see the module docstring)."""

    def __init__(self, policy: AddressPolicy | None = None) -> None:
        self.policy = policy or AddressPolicy()
        self._addresses: dict[str, _Address] = {}

    @classmethod
    def from_crawler(cls, crawler: Any, ttl: float = 300.0) -> LocalAddressBudget:
        return cls(AddressPolicy.from_settings(crawler.settings, ttl))

    def take(self, address: str, token: str, now: float) -> float:
        policy = self.policy
        if policy.concurrency <= 0:
            return 0.0
        state = self._addresses.setdefault(address, _Address())
        if state.in_flight:
            for stale in [t for t, expiry in state.in_flight.items() if expiry <= now]:
                del state.in_flight[stale]
        if len(state.in_flight) < policy.concurrency and now >= state.ready_at:
            state.in_flight[token] = now + policy.ttl
            state.ready_at = now + policy.gap(None) if policy.concurrency > 1 else now
            state.fetches += 1
            return 0.0
        state.refusals += 1
        gap = policy.gap(None)
        if len(state.in_flight) < policy.concurrency and state.ready_at - now < gap / 2:
            return max(state.ready_at - now, 1e-3)  # early for its turn: no new slot
        slot = max(state.horizon, state.ready_at, now)
        state.horizon = slot + gap + state.typical
        return max(slot - now, 1e-3)

    def done(self, address: str, token: str, now: float, duration: float | None) -> None:
        state = self._addresses.get(address)
        if state is None or state.in_flight.pop(token, None) is None:
            return
        if duration is not None:
            state.ready_at = max(state.ready_at, now + self.policy.gap(duration))
            state.typical = duration if not state.typical else 0.8 * state.typical + 0.2 * duration

    def busiest(self, n: int) -> list[AddressLoad]:
        loads = [
            AddressLoad(address, len(s.in_flight), s.fetches, s.refusals)
            for address, s in self._addresses.items()
        ]
        loads.sort(key=lambda a: (-a.in_flight, -a.fetches, a.address))
        return loads[:n]

    def close(self) -> None:
        return None
