"""The Mercator frontier: one algorithm over a queue store (in memory, or SQLite on disk)."""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import count

from crawler.config import defaults
from crawler.frontier.api import (
    AddResult,
    Clock,
    Entry,
    Frontier,
    FrontierCounts,
    HostReport,
    Lease,
    Outcome,
)
from crawler.frontier.hoststate import HostState, LeaseBook, OpenLease
from crawler.frontier.opic import ROUTED, CashLedger, pick_above_floor
from crawler.frontier.politeness import PolitenessPolicy
from crawler.frontier.reports import busiest, count_hosts, waiting
from crawler.frontier.selector import BiasedSelector
from crawler.frontier.store import MemoryQueueStore, QueueStore, entry_key, identity, url_key

# Front queues: priority levels (the depth policy's depth d goes to queue min(d, 7)). Part of a
# shared crawl's layout (every worker must agree), so not a setting.
FRONT_QUEUES = 8
# Front-queue entries one refill moves at most: bounds the work of one call on the reactor.
REFILL_BATCH = 256
# A host gives its back queue up after serving this many URLs in a row worth less than URLs
# waiting in the front queues while no back queue is free (0: never; Mercator keeps a back
# queue while its host has URLs). Not under "fifo".
BACK_RUN = 4
ADDED, SEEN = AddResult(True), AddResult(False, "seen")  # most adds' answers (frozen: shared)


