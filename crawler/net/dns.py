"""DNS answers as a crawl keeps them: one address per name, for as long as the answer's TTL says
(bounded below and above), failures remembered for a while too (negative caching).

Why a crawler keeps its own cache rather than trusting the operating system's: the system
resolver blocks a thread per lookup and usually caches nothing, and a broad crawl asks for the
same few thousand names millions of times. Why bounds on the TTL: a 0-second TTL (common behind
CDNs) would make every fetch a lookup, and a week-long one would keep fetching a server a site
has left. Negative answers are kept so a name that does not resolve costs one lookup per
``negative_ttl``, not one per queued page.

:class:`DnsCache` is the worker's own cache (bounded, least recently used out first). A fleet
shares answers through a :class:`SharedDns` (the ``redis`` backend's), which this module only
describes: a lookup a worker made is found by every other worker until it expires.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from time import time
from typing import Any, Protocol

# Why a name did not resolve (``DnsAnswer.error``); "" for an answer with an address.
NXDOMAIN = "nxdomain"  # the name does not exist: the server's authoritative word
SERVFAIL = "servfail"  # the server could not answer (a broken zone, an unreachable upstream)
TIMEOUT = "timeout"  # no answer in DNS_TIMEOUT
NO_ADDRESS = "no_address"  # the name exists but has no A record (or a CNAME chain too long)
REFUSED = "refused"
ERROR = "error"
FAILURES = (NXDOMAIN, SERVFAIL, TIMEOUT, NO_ADDRESS, REFUSED, ERROR)
# failures that may clear by themselves: the host is held and asked again
TRANSIENT = frozenset({SERVFAIL, TIMEOUT, REFUSED, ERROR})


@dataclass(frozen=True, slots=True)
class DnsAnswer:
    """What a lookup said: an IPv4 address with its TTL, or why there is none."""

    address: str = ""
    ttl: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass(frozen=True, slots=True)
class TtlBounds:
    """How long answers are kept: the answer's own TTL within ``[minimum, maximum]``; a
    failure for ``negative`` seconds."""

    minimum: float
    maximum: float
    negative: float

    def keep_for(self, answer: DnsAnswer) -> float:
        if not answer.ok:
            return self.negative
        return min(self.maximum, max(self.minimum, answer.ttl))

    def check(self) -> TtlBounds:
        if self.minimum < 0 or self.negative < 0 or self.maximum < self.minimum:
            raise ValueError(
                "dns_min_ttl and dns_negative_ttl must be >= 0, the longest TTL >= dns_min_ttl "
                f"(got {self.minimum}, {self.negative}, {self.maximum})"
            )
        return self


class DnsCache:
    """The worker's own answers: name -> (answer, expiry), at most ``size`` names."""

    def __init__(
        self,
        bounds: TtlBounds,
        size: int = 100_000,
        clock: Callable[[], float] = time,
    ) -> None:
        self.bounds = bounds
        self.size = max(1, size)
        self.clock = clock
        self._answers: OrderedDict[str, tuple[DnsAnswer, float]] = OrderedDict()

    def get(self, name: str) -> DnsAnswer | None:
        """The kept answer for ``name``, or None if there is none or it expired."""
        kept = self._answers.get(name)
        if kept is None:
            return None
        answer, expires = kept
        if expires <= self.clock():
            del self._answers[name]
            return None
        self._answers.move_to_end(name)
        return answer

    def put(self, name: str, answer: DnsAnswer, keep_for: float | None = None) -> float:
        """Keep ``answer`` (for ``keep_for`` seconds, or as the bounds say); returns until when."""
        seconds = self.bounds.keep_for(answer) if keep_for is None else keep_for
        expires = self.clock() + seconds
        self._answers[name] = (answer, expires)
        self._answers.move_to_end(name)
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)
        return expires

    def expires_in(self, name: str) -> float:
        """Seconds until ``name``'s kept answer expires (0 if none is kept)."""
        kept = self._answers.get(name)
        return max(0.0, kept[1] - self.clock()) if kept else 0.0

    def __len__(self) -> int:
        return len(self._answers)


class SharedDns(Protocol):
    """Answers shared by a crawl's workers. Each call is a network round trip, never a wait for
    an absent store (the resolver makes them on the reactor thread)."""

    def claim(self, name: str, seconds: float) -> tuple[DnsAnswer, float] | bool:
        """The crawl's answer for ``name`` and the seconds it has left, if there is one; else
        True: this worker looks ``name`` up, claimed for ``seconds`` unless renewed; False:
        another worker holds the claim, and its answer will be shared. One step, so an answer
        shared since the last look is never missed."""

    def renew(self, names: Collection[str], seconds: float) -> None:
        """This worker's claims on ``names`` last ``seconds`` more: their lookups still wait for
        a slot, or run."""

    def put(self, name: str, answer: DnsAnswer, seconds: float) -> None:
        """Share ``answer`` for ``seconds`` (and release the claim)."""

    def close(self) -> None: ...


class NoSharedDns:
    """A crawl without workers to share with (``memory``, ``sqlite`` backends): every call is
    answered at once, as if nobody else had asked."""

    def claim(self, name: str, seconds: float) -> tuple[DnsAnswer, float] | bool:
        return True

    def renew(self, names: Collection[str], seconds: float) -> None:
        return None

    def put(self, name: str, answer: DnsAnswer, seconds: float) -> None:
        return None

    def close(self) -> None:
        return None

    @classmethod
    def from_crawler(cls, crawler: Any) -> NoSharedDns:
        return cls()
