"""A host's politeness state in the Mercator frontier, an open lease, and the book of open leases
(``mercator.py``)."""

from __future__ import annotations

import heapq
from collections import deque

from crawler.frontier.api import Entry, Lease


class HostState:
    """A host's politeness state. It outlives the host's back queue: a host that gets a back
    queue again later keeps its slot times, so it is never hit early."""

    __slots__ = (
        "admitted",
        "blocked",
        "busy",
        "crawl_delay",
        "dead",
        "failure_bits",
        "failures",
        "fetches",
        "first_in_flight",
        "firsts",
        "free_at",
        "fronted",
        "gap_sum",
        "gaps",
        "has_back",
        "last_end",
        "low_run",
        "name",
        "returned",
        "skipped",
        "tried",
        "version",
    )

    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.free_at = [0.0] * slots
        self.busy = [False] * slots
        self.crawl_delay: float | None = None
        self.skipped = False
        self.dead = False
        self.blocked = False  # by the operator of a shared crawl (MercatorFrontier.obey_blocks)
        self.failures = 0  # in a row
        # the outcomes of the last fetches, newest in bit 0 (1: failed), up to the policy's
        # failure_window: failures decay as fetches go by instead of vanishing at one success
        self.failure_bits = 0
        # its first requests (robots.txt), a list once it has one: most hosts hold none for
        # most of a crawl, and a worker holds every host of its partitions (an empty list
        # costs 56 B and the collector's attention, an empty deque 760 B)
        self.firsts: list[Entry] | tuple[()] = ()
        self.first_in_flight = 0
        # Leases handed back (released or expired): served before the back queue. Kept here
        # rather than in the store because the host may hold no back queue at that moment.
        # A deque once it has one (see firsts).
        self.returned: deque[Entry] | tuple[()] = ()
        self.has_back = False
        self.admitted = 0
        self.version = 0  # invalidates stale heap entries
        self.fetches = 0
        self.last_end: float | None = None
        self.gap_sum = 0.0  # real gaps: end of the host's previous fetch to the next lease
        self.gaps = 0
        self.low_run = 0  # URLs served in a row that were worth less than others waiting
        # its URLs in the front queues (stale OPIC copies included): its first request
        # (robots.txt) waits while there are some and it holds no back queue
        self.fronted = 0
        self.tried = False  # a first request of it was handed out once (a retry goes at once)

    def push_first(self, entry: Entry, *, front: bool = False) -> None:
        """Queue a first request: last, or ``front`` first (one handed back)."""
        if not self.firsts:
            self.firsts = [entry]
        elif front:
            self.firsts.insert(0, entry)
        else:
            self.firsts.append(entry)

    def hand_back(self, entry: Entry) -> None:
        """A lease handed back: served first, before the older ones handed back."""
        if self.returned:
            self.returned.appendleft(entry)
        else:
            self.returned = deque((entry,))

    def count_outcome(self, failed: bool, window: int) -> bool:
        """A fetch's outcome into the failure counts (in a row, and among the last ``window``
        fetches); returns ``failed``."""
        self.failure_bits = ((self.failure_bits << 1) | failed) & ((1 << window) - 1)
        self.failures = self.failures + 1 if failed else 0
        return failed

    def in_flight(self) -> int:
        return sum(self.busy)

    def refusal(self) -> str:
        """Why the host takes no URL now ("": it does): given up, or blocked by the operator."""
        if self.dead or self.skipped:
            return "host_dead" if self.dead else "host_skipped"
        return "host_blocked" if self.blocked else ""

    def ready_time(self) -> float | None:
        """When the host can next hand out a URL, or None if it has nothing it may hand out
        now: given up, its first request in flight, or only URLs still waiting in the front
        queues (its first robots.txt waits while its pages wait for a back queue, unless it
        is a retry)."""
        if self.dead or self.skipped or self.first_in_flight:
            return None
        if not self.returned and not self.has_back and (
            not self.firsts or (self.fronted > 0 and not self.tried)
        ):
            return None
        slot = self.free_slot()
        return None if slot < 0 else self.free_at[slot]

    def free_slot(self) -> int:
        """The free slot that comes due first, or -1."""
        best = -1
        for i, busy in enumerate(self.busy):
            if not busy and (best < 0 or self.free_at[i] < self.free_at[best]):
                best = i
        return best


class OpenLease:
    """An open lease: handed out and not yet acknowledged, released or expired."""

    __slots__ = ("completed", "deadline", "first", "host", "lease")

    def __init__(self, lease: Lease, host: HostState, first: bool, deadline: float) -> None:
        self.lease = lease
        self.host = host
        self.first = first
        self.completed = False  # the fetch ended: the slot is free, the URL not yet forgotten
        self.deadline = deadline


class LeaseBook(dict[str, OpenLease]):
    """The open leases by token, and a heap of their deadlines so that expiry costs O(log n)
    per expired lease and nothing while the earliest deadline is ahead."""

    def __init__(self) -> None:
        super().__init__()
        # (deadline, token): stale when the lease is gone or was renewed since
        self._deadlines: list[tuple[float, str]] = []

    def open(self, record: OpenLease) -> None:
        self[record.lease.token] = record
        self._push(record.deadline, record.lease.token)

    def renew(self, token: str, deadline: float) -> bool:
        record = self.get(token)
        if record is None:
            return False
        record.deadline = deadline
        self._push(deadline, token)
        return True

    def due(self, now: float) -> bool:
        """True when a deadline may have passed (the caller then calls ``expired``)."""
        return bool(self._deadlines) and self._deadlines[0][0] <= now

    def expired(self, now: float) -> list[OpenLease]:
        """Remove and return the leases whose deadline has passed."""
        deadlines, out = self._deadlines, []
        while deadlines and deadlines[0][0] <= now:
            deadline, token = heapq.heappop(deadlines)
            record = self.get(token)
            if record is not None and record.deadline == deadline:
                del self[token]
                out.append(record)  # (else acknowledged, released, or renewed since)
        return out

    def _push(self, deadline: float, token: str) -> None:
        """Deadlines of acknowledged or renewed leases stay in the heap until they come up;
        rebuilding it when they outnumber the open leases keeps it O(open leases), at an
        amortized O(1) per push."""
        heapq.heappush(self._deadlines, (deadline, token))
        if len(self._deadlines) > 2 * len(self) + 64:
            self._deadlines = [(r.deadline, t) for t, r in self.items()]
            heapq.heapify(self._deadlines)
