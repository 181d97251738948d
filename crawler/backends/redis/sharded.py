"""A crawl's frontier split by host over S shards (``FRONTIER_SHARDS``), served as one frontier.

Each shard is a whole Mercator frontier (:class:`~crawler.backends.redis.frontier.RedisFrontier`
on its own hash tag: front queues, back queues, host heap, leases, seen-test) over the hosts the
host splitter (:class:`~crawler.backends.redis.shards.ShardMap`) gives it. On a Redis Cluster the
shards' tags spread over the masters, so the crawl's Redis work and memory do too.

Every worker serves every shard: no worker is pinned, so a killed worker leaves no shard idle
and a shard with more ready hosts gets more fetches.

* **Links** of a page are split by shard and sent as one batch per shard, every batch for one
  node in one pipeline (:mod:`~crawler.backends.redis.calls`). ``add_many`` returns once every
  batch is stored, and the buffered frontier sends a page's acknowledgement only after its
  links: a page is acknowledged only once its links are on every shard they went to.
* **Leases** come from the shards whose earliest host is due, the ``n`` asked spread over them,
  most overdue first (each shard says how long its earliest host has been due): one heap of
  next-fetch times, merged roughly. What each shard said of itself (due time, open leases,
  queued URLs, halt) is kept and summed for the caller. A shard's picture is refreshed by its
  own replies, by its wake-ups (each shard publishes on a channel of its own; a worker listens
  on all) and, without a listener, after every write this process makes to it. The
  front-queue priority order holds within a shard; across shards, the most overdue first.
* **Tokens** carry their shard (``<shard>:<token>``), so completions go straight to it.
* **Controls**: a host's block goes to its shard, a domain's to every shard (a parent domain
  may span several); pause and deadline to every shard's copy; the byte budget is checked
  against the sum of the shards' bytes (:meth:`ShardedFrontier.status`, at most every
  ``BUDGET_CHECK`` seconds), which sets every shard's ``over`` flag.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from crawler.backends.redis.cash import CashTotals, Credit, credit_items
from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.partition_load import node_of, node_report
from crawler.backends.redis.shards import ShardMap
from crawler.backends.redis.wake import listen
from crawler.frontier.api import (
    AddResult,
    Entry,
    Frontier,
    FrontierCounts,
    HostReport,
    Lease,
    Outcome,
    Settlement,
)

BUDGET_CHECK = 2.0  # seconds between two checks of the crawl-wide byte budget


@dataclass(slots=True)
class ShardPicture:
    """What a shard last said of itself, and when (on the worker's monotonic clock)."""

    due_at: float | None = None  # when its earliest host is due; None: nothing ready
    in_flight: int = 0
    queued: int = 0
    halt: str = ""
    stale: bool = True  # ask it before trusting the rest
    taken: float = 0.0


class ShardedFrontier(Frontier):
    """API v2 over the shards of one crawl (see the module docstring). ``shards`` are the
    crawl's shard frontiers in shard order, on one client and script runner."""

    def __init__(
        self,
        shards: Sequence[RedisFrontier],
        shard_map: ShardMap | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_age: float = 1.0,
    ) -> None:
        """``max_age``: seconds after which a shard's picture is asked again anyway (its
        leases may have expired, another worker's work become due unheard)."""
        if len(shards) < 2:
            raise ValueError("a sharded frontier has at least two shards")
        self.shards = list(shards)
        self.shard_map = shard_map or ShardMap(len(self.shards))
        if self.shard_map.count != len(self.shards):
            raise ValueError("the shard map and the shards disagree on their number")
        first = self.shards[0]
        self.client = first.client
        self.runner = first.runner
        self.key = first.key
        self.crawl_keys = first.crawl_keys
        self.keys = first.keys  # the crawl's meta; shard 0's queues
        self.policy = first.policy
        self.lease_ttl = first.lease_ttl
        self.clock = clock
        self.max_age = max_age
        self.pictures = [ShardPicture() for _ in self.shards]
        self._by_channel = {s.keys.wake: i for i, s in enumerate(self.shards)}
        self._watching = False
        self.control_epoch = 0
        self._budget_checked = 0.0

    # -- routing ------------------------------------------------------------------------------

    def shard_of(self, host: str) -> RedisFrontier:
        return self.shards[self.shard_map(host)]

    def _touched(self, index: int) -> None:
        """This process wrote to shard ``index``: without a listener, ask it again."""
        if not self._watching:
            self.pictures[index].stale = True

    def _split(self, token: str) -> tuple[int, str]:
        """The shard and the shard's own token; a token of no shard is sent to shard 0 as
        one it does not know (ignored there, as unknown tokens are)."""
        index, _, raw = token.partition(":")
        if not index.isdigit() or int(index) >= len(self.shards):
            return 0, "?" + token
        return int(index), raw

    def _by_shard(self, tokens: Iterable[str]) -> dict[int, list[str]]:
        groups: dict[int, list[str]] = {}
        for token in tokens:
            index, raw = self._split(token)
            groups.setdefault(index, []).append(raw)
        return groups

    # -- adding -------------------------------------------------------------------------------

    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        index = self.shard_map(entry.host)
        result = self.shards[index].add(entry, force=force, first=first)
        self._touched(index)
        return result

    def add_many(self, entries: Sequence[Entry]) -> list[AddResult]:
        """One batch per shard, the batches for one node in one pipeline; returns once all
        are stored."""
        return self.apply(entries, [])[0]

    def credit(self, links: Sequence[tuple[Any, ...]]) -> None:
        """OPIC cash for URLs seen before, each on its host's shard (one call per shard)."""
        if links:
            self.apply([], [], links)

    @property
    def opic(self) -> bool:
        return self.shards[0].opic

    @property
    def ledger(self) -> CashTotals:
        """The shards' OPIC counters added up."""
        return sum((s.cash_totals() for s in self.shards[1:]), self.shards[0].cash_totals())

    def apply(
        self,
        entries: Sequence[Entry],
        settlements: Sequence[Settlement],
        credits: Sequence[tuple[Any, ...]] = (),
    ) -> tuple[list[AddResult], list[float | None]]:
        """Links (one batch per shard, with the OPIC cash for URLs of the shard's hosts seen
        before), then completions and acknowledgements, all in one pipeline per node: a node
        runs a shard's links before the acknowledgements after them."""
        groups: dict[int, list[int]] = {}
        for position, entry in enumerate(entries):
            groups.setdefault(self.shard_map(entry.host), []).append(position)
        cash: dict[int, list[Credit]] = {}
        if credits and self.opic:
            for item in credit_items(credits):
                index = self.shard_map(item[3])
                cash.setdefault(index, []).append(item)
                groups.setdefault(index, [])
        calls, spans = [], []
        for index, positions in groups.items():
            shard_calls = self.shards[index].add_calls(
                [entries[p] for p in positions], cash.get(index, ())
            )
            spans.append((index, positions, len(shard_calls)))
            calls += shard_calls
        routed = []
        for settlement in settlements:
            index, raw = self._split(settlement.token)
            routed.append((index, replace(settlement, token=raw)))
        n_adds = len(calls)
        calls += [self.shards[i].settle_call(s) for i, s in routed]
        replies = self.runner.run_many(calls) if calls else []
        results: list[AddResult] = [AddResult(False)] * len(entries)
        at = 0
        for index, positions, n in spans:
            for position, result in zip(
                positions, RedisFrontier.add_results(replies[at : at + n]), strict=True
            ):
                results[position] = result
            at += n
            self._touched(index)
        rests = []
        for (index, s), reply in zip(routed, replies[n_adds:], strict=True):
            rests.append(self.shards[index].settled(s, reply))
            self._touched(index)
        return results, rests

    def mark_seen(self, keys: Iterable[str]) -> int:
        from urllib.parse import urlsplit

        groups: dict[int, list[str]] = {}
        for url in keys:
            groups.setdefault(self.shard_map(urlsplit(url).hostname or ""), []).append(url)
        return sum(self.shards[i].mark_seen(urls) for i, urls in groups.items())

    # -- leasing ------------------------------------------------------------------------------

    def next(self) -> Lease | None:
        leases = self.next_many(1)
        return leases[0] if leases else None

    def next_many(self, n: int) -> list[Lease]:
        return self.lease_with_status(n)[0]

    def lease_with_status(self, n: int) -> tuple[list[Lease], tuple[float | None, int, int]]:
        """Up to ``n`` leases, spread over the shards that may have work (due, or not asked
        lately), the most overdue first: the host heaps of all shards merged, roughly, as one
        heap of next-fetch times would serve them; the summed status after."""
        now = self.clock()
        self._age(now)
        candidates = [
            i
            for i, p in enumerate(self.pictures)
            if p.stale or (not p.halt and p.due_at is not None and p.due_at <= now)
        ]
        candidates.sort(key=self._urgency)
        leases: list[Lease] = []
        for rank, index in enumerate(candidates):
            wanted = n - len(leases)
            if wanted <= 0:
                break
            share = -(-wanted // (len(candidates) - rank))  # the rest, spread over the rest
            got, status = self.shards[index].lease_with_status(share)
            self._note(index, status)
            for lease in got:
                lease.token = self.shards[index].token_of(lease.token)
            leases += got
        return leases, self._summary()

    def _urgency(self, index: int) -> tuple[int, float]:
        """Most overdue first; shards whose picture says nothing is ready last."""
        p = self.pictures[index]
        return (0, p.due_at) if p.due_at is not None else (1, p.taken)

    def _age(self, now: float) -> None:
        for picture in self.pictures:
            if now - picture.taken >= self.max_age:
                picture.stale = True

    def _note(self, index: int, status: tuple[float | None, int, int]) -> None:
        due, in_flight, queued = status
        picture = self.pictures[index]
        picture.taken = self.clock()
        overdue = self.shards[index].overdue
        picture.due_at = None if due is None else picture.taken + due - overdue
        picture.in_flight, picture.queued = in_flight, queued
        picture.halt = self.shards[index].halt
        picture.stale = False

    def _summary(self) -> tuple[float | None, int, int]:
        now = self.clock()
        dues = [p.due_at for p in self.pictures if p.due_at is not None]
        due = max(0.0, min(dues) - now) if dues else None
        return (
            due,
            sum(p.in_flight for p in self.pictures),
            sum(p.queued for p in self.pictures),
        )

    def status(self) -> tuple[float | None, int, int]:
        """The summed status; the stale shards are asked (one pipeline per node)."""
        self._age(self.clock())
        stale = [i for i, p in enumerate(self.pictures) if p.stale]
        if stale:
            calls = [self.shards[i]._script_call("due") for i in stale]
            for index, reply in zip(stale, self.runner.run_many(calls), strict=True):
                self._note(index, self.shards[index]._status(reply))
        if self.clock() - self._budget_checked >= BUDGET_CHECK:
            self._budget_checked = self.clock()
            self._check_budget()
        return self._summary()

    def refresh(self) -> None:
        """Forget every shard's picture: the next call asks them all."""
        for picture in self.pictures:
            picture.stale = True

    def due_in(self) -> float | None:
        return self.status()[0]

    def has_work(self, horizon: float) -> bool:
        self.refresh()
        due, open_leases, _ = self.status()
        return open_leases > 0 or (due is not None and due <= horizon)

    def halted(self) -> str:
        return next((p.halt for p in self.pictures if p.halt), "")

    # -- completing ---------------------------------------------------------------------------

    def complete(
        self, token: str, duration: float | None, outcome: Outcome = Outcome.FETCHED, *,
        size: int = 0,
    ) -> float | None:  # fmt: skip
        index, raw = self._split(token)
        rest = self.shards[index].complete(raw, duration, outcome, size=size)
        self._touched(index)
        return rest

    def finish(
        self, token: str, duration: float | None, outcome: Outcome = Outcome.FETCHED, *,
        size: int = 0,
    ) -> float | None:  # fmt: skip
        index, raw = self._split(token)
        rest = self.shards[index].finish(raw, duration, outcome, size=size)
        self._touched(index)
        return rest

    def ack(self, token: str) -> None:
        index, raw = self._split(token)
        self.shards[index].ack(raw)
        self._touched(index)

    def settle_many(self, settlements: Sequence[Settlement]) -> list[float | None]:
        """Every completion and acknowledgement in one pipeline per node."""
        return self.apply([], settlements)[1]

    def renew(self, tokens: Iterable[str]) -> int:
        return sum(self.shards[i].renew(raw) for i, raw in self._by_shard(tokens).items())

    def release(self, tokens: Iterable[str], *, rest: bool = False) -> int:
        total = 0
        for index, raw in self._by_shard(tokens).items():
            total += self.shards[index].release(raw, rest=rest)
            self._touched(index)
        return total

    def expire(self) -> int:
        self.refresh()
        return sum(shard.expire() for shard in self.shards)

    # -- hosts --------------------------------------------------------------------------------

    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        return self.shard_of(host).set_crawl_delay(host, seconds)

    def hold_host(self, host: str, seconds: float) -> None:
        self.shard_of(host).hold_host(host, seconds)

    def hosts(self) -> list[str]:
        return [h for shard in self.shards for h in shard.hosts()]

    def _iter_hosts(self, batch: int = 500) -> Iterable[list[str]]:
        """Every shard's host names in batches (SSCAN), shard after shard."""
        for shard in self.shards:
            yield from shard._iter_hosts(batch)

    def _now(self) -> float:
        return self.shards[0]._now()

    def waiting_hosts(self) -> list[HostReport]:
        reports = [r for shard in self.shards for r in shard.waiting_hosts()]
        return sorted(reports, key=lambda r: -r.due_in)

    def busiest_hosts(self, n: int = 3) -> list[tuple[str, int, float]]:
        rows = [row for shard in self.shards for row in shard.busiest_hosts(n)]
        return sorted(rows, key=lambda row: -row[1])[:n]

    def in_flight(self) -> int:
        return sum(shard.in_flight() for shard in self.shards)

    def __len__(self) -> int:
        return sum(len(shard) for shard in self.shards)

    def parts(self) -> list[RedisFrontier]:
        """The shard frontiers, in shard order."""
        return self.shards

    def shard_loads(self) -> list[dict[str, Any]]:
        """Each shard's load and its node's (``scrapy frontier`` status)."""
        return shard_loads(self.shards)

    def shard_counts(self) -> list[FrontierCounts]:
        """Each shard's counts, in shard order (for ``scrapy frontier`` status)."""
        return [shard.counts() for shard in self.shards]

    def counts(self) -> FrontierCounts:
        total = FrontierCounts()
        extra: dict[str, int] = {}
        for c in self.shard_counts():
            for name in (
                "queued", "in_flight", "seen", "hosts", "hosts_ready", "hosts_waiting",
                "hosts_busy", "front_queued", "back_queues_used",
            ):  # fmt: skip
                setattr(total, name, getattr(total, name) + getattr(c, name))
            for k, v in c.extra.items():
                extra[k] = extra.get(k, 0) + v
        total.extra = extra
        return total

    # -- the operator's controls --------------------------------------------------------------

    def block(self, name: str, *, domain: bool = False) -> int:
        if domain:
            return sum(shard.block(name, domain=True) for shard in self.shards)
        return self.shard_of(name.lower().rstrip(".")).block(name)

    def unblock(self, name: str, *, domain: bool = False) -> int:
        if domain:
            return sum(shard.unblock(name, domain=True) for shard in self.shards)
        return self.shard_of(name.lower().rstrip(".")).unblock(name)

    def set_control(self, name: str, value: float | None, *, relative: bool = False) -> str:
        halts = [shard.set_control(name, value, relative=relative) for shard in self.shards]
        if name == "budget":
            for shard in self.shards:
                shard.client.hdel(shard.keys.controls, "over")
            halts.append(self._check_budget())
        return next((h for h in halts if h), "")

    def controls(self) -> dict[str, Any]:
        """Shard 0's controls (every shard has the same), the bytes of all shards, and every
        shard's blocks."""
        each = [shard.controls() for shard in self.shards]
        out = dict(each[0])
        out["bytes"] = sum(c["bytes"] for c in each)
        for name in ("blocked_hosts", "blocked_domains"):
            out[name] = sorted({n for c in each for n in c[name]})
        return out

    def _check_budget(self) -> str:
        """Sum the shards' bytes; over the budget, set every shard's ``over`` (their scripts
        then halt with ``byte_budget``). Returns the halt ('' if none)."""
        pipe = self.client.pipeline(transaction=False)
        for shard in self.shards:
            pipe.hmget(shard.keys.controls, "budget", "over")
            pipe.hget(shard.keys.stats, "bytes")
        replies = pipe.execute()
        budget, over = replies[0]
        if budget is None:
            return ""
        if over is not None:
            return "byte_budget"
        spent = sum(int(replies[i] or 0) for i in range(1, len(replies), 2))
        if spent < int(budget):
            return ""
        for shard in self.shards:
            shard.client.hset(shard.keys.controls, "over", "1")
            shard.client.publish(shard.keys.wake, "ctl")
        return "byte_budget"

    # -- what the crawl shares ----------------------------------------------------------------

    def settings_fingerprint(self) -> dict[str, str]:
        return self.shards[0].settings_fingerprint()

    def check_compatible(self, settings_fingerprint: dict[str, Any]) -> list[str]:
        return self.shards[0].check_compatible(settings_fingerprint)

    def watch(self, on_change: Callable[[], None]) -> Callable[[], None]:
        """Listen on every shard's wake channel: a message makes that shard's picture stale
        (a resubscription, every shard's)."""
        self._watching = True
        return listen(
            self.client, list(self._by_channel), on_change, self._control_heard, self._heard
        )

    def _heard(self, channel: str | None) -> None:
        if channel is None:
            self.refresh()
        elif (index := self._by_channel.get(channel)) is not None:
            self.pictures[index].stale = True

    def _control_heard(self) -> None:
        self.control_epoch += 1

    def close(self) -> None:
        """Nothing to write: every call was already atomic in Redis."""

    def reset(self) -> int:
        return self.shards[0].reset()  # every shard's tag is in the crawl keys' patterns


def shard_loads(shards: Sequence[RedisFrontier]) -> list[dict[str, Any]]:
    """One row per shard: its tag, node, counts, and the node's own figures."""
    nodes: dict[str, dict[str, Any]] = {}
    rows = []
    for shard in shards:
        name, connection = node_of(shard.client, shard.keys.stats)
        if name not in nodes:
            nodes[name] = node_report(connection)
        c = shard.counts()
        rows.append(
            {
                "shard": shard.keys.index,
                "tag": shard.keys.prefix,
                "node": name,
                "queued": c.queued,
                "hosts": c.hosts,
                "hosts_ready": c.hosts_ready,
                "in_flight": c.in_flight,
                **{f"node_{k}": v for k, v in nodes[name].items()},
            }
        )
    return rows
