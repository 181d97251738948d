"""The Mercator frontier in one process's memory: the embedded default backend."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable
from itertools import count

from .api import AddResult, Entry, Frontier, FrontierCounts, HostReport, Lease, Outcome
from .politeness import PolitenessPolicy
from .selector import BiasedSelector


class HostState:
    """A host's politeness state. It outlives the host's back queue: a host that gets a back
    queue again later keeps its slot times, so it is never hit early."""

    __slots__ = (
        "admitted",
        "back",
        "busy",
        "crawl_delay",
        "dead",
        "failures",
        "first_in_flight",
        "firsts",
        "free_at",
        "name",
        "skipped",
        "version",
    )

    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.free_at = [0.0] * slots
        self.busy = [False] * slots
        self.crawl_delay: float | None = None
        self.skipped = False
        self.dead = False
        self.failures = 0
        self.firsts: deque[Entry] = deque()
        self.first_in_flight = 0
        self.back: int | None = None  # index of its back queue, if it has one
        self.admitted = 0
        self.version = 0  # invalidates stale heap entries

    def in_flight(self) -> int:
        return sum(self.busy)

    def free_slot(self) -> int:
        """The free slot that comes due first, or -1."""
        best = -1
        for i, busy in enumerate(self.busy):
            if not busy and (best < 0 or self.free_at[i] < self.free_at[best]):
                best = i
        return best


class MemoryFrontier(Frontier):
    """Prioritizer output goes to K front queues; a biased selector refills B back queues of one
    host each; a heap keyed by each host's next allowed fetch time picks the next URL.

    Every public call does a bounded amount of work: a refill moves at most ``refill_batch``
    entries from front to back queues per call.
    """

    def __init__(
        self,
        policy: PolitenessPolicy | None = None,
        *,
        front_queues: int = 8,
        back_queues: int = 48,
        max_pages_per_host: int | None = None,
        refill_batch: int = 256,
        selector_weights: list[int] | None = None,
        on_give_up: Callable[[str, str, int], None] | None = None,
    ) -> None:
        if back_queues < 1:
            raise ValueError("at least one back queue is needed")
        self.policy = policy or PolitenessPolicy()
        self.front_queue_count = front_queues
        self.back_queue_count = back_queues
        self.max_pages_per_host = max_pages_per_host
        self.refill_batch = refill_batch
        self._front: list[deque[Entry]] = [deque() for _ in range(front_queues)]
        self._front_sizes = [0] * front_queues
        self._front_total = 0
        self._selector = BiasedSelector(front_queues, selector_weights)
        self._back: list[deque[Entry]] = [deque() for _ in range(back_queues)]
        self._back_host: list[HostState | None] = [None] * back_queues
        self._free_back = list(range(back_queues - 1, -1, -1))
        self._hosts: dict[str, HostState] = {}
        self._heap: list[tuple[float, int, int, HostState]] = []
        self._seq = count()
        self._tokens = count(1)
        self._leases: dict[int, tuple[Lease, HostState, bool]] = {}
        self._seen: set[str] = set()
        self._queued = 0
        self.dropped: dict[str, int] = {}
        self.on_give_up = on_give_up

    # -- adding -------------------------------------------------------------------------------

    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        host = self._host(entry.host)
        if host.dead:
            return AddResult(False, "host_dead")
        if host.skipped:
            return AddResult(False, "host_skipped")
        if not force:
            if entry.key in self._seen:
                return AddResult(False, "seen")
            if self.max_pages_per_host is not None and host.admitted >= self.max_pages_per_host:
                return AddResult(False, "host_budget")
            self._seen.add(entry.key)
            host.admitted += 1
        self._queued += 1
        if first:
            host.firsts.append(entry)
            self._reschedule(host)
            return AddResult(True)
        p = entry.priority
        p = 0 if p < 0 else min(p, self.front_queue_count - 1)
        self._front[p].append(entry)
        self._front_sizes[p] += 1
        self._front_total += 1
        if self._free_back:
            self._refill()
        return AddResult(True)

    def _host(self, name: str) -> HostState:
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = HostState(name, self.policy.host_concurrency)
        return host

    # -- the back-queue router ----------------------------------------------------------------

    def _refill(self) -> None:
        """Move front-queue entries to back queues while a back queue is free (Mercator's refill),
        at most ``refill_batch`` moves per call."""
        budget = self.refill_batch
        sizes = self._front_sizes
        while self._free_back and self._front_total and budget > 0:
            budget -= 1
            qi = self._selector.pick(sizes)
            entry = self._front[qi].popleft()
            sizes[qi] -= 1
            self._front_total -= 1
            host = self._hosts[entry.host]
            if host.dead or host.skipped:
                self._drop(1, "host_dead" if host.dead else "host_skipped")
                continue
            if host.back is None:
                host.back = self._free_back.pop()
                self._back_host[host.back] = host
            queue = self._back[host.back]
            queue.append(entry)
            if len(queue) == 1:
                self._reschedule(host)

    def _release_back(self, host: HostState) -> None:
        assert host.back is not None
        self._back[host.back].clear()
        self._back_host[host.back] = None
        self._free_back.append(host.back)
        host.back = None

    # -- the heap of hosts --------------------------------------------------------------------

    def _ready_time(self, host: HostState) -> float | None:
        """When the host can next hand out a URL, or None if it has nothing it may hand out."""
        if host.dead or host.skipped or host.first_in_flight:
            return None
        if not host.firsts and (host.back is None or not self._back[host.back]):
            return None
        slot = host.free_slot()
        return None if slot < 0 else host.free_at[slot]

    def _reschedule(self, host: HostState) -> None:
        host.version += 1
        when = self._ready_time(host)
        if when is not None:
            heapq.heappush(self._heap, (when, next(self._seq), host.version, host))

    def _peek(self) -> tuple[float, HostState] | None:
        heap = self._heap
        while heap:
            when, _, version, host = heap[0]
            if version == host.version:
                return when, host
            heapq.heappop(heap)
        return None

    # -- handing out and completing -----------------------------------------------------------

    def next(self, now: float) -> Lease | None:
        if self._free_back and self._front_total:
            self._refill()
        top = self._peek()
        if top is None or top[0] > now:
            return None
        heapq.heappop(self._heap)
        host = top[1]
        slot = host.free_slot()
        is_first = bool(host.firsts)
        if is_first:
            entry = host.firsts.popleft()
            host.first_in_flight += 1
        else:
            assert host.back is not None
            queue = self._back[host.back]
            entry = queue.popleft()
            if not queue:
                self._release_back(host)
                self._refill()
        self._queued -= 1
        host.busy[slot] = True
        lease = Lease(next(self._tokens), entry, slot, now)
        self._leases[lease.token] = (lease, host, is_first)
        self._reschedule(host)
        return lease

    def complete(
        self, token: int, now: float, duration: float | None, outcome: str = Outcome.FETCHED
    ) -> None:
        record = self._leases.pop(token, None)
        if record is None:
            return
        lease, host, was_first = record
        host.busy[lease.slot] = False
        if was_first:
            host.first_in_flight -= 1
        if outcome != Outcome.NOT_SENT:
            host.free_at[lease.slot] = now + self.policy.delay(duration, host.crawl_delay)
            if outcome == Outcome.FAILED:
                host.failures += 1
                if host.failures >= self.policy.max_failures:
                    self._give_up(host, "host_dead")
            else:
                host.failures = 0
        self._reschedule(host)

    def _give_up(self, host: HostState, reason: str) -> None:
        """Drop a host's queued URLs; URLs of it still in the front queues go when refill meets
        them. Its seen URLs stay seen."""
        if reason == "host_dead":
            host.dead = True
        else:
            host.skipped = True
        dropped = len(host.firsts)
        host.firsts.clear()
        if host.back is not None:
            dropped += len(self._back[host.back])
            self._release_back(host)
        host.version += 1  # its heap entry is stale now
        self._drop(dropped, reason)
        if self.on_give_up is not None:
            self.on_give_up(host.name, reason, dropped)

    def _drop(self, n: int, reason: str) -> None:
        if n:
            self._queued -= n
            self.dropped[reason] = self.dropped.get(reason, 0) + n

    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        state = self._host(host)
        state.crawl_delay = seconds
        if not self.policy.accepts_crawl_delay(seconds):
            self._give_up(state, "host_skipped")
            return False
        self._reschedule(state)
        return True

    # -- what the scheduler asks about ----------------------------------------------------------

    def next_due(self, now: float) -> float | None:
        if self._free_back and self._front_total:
            self._refill()
        top = self._peek()
        if top is None:
            return None
        return max(top[0], now)

    def has_work(self, now: float, horizon: float) -> bool:
        if self._leases:
            return True
        due = self.next_due(now)
        return due is not None and due - now <= horizon

    def in_flight(self) -> int:
        return len(self._leases)

    def __len__(self) -> int:
        return self._queued

    def mark_seen(self, keys: Iterable[str]) -> int:
        before = len(self._seen)
        self._seen.update(keys)
        return len(self._seen) - before

    def is_seen(self, key: str) -> bool:
        return key in self._seen

    def counts(self, now: float) -> FrontierCounts:
        c = FrontierCounts(
            queued=self._queued,
            in_flight=len(self._leases),
            seen=len(self._seen),
            hosts=len(self._hosts),
            front_queued=self._front_total,
            back_queues_used=self.back_queue_count - len(self._free_back),
            extra=dict(self.dropped),
        )
        for host in self._hosts.values():
            if host.in_flight():
                c.hosts_busy += 1
            when = self._ready_time(host)
            if when is None:
                continue
            if when <= now:
                c.hosts_ready += 1
            else:
                c.hosts_waiting += 1
        return c

    def waiting_hosts(self, now: float) -> list[HostReport]:
        queued: dict[str, int] = {}
        for queue in self._front:
            for entry in queue:
                queued[entry.host] = queued.get(entry.host, 0) + 1
        reports = []
        for host in self._hosts.values():
            n = queued.get(host.name, 0) + len(host.firsts)
            if host.back is not None:
                n += len(self._back[host.back])
            if not n or host.dead or host.skipped:
                continue
            when = self._ready_time(host)
            if host.back is None and not host.firsts:
                reason = "waiting for a back queue"
                due_in = 0.0
            elif when is None:
                reason = "in flight"
                due_in = 0.0
            else:
                reason = "politeness delay"
                due_in = max(0.0, when - now)
            reports.append(HostReport(host.name, n, due_in, reason))
        return sorted(reports, key=lambda r: -r.due_in)

    def host_state(self, host: str) -> HostState | None:
        """For tests and progress reports."""
        return self._hosts.get(host)
