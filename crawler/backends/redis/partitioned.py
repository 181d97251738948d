"""A worker's frontier in a crawl shared through Redis: the partitions of hosts it owns.

The design (docs/decisions/0002-partition-owned-frontier.md): the hosts are split into
partitions (:class:`~crawler.backends.redis.shards.ShardMap`); a worker owns its share
(:mod:`.ownership`) and runs the one Mercator algorithm per partition over a
:class:`~crawler.backends.redis.queue_store.RedisQueueStore`; a link to a host of a partition
it does not own goes to that partition's inbox (:mod:`.mail`), and the letters it receives are
acknowledged in the same fenced call as the queue writes they caused.

Lease tokens are ``<partition>.<generation>.<token>``: a completion finds its partition
without asking, and one of a partition since dropped and taken up again does nothing.
A partition whose latest acknowledged writes Redis lost (a master failed over before its
replica had them) is dropped the same way and read again from what Redis kept, as a new
owner would read it: its URLs out of the queues are queued again (fetched twice, never
lost), and the inbox letters not acknowledged are read again. A partition this worker lost
(its lease expired in a stall, another worker took it) is dropped with its open leases:
their completions and acknowledgements do nothing, and the new owner hands their URLs out
again (at least once). A worker's surplus partitions (a worker joined) hand out nothing more,
and are released together once their open leases are settled (see :mod:`.ownership`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from crawler.backends.redis.controls import CrawlControls
from crawler.backends.redis.fence import PartitionLost
from crawler.backends.redis.fleet import FleetView
from crawler.backends.redis.keys import CrawlKeys, PartitionKeys
from crawler.backends.redis.mail import Letter, Mailboxes
from crawler.backends.redis.ownership import Ownership, PartitionOwnership
from crawler.backends.redis.queue_store import RedisQueueStore, prime_seen
from crawler.backends.redis.rerun import Run, rerun
from crawler.backends.redis.seenset import SeenSet, SeenSetConfig, count_across
from crawler.backends.redis.shards import ShardMap
from crawler.backends.redis.wake import listen
from crawler.frontier.api import (
    AddResult,
    Clock,
    Entry,
    Frontier,
    FrontierCounts,
    HostReport,
    Lease,
    Outcome,
    Settlement,
)
from crawler.frontier.mercator import MercatorFrontier
from crawler.frontier.reports import add_counts
from crawler.frontier.store import url_key
from crawler.frontier.urls import normalize_url

logger = logging.getLogger(__name__)

BEAT = 1.0  # seconds between ownership beats (lease renewals, claims, the inbox read)
MAILED = "mailed"  # AddResult.reason of a link sent to the partition that owns its host
MAIL = b"mail"  # the wake-up that says letters were sent
MIN_BACK_QUEUES = 2  # a partition's share of its worker's B, at the least
TOGETHER_WAIT = 5.0  # seconds a settled surplus partition waits for the rest of the surplus
_OUTCOMES = {o.value: o for o in Outcome}  # (Outcome("fetched"), the enum's call: ~0.6 us)


@dataclass
class Partition:
    """A partition this worker owns."""

    ownership: Ownership
    store: RedisQueueStore
    frontier: MercatorFrontier
    generation: int = 0  # which taking-up of the partition by this worker (lease tokens)
    draining: bool = False  # surplus: hands out nothing more, released once settled
    blocks: int = -1  # controls: the version of the operator's blocks its frontier obeys
    claiming: bool = True  # its inbox's letters left pending are claimed at the next read
    index: int = field(init=False)  # (not a property: each call of the owner reads every one's)

    def __post_init__(self) -> None:
        self.index = self.ownership.keys.index


class PartitionedFrontier(Frontier):
    """See the module docstring. ``build(store)`` makes the Mercator frontier of a partition
    claimed over its store; ``seen``: the seen-sets' configuration; ``replicas``: how many
    replicas each write of an owned partition waits for (``FRONTIER_REPLICA_WAIT``);
    ``back_queues``: the worker's B, shared over its partitions; ``keep_alive``: a thread
    renews the leases too."""

    def __init__(
        self, client: Any, crawl: str, count: int, worker: str, *,
        build: Callable[[RedisQueueStore], MercatorFrontier], seen: SeenSetConfig,
        front_queues: int, lease_ttl: float, partition_ttl: float, replicas: int = 0,
        back_queues: int = 0, clock: Clock = time.monotonic, keep_alive: bool = False,
    ) -> None:  # fmt: skip
        self.client = client
        self.crawl = crawl
        self.count = count
        self.worker = worker
        self.lease_ttl = lease_ttl
        self.clock = clock
        self._build = build
        self._seen = seen
        self._front_queues = front_queues
        # each partition's keys, built once (the mail names an inbox at every letter)
        self.keys = [PartitionKeys(crawl, i, count) for i in range(count)].__getitem__
        self.back_queues = back_queues  # the worker's B, shared over its partitions (0: not)
        self.shard = ShardMap(count)
        self.crawl_keys = CrawlKeys(crawl)
        self.ownership = PartitionOwnership(client, crawl, count, worker, partition_ttl,
                                            replicas=replicas)  # fmt: skip
        self.mail = Mailboxes(client, self.keys, worker)
        self.parts: dict[int, Partition] = {}
        self._outbox: defaultdict[int, Letter] = defaultdict(Letter)  # letters to send
        self._seen_sets: dict[int, SeenSet] = {}  # partitions not owned: mark_seen and counts
        # what was added to each owned partition since its last write (entries, force, first):
        # mailed to its next owner if the write finds it lost (a page's links are never dropped)
        self._unwritten: dict[int, list[tuple[Sequence[Entry], bool, bool]]] = {}
        self._generations = itertools.count(1)
        self._turn = 0  # where the next hand-out starts looking (ready partitions take turns)
        self._last_beat = float("-inf")
        self._beat_waiting = False  # a wake-up said partitions were handed back
        self._mail_waiting = False  # a wake-up said letters were sent
        self._surplus_since: float | None = None  # when the surplus being drained was named
        self._touched: set[int] | None = None  # see _flushed (None: any may hold writes)
        self._run: Run | None = None  # an apply that raised: the guard runs it again
        self.fleet = FleetView(client, self.crawl_keys, self.keys, count, front_queues, BEAT)
        self.lost = 0  # partitions lost to another worker
        self.controls = CrawlControls(client, crawl)  # controls
        self.beat()
        self._stop_renewing = self.ownership.keep_alive(BEAT) if keep_alive else lambda: None

    # -- ownership -----------------------------------------------------------------------------

    def beat(self) -> None:
        """Renew, claim and release partitions, then read their inboxes."""
        self._last_beat, self._beat_waiting, self._touched = time.monotonic(), False, None
        beat = self.ownership.beat()
        for index in beat.lost:
            self._drop(index, "lost")
        # every partition owned and not yet served is taken up here: one claimed at this
        # beat, or at an earlier one whose recovery Redis going away cut short
        for index, ownership in list(self.ownership.owned.items()):
            if index not in self.parts:
                self._take(ownership)
        for index, part in self.parts.items():
            part.draining = index in beat.surplus
        self._hand_over_surplus()
        self._share_back_queues()
        self.controls.obey(self.parts, self._guarded, self.shard)  # controls
        self.read_mail()
        self.fleet.publish({i: (len(p.frontier), p.frontier.in_flight())
                            for i, p in self.parts.items()})  # fmt: skip

    def _share_back_queues(self) -> None:
        """The worker's B over the partitions it owns now, as one Mercator frontier would
        hold it: a worker owning all 16 holds B in all, not 16 times a fixed share, and one
        owning a single partition holds all of B there."""
        if self.back_queues and self.parts:
            share = max(MIN_BACK_QUEUES, math.ceil(self.back_queues / len(self.parts)))
            for part in self.parts.values():
                if part.frontier.back_queue_count != share:
                    part.frontier.resize_back(share)

    def _hand_over_surplus(self) -> None:
        """Release the settled surplus partitions all together, with one wake-up (claimers
        see those with work beside the empty ones, settled at once, and take a share of
        each), or past ``TOGETHER_WAIT`` those settled (a slow fetch holds them no longer)."""
        surplus = [part for part in self.parts.values() if part.draining]
        now = time.monotonic()
        since = self._surplus_since = (self._surplus_since or now) if surplus else None
        settled = [part for part in surplus if not part.frontier.in_flight()]
        if not settled or (len(settled) < len(surplus) and now - since < TOGETHER_WAIT):
            return
        if sum([self._hand_over(part) for part in settled]):  # (a lost one is not released)
            # a lost wake-up only delays the others' claim to their next beat
            with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                self.ownership.announce()

    def _hand_over(self, part: Partition) -> bool:
        """Release a surplus partition, its leases settled; whether it was (not lost)."""
        self._guarded(part, part.store.flush)
        if part.index not in self.parts:
            return False
        self.ownership.release(part.index, announce=False)
        del self.parts[part.index]
        logger.debug("Partition %d handed over", part.index)
        return True

    def _maybe_beat(self) -> None:
        if time.monotonic() - self._last_beat >= BEAT or self._beat_waiting or self.controls.heard:
            self.beat()
        elif self._mail_waiting:
            self._mail_waiting = False
            self.read_mail()

    def watch(self, on_change: Callable[[], None]) -> Callable[[], None] | None:  # controls
        """Wake-ups on the crawl's channels: letters sent (this worker's inboxes are read at
        its next call, not at its next beat), partitions handed back (it beats then)."""
        channels = [self.crawl_keys.wake, self.crawl_keys.handover]

        def heard_on(channel: str | None) -> None:  # None: (re)subscribed, maybe missed one
            self._beat_waiting |= channel != channels[0]

        def changed() -> None:
            self._mail_waiting = True
            on_change()

        return listen(self.client, channels, changed, self.controls.heard_act, heard_on)

    def halted(self) -> str:  # controls
        return self.controls.halted()

    @property
    def control_epoch(self) -> int:  # controls: BufferedFrontier hands its read-ahead back
        return self.controls.epoch

    def _take(self, ownership: Ownership) -> None:
        keys = ownership.keys
        ownership.writer.discard()  # an earlier try, cut short: its writes are made again
        store = RedisQueueStore(
            self.client, keys, ownership.writer, SeenSet(self.client, keys, self._seen),
            self._front_queues, self.clock,
        )  # fmt: skip
        try:
            moved = store.recover()
        except PartitionLost:
            return
        self.mail.open(keys.index)
        self.parts[keys.index] = Partition(
            ownership, store, self._build(store), next(self._generations)
        )
        if ownership.epoch == 1:
            logger.debug("Partition %d claimed (ownership 1)", keys.index)
        else:
            logger.info(
                "Partition %d taken over from its last owner (ownership %d): %d URLs it had "
                "out of the queues are queued again", keys.index, ownership.epoch, moved,
            )  # fmt: skip

    def _drop(self, index: int, why: str) -> None:
        part = self.parts.pop(index, None)  # what was added to it since its last write is mailed
        for batch, force, first in self._unwritten.pop(index, ()):
            self._outbox[index].adds.extend((entry, force, first) for entry in batch)
        if part is not None:
            self.mail.rescue(part.ownership.writer)  # its writes discarded, its letters not
            self.lost += why == "lost"
            logger.warning(
                "Partition %d: Redis lost writes it had acknowledged (a failover before the "
                "replica had them): read again from what Redis kept; its %d open leases are "
                "queued again" if why == "rewound" else "Partition %d is no longer this "
                "worker's: %d leases open there go back to its next owner",
                index, part.frontier.in_flight(),
            )  # fmt: skip

    def _guarded(self, part: Partition, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Run ``fn(*args, **kw)`` on a partition; a lost lease drops the partition (None),
        and the URLs added to it since its last write go to its inbox, for its next owner."""
        if self._touched is not None:
            self._touched.add(part.index)
        try:
            return fn(*args, **kw)
        except PartitionLost as exc:
            self._drop(part.index, exc.why)
            return None

    def _flush(self, *, but: int | None = None, only: int | None = None) -> None:
        """Write the partitions' changes (all, ``only`` one's, or all ``but`` one's) and the
        letters (:meth:`Mailboxes.flush`); a partition found lost is mailed what it stored."""
        while True:
            parts = self._flushed(but, only)
            letters = self._outbox
            if letters:
                self._outbox = defaultdict(Letter)
            lost = self.mail.flush(parts, letters, (self.crawl_keys.wake, MAIL))
            for part, refused in zip(parts, lost, strict=True) if any(lost) else ():
                if refused:
                    self._drop(part.index, refused.why)
            for index in list(self._unwritten):  # (a loop: a comprehension is a function)
                if index != but and only in (None, index) and (p := self.parts.get(index)) and \
                        not p.store.writer.pending:  # fmt: skip
                    del self._unwritten[index]
            if not any(lost) and not self._outbox:
                if but is None and only is None:
                    self._touched = set()
                return

    def _flushed(self, but: int | None = None, only: int | None = None) -> list[Partition]:
        """The partitions a flush writes (all, ``only``'s or all ``but``'s) of those called since
        the last whole flush (:meth:`_guarded`), not all 16; after a beat or mail read, all."""
        out, touched = [], self._touched  # (a loop: a comprehension is a function, ~1k)
        for i, p in self.parts.items():
            if i != but and only in (None, i) and (touched is None or i in touched):
                out.append(p)
        return out

    def read_mail(self) -> int:
        """Queue the letters in the owned partitions' inboxes (:meth:`Mailboxes.deliver`)."""
        self._touched = None
        return self.mail.deliver(self.parts, self.worker, self._drop)

    # -- adding ----------------------------------------------------------------------------------

    def _local(self, host: str) -> Partition | None:
        return self.parts.get(self.shard(host))

    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        self._maybe_beat()
        if self.controls.blocked(entry.host):  # controls
            return AddResult(False, "host_blocked")
        part = self._local(entry.host)
        if part is None:
            self._outbox[self.shard(entry.host)].adds.append((entry, force, first))
            result = AddResult(True, MAILED)
        else:
            self._unwritten.setdefault(part.index, []).append(([entry], force, first))
            result = self._guarded(
                part, lambda: part.frontier.add(entry, force=force, first=first)
            ) or AddResult(True, MAILED)
        self._flush()
        return result

    def add_many(self, entries: Sequence[Entry]) -> list[AddResult]:
        results = self._add_many(entries)
        self._flush()
        return results

    def _add_many(self, entries: Sequence[Entry]) -> list[AddResult]:
        self._maybe_beat()
        results: list[AddResult] = [AddResult(True, MAILED)] * len(entries)
        parts, where, tests, blocked = self.parts, {}, {}, self.controls.blocked
        local: dict[int, tuple[list[int], list[Entry], list[int]]] = {}  # positions, links, keys
        for i, entry in enumerate(entries):
            if (index := where.get(entry.host)) is None:  # a page's few hosts, each asked once
                index = where[entry.host] = -1 if blocked(entry.host) else self.shard(entry.host)
            if index < 0:
                results[i] = AddResult(False, "host_blocked")
            elif index in parts:
                if (got := local.get(index)) is None:  # (no comprehension: a function each)
                    got = local[index] = ([], [], [])
                    tests[parts[index].store] = got[2]
                got[0].append(i)
                got[1].append(entry)
                got[2].append(entry.key or url_key(entry.url))  # (entry_key, inline)
            else:
                self._outbox[index].adds.append((entry, False, False))
        prime_seen(self.client, tests)  # (one round trip)
        for index, (positions, batch, keys) in local.items():
            part = parts[index]
            self._unwritten.setdefault(index, []).append((batch, False, False))
            answers = self._guarded(part, part.frontier.add_many, batch, keys) or ()
            for j in range(len(answers)):  # (no zip: its strict= costs more than the loop)
                results[positions[j]] = answers[j]
        return results

    def credit(self, links: Sequence[tuple[Any, ...]]) -> None:
        self.apply((), (), links)  # (a run again of a call that raised: credited once)

    def _credit(self, links: Sequence[tuple[Any, ...]]) -> None:
        local: dict[int, list[tuple[Any, ...]]] = {}
        for link in links:
            index = self._partition_of_link(link)
            if index is None:
                continue  # a canonical key without its host: nothing says whose it is
            if index in self.parts:
                local.setdefault(index, []).append(link)
            else:
                self._outbox[index].credits.append(tuple(link[:3]))
        for index, batch in local.items():
            self._guarded(part := self.parts[index], part.frontier.credit, batch)

    def _partition_of_link(self, link: tuple[Any, ...]) -> int | None:
        """The partition of a credit's URL: its host when given, else read from the URL."""
        if len(link) > 3:
            return self.shard(link[3])
        if self.count == 1:
            return 0
        return self.shard(normalize_url(link[0])[1]) if isinstance(link[0], str) else None

    def apply(
        self, entries: Sequence[Entry], settlements: Sequence[Settlement],
        credits: Sequence[tuple[Any, ...]] = (),
    ) -> tuple[list[AddResult], list[float | None]]:  # fmt: skip
        run = self._run = rerun(self._run, entries, settlements, credits)  # (see .rerun)
        results = run.add(self._credit, self._add_many)  # (done once: a run again writes)
        # the links (wherever they go), then the acknowledgements of their pages: a worker
        # killed in between forgot no page whose links are not stored. One fenced call if one
        # holds it all; else one settled partition's links and acknowledgements in one call,
        # after every other partition's links and the letters, before their acknowledgements.
        one = self.mail.one_call(self._flushed(), self._outbox, settlements)
        last, _ = self._part_of(settlements[0].token) if settlements and not one else (None, "")
        but = last.index if last is not None else None
        if not one:
            self._flush(but=but)
        rests = run.settle(self._settle)
        if but is not None:
            self._flush(only=but)
        self._flush()
        self._run = None
        return results, rests

    def mark_seen(self, keys: Iterable[str]) -> int:
        """Others' keys are added to their partition's seen-set on the server, atomically;
        then those of owned partitions, tested by their owner, its writes flushed later if
        Redis fails this flush (raised, the call run again would find its own claims seen)."""
        batches: dict[int, list[int]] = {}
        for key in keys:
            batches.setdefault(self.shard(normalize_url(key)[1]), []).append(url_key(key))
        mine = {i: b for i, b in batches.items() if i in self.parts}
        new = sum(sum(self._other_seen(i).add_many(b)) for i, b in batches.items() if i not in mine)
        prime_seen(self.client, {self.parts[i].store: b for i, b in mine.items()})
        for i, batch in mine.items():
            new += sum(self._guarded(part := self.parts[i], part.store.seen_add_many, batch) or ())
        with contextlib.suppress(redis.RedisError):
            self._flush()
        return new

    def _other_seen(self, index: int) -> SeenSet:
        if index not in self._seen_sets:
            self._seen_sets[index] = SeenSet(self.client, self.keys(index), self._seen)
        return self._seen_sets[index]

    # -- handing out ---------------------------------------------------------------------------

    def next(self) -> Lease | None:
        return next(iter(self.next_many(1)), None)

    def next_many(self, n: int) -> list[Lease]:
        self._maybe_beat()
        leases: list[Lease] = []
        parts = [] if self.halted() else [p for p in self.parts.values() if not p.draining]
        if parts:
            self._turn = (self._turn + 1) % len(parts)
            parts = parts[self._turn :] + parts[: self._turn]
        for part in parts:
            got = self._guarded(part, lambda p=part: p.frontier.next_many(n - len(leases)))
            for lease in got or ():
                lease.token = f"{part.index}.{part.generation}.{lease.token}"
                leases.append(lease)
            if len(leases) >= n:
                break
        try:
            self._flush()
        except Exception:  # the call is retried: its leases, never handed, are not left open
            for index, inner in self._by_part(lease.token for lease in leases).items():
                self._guarded(part := self.parts[index], part.frontier.release, inner)
            raise
        # a partition the flush found lost: its next owner hands these out (their moves refused)
        return [lease for lease in leases if self._part_of(lease.token)[0] is not None]

    def _part_of(self, token: str) -> tuple[Partition | None, str]:
        index, generation, inner = [*token.split(".", 2), "", ""][:3]
        part = self.parts.get(int(index)) if index.isdigit() else None
        if part is None or str(part.generation) != generation:
            return None, inner  # a partition dropped since (and maybe taken up again)
        return part, inner

    def _settle(self, s: Settlement) -> float | None:
        self.controls.spend(s.size)  # controls: the byte budget
        part, token = self._part_of(s.token)
        if part is None:
            return None
        if s.kind == "ack":
            return self._guarded(part, part.frontier.ack, token)  # (None)
        outcome = _OUTCOMES.get(s.outcome) or Outcome(s.outcome)
        settle = part.frontier.finish if s.kind == "finish" else part.frontier.complete
        return self._guarded(part, settle, token, s.duration, outcome, size=s.size)

    def complete(
        self, token: str, duration: float | None, outcome: Outcome = Outcome.FETCHED, *,
        size: int = 0,
    ) -> float | None:  # fmt: skip
        return self.settle_many([Settlement("complete", token, duration, outcome, size)])[0]

    def ack(self, token: str) -> None:
        self.settle_many([Settlement("ack", token)])

    def finish(
        self, token: str, duration: float | None, outcome: Outcome = Outcome.FETCHED, *,
        size: int = 0,
    ) -> float | None:  # fmt: skip
        return self.settle_many([Settlement("finish", token, duration, outcome, size)])[0]

    def settle_many(self, settlements: Sequence[Settlement]) -> list[float | None]:
        rests = [self._settle(s) for s in settlements]
        self._flush()
        return rests

    def _by_part(self, tokens: Iterable[str]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for token in tokens:
            part, inner = self._part_of(token)
            if part is not None:
                out.setdefault(part.index, []).append(inner)
        return out

    def renew(self, tokens: Iterable[str]) -> int:
        return self._by_leases(tokens, lambda f, inner: f.renew(inner))

    def release(self, tokens: Iterable[str], *, rest: bool = False) -> int:
        return self._by_leases(tokens, lambda f, inner: f.release(inner, rest=rest))

    def _by_leases(
        self, tokens: Iterable[str], call: Callable[[MercatorFrontier, list[str]], int]
    ) -> int:
        """``call`` on each partition's frontier with its leases of ``tokens``, summed."""
        done = 0
        for index, inner in self._by_part(tokens).items():
            done += self._guarded(part := self.parts[index], call, part.frontier, inner) or 0
        self._flush()
        return done

    def expire(self) -> int:
        expired = sum(self._guarded(p, p.frontier.expire) or 0 for p in list(self.parts.values()))
        self._flush()
        return expired

    def due_in(self) -> float | None:
        self._maybe_beat()
        due: float | None = None
        for part in list(self.parts.values()):
            if part.draining or self.halted():  # controls: nothing is due while held
                continue
            d = self._guarded(part, part.frontier.due_in)
            if d is not None and (due is None or d < due):
                due = d
        self._flush(only=-1)  # letters; routing, expiries (rebuilt by an heir) wait for a write
        return due

    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        part = self._local(host)
        if part is None:
            return True  # its owner reads the robots.txt cache (only it fetches the file)
        accepted = self._guarded(part, lambda: part.frontier.set_crawl_delay(host, seconds))
        self._flush()
        return accepted is not False

    def hold_host(self, host: str, seconds: float) -> None:
        part = self._local(host)
        if part is not None:
            self._guarded(part, lambda: part.frontier.hold_host(host, seconds))
            self._flush()

    # -- what the scheduler asks about ---------------------------------------------------------

    def has_work(self, horizon: float) -> bool:
        due = self.due_in()  # (the fleet is asked last: it reads Redis)
        soon = due is not None and due <= horizon
        return bool(self.in_flight() or soon or self.fleet.busy(self.parts))

    def in_flight(self) -> int:
        return sum(p.frontier.in_flight() for p in self.parts.values())

    def __len__(self) -> int:
        return sum(len(p.frontier) for p in self.parts.values())

    def counts(self) -> FrontierCounts:
        # the crawl's seen URLs, every partition's (a worker's own may be none at its end),
        # read in one round trip; an owned partition's frontier reports its own with them
        parts = [self.parts.get(i) for i in range(self.count)]
        sets = [p.store.seen if p is not None else self._other_seen(i) for i, p in enumerate(parts)]
        seen = count_across(self.client, sets)
        for part, n in zip(parts, seen, strict=True):
            if part is not None:
                part.store.counted(n)
        total = add_counts(self._guarded(p, p.frontier.counts) for p in self.parts.values())
        total.seen = sum(seen)
        return total

    def waiting_hosts(self) -> list[HostReport]:
        reports = [r for p in self.parts.values() for r in p.frontier.waiting_hosts()]
        return sorted(reports, key=lambda r: -r.due_in)

    def hosts(self) -> list[str]:
        return [h for p in self.parts.values() for h in p.frontier.hosts()]

    def busiest_hosts(self, n: int = 3) -> list[tuple[str, int, float]]:
        top = [t for p in self.parts.values() for t in p.frontier.busiest_hosts(n)]
        return sorted(top, key=lambda t: -t[1])[:n]

    def ping(self) -> None:
        self.fleet.ping()

    def close(self) -> None:
        """Write everything out and hand the partitions over at once (their open leases'
        URLs go to the next owner)."""
        for part in self.parts.values():
            part.store.stage(count=True)  # (their seen counts too)
        self._touched = None
        self._flush()
        self._stop_renewing()
        self.ownership.leave()
        self.parts.clear()