class MercatorFrontier(Frontier):
    """Prioritizer output goes to K front queues; a biased selector refills at most B back
    queues of one host each; a heap keyed by each host's next allowed fetch time picks the next
    URL. Every public call does a bounded amount of work: a refill moves at most
    ``refill_batch`` entries from front to back queues per call, and expiry costs O(log n) per
    expired lease (a heap of deadlines, looked at only when its root is due).

    A URL added waits in its front queue until URLs are handed out (``next``, ``due_in``):
    only then does the refill route it, so the URLs that wait together leave by priority
    whether they were added in this process or found in a store a stopped crawl left.

    Time is read from ``clock`` (``time.monotonic`` unless a test passes its own); a lease not
    acknowledged or renewed within ``lease_ttl`` seconds comes back to its host's queue.

    Value shapes the back queues too: a host gives its back queue up after ``back_run`` URLs
    worth less than the best waiting (``_judge_run``); its robots.txt waits for one. With a
    ``ledger`` (OPIC) cash decides the front queue, and cash arriving later raises it.
    """

    def __init__(
        self,
        policy: PolitenessPolicy | None = None,
        *,
        store: QueueStore | None = None,
        clock: Clock | None = None,
        lease_ttl: float = defaults.FRONTIER_LEASE_TTL,
        front_queues: int = FRONT_QUEUES,
        back_queues: int = 48,
        max_pages_per_host: int | None = None,
        refill_batch: int = REFILL_BATCH,
        selector_weights: list[int] | None = None,
        on_give_up: Callable[[str, str, int], None] | None = None,
        ledger: CashLedger | None = None,
        back_run: int = 0,
    ) -> None:
        if back_queues < 1:
            raise ValueError("at least one back queue is needed")
        if lease_ttl <= 0:
            raise ValueError("lease_ttl must be > 0")
        self.policy = policy or PolitenessPolicy()
        self.clock: Clock = clock or time.monotonic
        self.lease_ttl = lease_ttl
        self.front_queue_count = front_queues
        self.back_queue_count = back_queues
        self.max_pages_per_host = max_pages_per_host
        self.refill_batch = refill_batch
        self.store = store if store is not None else MemoryQueueStore(front_queues)
        if len(self.store.front_sizes) != front_queues:
            raise ValueError("the store has a different number of front queues")
        self._selector = BiasedSelector(front_queues, selector_weights)
        self._free_back = back_queues
        self._hosts: dict[str, HostState] = {}
        self._heap: list[tuple[float, int, int, HostState]] = []
        self._seq = count()
        self._tokens = count(1)
        self._leases = LeaseBook()
        self._queued = 0
        self.dropped: dict[str, int] = {}
        self.expired = 0
        self.on_give_up = on_give_up
        self.ledger = ledger
        self.back_run = back_run
        self.back_released = 0  # back queues given up for lack of value
        self.is_blocked: Callable[[str], bool] = lambda name: False  # (obey_blocks)
        self._recover()

    def _recover(self) -> None:
        """Take up what a persistent store kept from an earlier run: its queued entries are all
        back in the front queues (including those that were in flight or not acknowledged), its
        hosts keep their page counts, skips and Crawl-delays."""
        for saved in self.store.load_hosts():
            host = self._host(saved.name)
            host.admitted = saved.admitted
            host.crawl_delay = saved.crawl_delay
            host.dead = saved.dead
            host.skipped = saved.skipped
            host.free_at = [saved.free_at] * len(host.free_at)
            host.failures, host.failure_bits = saved.failures, saved.failure_bits
        self._queued = sum(self.store.front_sizes)
        for entry in self.store.load_firsts():  # a host's robots.txt, kept by a shared store
            host = self._host(entry.host)
            host.push_first(entry)
            self._queued += 1
            self._reschedule(host)
        if self.ledger is not None and (stale := self.store.stale_copies()) is not None:
            self.ledger.stale.update(stale)
            self.ledger.on_stale = self.store.note_stale
            self._queued -= sum(stale.values())  # raised URLs' older copies: skipped, not queued
        if self.ledger is not None and self._queued and self.store.rebuilds_cash:
            for entry in self.store.iter_queued():
                self.ledger.restore(entry)

    # -- adding -------------------------------------------------------------------------------

    def add_many(self, entries: Sequence[Entry], keys: Sequence[int] = ()) -> list[AddResult]:
        """See :meth:`Frontier.add_many`; ``keys``: the entries' seen keys (``entry_key``),
        when the caller has them (each is a hash of the URL)."""
        if not self.store.batched_seen:
            return [self.add(e) for e in entries]
        # one seen-test for the batch (a shared store: one round trip), for the URLs whose host
        # takes URLs now (each host asked once); a host that reaches its budget within the batch
        # refuses the rest (their keys stay seen: a budget refusal is final). A link seen before
        # of a known host is answered here (no add(): most links) unless budget or cash matter
        hosts, budget, cash = self._hosts, self.max_pages_per_host, self.ledger is not None
        state: dict[str, HostState | bool | None] = {}  # False: refuses (asked once a host)
        known, tested, tests, out = [], [], [], []  # (no comprehension: a function each)
        for i, e in enumerate(entries):
            if (h := state.get(e.host, True)) is True:
                h = state[e.host] = False if (h := hosts.get(e.host)) and h.refusal() else h
            known.append(h)
            t = h is not False and (h is None or budget is None or h.admitted < budget)
            tested.append(t)
            if t:
                tests.append(keys[i] if keys else entry_key(e))
        fresh = iter(self.store.seen_add_many(tests))  # the tested ones' answers, in order
        for i, e in enumerate(entries):  # (no zip: its strict= costs ~1.3k instructions)
            new = next(fresh) if tested[i] else None
            out.append(SEEN if new is False and known[i] is not None and budget is None
                       and not (cash and e.cash) else self.add(e, seen=new))  # fmt: skip
        return out

    def add(
        self, entry: Entry, *, force: bool = False, first: bool = False, seen: bool | None = None
    ) -> AddResult:
        """See :meth:`Frontier.add`; ``seen``: the seen-test's answer when ``add_many`` made it
        for the batch (True: the URL was new)."""
        host = self._hosts.get(entry.host) or self._host(entry.host)
        if refusal := host.refusal():
            return AddResult(False, refusal)
        if not force:
            if self.max_pages_per_host is not None and host.admitted >= self.max_pages_per_host:
                return AddResult(False, "host_budget")
            if not (self.store.seen_add(entry_key(entry)) if seen is None else seen):
                if self.ledger is not None and entry.cash:
                    self._credit(identity(entry), entry.cash, entry.policy)
                return SEEN
            host.admitted += 1
            self.store.save_host(host)
        else:
            # A forced URL (a start URL, a retry) is known from now on: a link back to it is
            # not new, so a start page is not fetched twice.
            self.store.seen_add(entry_key(entry))
        entry.host = host.name  # one string per host, not one per URL
        self._queued += 1
        if first:
            host.push_first(entry)
            self.store.first_push(entry)
            self._reschedule(host)
            return ADDED
        if self.ledger is not None:
            rec = self.ledger.queued.get(identity(entry))
            self._queued -= rec is not None and rec[1] != ROUTED  # its older copy goes stale
            self.ledger.admit(entry)
        elif not 0 <= entry.priority < self.front_queue_count:  # (most: no min, no max)
            entry.priority = min(max(entry.priority, 0), self.front_queue_count - 1)
        self.store.front_push(entry)
        host.fronted += 1
        if host.firsts and not host.has_back:  # its robots.txt now waits for a back queue
            self._reschedule(host)
        return ADDED  # routed to a back queue at hand-out (``_refill``), by priority

    def credit(self, links: Sequence[tuple]) -> None:  # type: ignore[type-arg]
        if (ledger := self.ledger) is None:
            return
        queued, lost = ledger.queued, 0.0
        for url, cash, policy, *_ in links:
            if url not in queued:  # most repeated links lead to pages fetched already
                lost += cash
            elif cash:
                self._credit(url, cash, policy)
        ledger.to_fetched += lost

    def _credit(self, url: str | int, cash: float, policy: str) -> None:
        """Cash for a URL seen before: queued again in a better front queue if it earned one."""
        copy = self.ledger.credit(url, cash, policy)  # type: ignore[union-attr]
        if copy is not None:
            self.store.front_push(copy)
            self._hosts[copy.host].fronted += 1

    def mark_seen(self, keys: Iterable[str]) -> int:
        return sum(self.store.seen_add(url_key(k)) for k in keys)

    def _host(self, name: str) -> HostState:
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = HostState(name, self.policy.host_concurrency)
            host.blocked = self.is_blocked(name)
        return host

    def obey_blocks(self, blocked: Callable[[str], bool]) -> dict[str, int]:
        """The operator's blocks (not saved: each owner obeys them as they are): returns the URLs
        dropped ("host_blocked") per host newly blocked; hosts met later ask ``blocked``."""
        self.is_blocked = blocked
        dropped: dict[str, int] = {}
        for host in list(self._hosts.values()):
            if host.blocked and not blocked(host.name):
                host.blocked = False
                self._reschedule(host)
            elif not host.blocked and blocked(host.name):
                queued = self._queued
                self._give_up(host, "host_blocked")
                dropped[host.name] = queued - self._queued + host.fronted
        return dropped

    # -- the back-queue router ----------------------------------------------------------------

    def _refill(self) -> None:
        """Move front-queue entries to back queues while a back queue is free (Mercator's
        refill), at most ``refill_batch`` moves per call. Under OPIC the last front queue is a
        floor (a distrusted source's URLs): drawn once no back queue and no other front queue
        holds anything."""
        budget = self.refill_batch
        store = self.store
        sizes = store.front_sizes
        ledger = self.ledger
        while self._free_back > 0 and budget > 0 and any(sizes):
            q = self._selector.pick(sizes) if ledger is None else pick_above_floor(
                self._selector.pick, sizes, self._free_back < self.back_queue_count
            )  # fmt: skip
            if q < 0:
                break  # only the floor is left in front: it waits for the back queues
            entry = store.front_pop(q)
            host = self._hosts.get(entry.host) or self._host(entry.host)
            host.fronted -= host.fronted > 0  # (0 for URLs a persistent store kept)
            if ledger is not None:
                if ledger.is_stale(identity(entry), q):
                    store.forget(entry)  # a raised URL's older copy: costs no budget
                    continue
                ledger.routed(entry)
            budget -= 1
            if refusal := host.refusal():
                self._drop([entry], refusal)
                continue
            if not host.has_back:
                host.has_back = True
                self._free_back -= 1
            store.back_push(host.name, entry)
            if store.back_len(host.name) == 1:
                self._reschedule(host)

    def resize_back(self, count: int) -> None:
        """Hold ``count`` back queues from now on (a worker's B shared anew over the partitions
        it owns); fewer take none back: no host is routed one until the count is under."""
        self._free_back += max(1, count) - self.back_queue_count
        self.back_queue_count = max(1, count)

    def _release_back(self, host: HostState) -> None:
        host.has_back, host.low_run = False, 0
        self._free_back += 1

    def _judge_run(self, host: HostState, entry: Entry) -> None:
        """After ``host`` served ``entry``: give its back queue up after ``back_run`` URLs in a
        row worth less than the best front queue waiting while no back queue is free (so a
        deep or low-value host cannot keep one just for having many URLs)."""
        value = entry.priority if self.ledger is None else self.ledger.bucket(entry.cash)
        best = next((i for i, n in enumerate(self.store.front_sizes) if n), value)
        low = self._free_back <= 0 and value > best  # worth less than the best waiting
        host.low_run = host.low_run + 1 if low else 0
        if host.low_run >= self.back_run:
            self._bounce(host)

    def _bounce(self, host: HostState) -> None:
        """Give up ``host``'s back queue: its URLs go back to the front queues, by value."""
        store, ledger = self.store, self.ledger
        entries = store.back_drop(host.name)
        self._release_back(host)
        self.back_released += 1
        for entry in entries:
            store.forget(entry)  # a persistent store: its routed row goes, a new one comes
            entry.id = 0
            if ledger is not None:
                ledger.requeue(entry)
            store.front_push(entry)
        host.fronted += len(entries)
        self._reschedule(host)
        self._refill()

    # -- the heap of hosts --------------------------------------------------------------------

    def _reschedule(self, host: HostState) -> None:
        host.version += 1
        when = host.ready_time()
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

    # -- handing out --------------------------------------------------------------------------

    def next(self) -> Lease | None:
        now = self.clock()
        if self._leases.due(now):
            self._expire(now)
        if self._free_back > 0:
            self._refill()
        top = self._peek()
        if top is None or top[0] > now:
            return None
        heapq.heappop(self._heap)
        host = top[1]
        slot = host.free_slot()
        is_first = bool(host.firsts)
        if is_first:
            entry = host.firsts.pop(0)
            host.first_in_flight += 1
            host.tried = True
        elif host.returned:
            entry = host.returned.popleft()
            self._take_cash(entry)
        else:
            entry = self.store.back_pop(host.name)
            self._take_cash(entry)
            if not self.store.back_len(host.name):
                self._release_back(host)
                self._refill()
            elif self.back_run:
                self._judge_run(host, entry)
        self._queued -= 1
        host.busy[slot] = True
        if host.last_end is not None:
            host.gap_sum += now - host.last_end
            host.gaps += 1
        lease = Lease(str(next(self._tokens)), entry, slot, now)
        deadline = now + self.lease_ttl
        self._leases.open(OpenLease(lease, host, is_first, deadline))
        self._reschedule(host)
        return lease

    def _take_cash(self, entry: Entry) -> None:
        """OPIC: the entry leaves with the cash its URL gathered (its page hands it on)."""
        cash = None if self.ledger is None else self.ledger.take(identity(entry))
        entry.cash = entry.cash if cash is None else cash

    # -- the lease lifecycle ------------------------------------------------------------------

    def complete(
        self,
        token: str,
        duration: float | None,
        outcome: Outcome = Outcome.FETCHED,
        *,
        size: int = 0,
    ) -> float | None:
        record = self._leases.get(token)
        if record is None or record.completed:
            return None
        now = self.clock()
        rest = self._complete(record, now, duration, outcome)
        self.store.tick(now)
        return rest

    def _complete(
        self, record: OpenLease, now: float, duration: float | None, outcome: Outcome
    ) -> float | None:
        """Free the lease's slot; returns the slot's rest from ``now`` (None: not sent)."""
        record.completed = True
        rest = None
        lease, host = record.lease, record.host
        host.busy[lease.slot] = False
        if record.first:
            host.first_in_flight -= 1
        if outcome != Outcome.NOT_SENT:
            host.fetches += 1
            host.last_end = now
            self._rest(host, lease.slot, now, duration)
            rest = host.free_at[lease.slot] - now
            if host.count_outcome(outcome == Outcome.FAILED, self.policy.failure_window):
                held = self.policy.after_failure(host.failures, host.failure_bits.bit_count())
                if held is None:
                    self._give_up(host, "host_dead")
                else:  # held longer at each failure (PolitenessPolicy.backoff)
                    host.free_at[lease.slot] += held
                    rest += held
            self.store.save_host(host)  # its next fetch time (a shared store keeps it)
        self._reschedule(host)
        return rest

    def _rest(self, host: HostState, slot: int, now: float, duration: float | None) -> None:
        # max(): a hold placed while the fetch was in flight must not be shortened
        host.free_at[slot] = max(
            host.free_at[slot], now + self.policy.delay(duration, host.crawl_delay)
        )

    def ack(self, token: str) -> None:
        record = self._leases.pop(token, None)
        if record is None:
            return
        now = self.clock()
        if not record.completed:
            # acknowledged without a completion: the fetch happened, its duration is unknown
            self._complete(record, now, None, Outcome.FETCHED)
        self.store.forget(record.lease.entry)
        self.store.tick(now, durable=True)

    def renew(self, tokens: Iterable[str]) -> int:
        now = self.clock()
        if self._leases.due(now):
            self._expire(now)
        return sum(self._leases.renew(token, now + self.lease_ttl) for token in tokens)

    def release(self, tokens: Iterable[str], *, rest: bool = False) -> int:
        released = 0
        now = self.clock() if rest else 0.0
        for token in tokens:
            record = self._leases.pop(token, None)
            if record is None:
                continue
            released += 1
            host = record.host
            if not record.completed:
                record.completed = True
                host.busy[record.lease.slot] = False  # its time unchanged: nothing was sent
                if record.first:
                    host.first_in_flight -= 1
                if rest:  # ... unless the download had started: the server may have seen it
                    self._rest(host, record.lease.slot, now, None)
            self._hand_back(record)
        return released

    def expire(self) -> int:
        return self._expire(self.clock())

    def _expire(self, now: float) -> int:
        expired = self._leases.expired(now)
        for record in expired:
            host = record.host
            if not record.completed:
                # the fetch may have happened: rest as after a fetch of unknown duration
                record.completed = True
                host.busy[record.lease.slot] = False
                if record.first:
                    host.first_in_flight -= 1
                self._rest(host, record.lease.slot, now, None)
            self._hand_back(record)
        self.expired += len(expired)
        return len(expired)

    def _hand_back(self, record: OpenLease) -> None:
        """Put a lease's URL back at the head of its host's queue (a persistent store still
        holds its row: it was never forgotten)."""
        host, entry = record.host, record.lease.entry
        if self.ledger is not None and not record.first:
            self.ledger.hand_back(entry)
            entry.cash = 0.0  # the ledger holds it again, until the next lease
        self._queued += 1
        if refusal := host.refusal():
            self._drop([entry], refusal)
            return
        if record.first:
            host.push_first(entry, front=True)
        else:
            host.hand_back(entry)
        self._reschedule(host)

    def _give_up(self, host: HostState, reason: str) -> None:
        """Drop a host's queued URLs; URLs of it still in the front queues go when refill meets
        them. Its seen URLs stay seen."""
        setattr(host, {"host_dead": "dead", "host_blocked": "blocked"}.get(reason, "skipped"), True)
        dropped = [*host.firsts, *host.returned]
        host.firsts = host.returned = ()
        if host.has_back:
            dropped = dropped + self.store.back_drop(host.name)
            self._release_back(host)
        host.version += 1  # its heap entry is stale now
        self.store.save_host(host)
        self._drop(dropped, reason)
        if self.on_give_up is not None:  # with its URLs still in front, which refill drops
            self.on_give_up(host.name, reason, len(dropped) + host.fronted)

    def _drop(self, entries: list[Entry], reason: str) -> None:
        if entries:
            self._queued -= len(entries)
            self.dropped[reason] = self.dropped.get(reason, 0) + len(entries)
            for entry in entries:
                self.store.forget(entry)
                if self.ledger is not None:
                    self.ledger.drop(identity(entry))

    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        state = self._host(host)
        state.crawl_delay = seconds
        self.store.save_host(state)
        if not self.policy.accepts_crawl_delay(seconds):
            self._give_up(state, "host_skipped")
            return False
        self._reschedule(state)
        return True

    def hold_host(self, host: str, seconds: float) -> None:
        until = self.clock() + seconds
        state = self._host(host)
        state.free_at = [max(t, until) for t in state.free_at]
        self.store.save_host(state)
        self._reschedule(state)

    # -- what the scheduler asks about ----------------------------------------------------------

    def due_in(self) -> float | None:
        now = self.clock()
        if self._leases.due(now):
            self._expire(now)
        if self._free_back > 0:
            self._refill()
        top = self._peek()
        if top is None:
            return None
        return max(0.0, top[0] - now)

    def has_work(self, horizon: float) -> bool:
        due = self.due_in()  # expires overdue leases first
        if self._leases:
            return True
        return due is not None and due <= horizon

    def in_flight(self) -> int:
        return len(self._leases)

    def __len__(self) -> int:
        return self._queued

    def back_queues(self) -> dict[str, int]:
        """Hosts that hold a back queue, with its length."""
        return {h.name: self.store.back_len(h.name) for h in self._hosts.values() if h.has_back}

    def counts(self) -> FrontierCounts:
        now = self.clock()
        extra = dict(self.dropped)
        if self.expired:
            extra["leases_expired"] = self.expired
        if self.back_released:
            extra["back_queues_released"] = self.back_released
        c = FrontierCounts(
            queued=self._queued,
            in_flight=len(self._leases),
            seen=self.store.seen_count(),
            hosts=len(self._hosts),
            front_queued=sum(self.store.front_sizes),
            back_queues_used=self.back_queue_count - self._free_back,
            extra=extra,
        )
        return count_hosts(c, self._hosts.values(), now)

    def hosts(self) -> list[str]:
        return [h.name for h in self._hosts.values() if h.admitted]

    def busiest_hosts(self, n: int = 3) -> list[tuple[str, int, float]]:
        return busiest(self._hosts.values(), n)

    def waiting_hosts(self) -> list[HostReport]:
        return waiting(self._hosts.values(), self.store.iter_queued(), self.clock())

    def close(self) -> None:
        self.store.close()
