"""The Mercator frontier inside Redis: several worker processes, one polite frontier.

Every operation is one Lua script (``frontier_lua.py``) run atomically by Redis, so workers that
each hold a ``RedisFrontier`` on the same ``key`` share the front queues, the back queues, the
host table, the leases and the seen-set, and politeness holds across all of them together. Time
is Redis's ``TIME`` inside the scripts, so the workers' clocks never meet.

Every key is named by :class:`crawler.backends.redis.keys.FrontierKeys` (the layout table is
there), all under the crawl's hash tag ``{key}`` (one Redis Cluster slot per crawl).

A queued URL is a few bytes of flags and its coded path (:mod:`~crawler.backends.redis.entries`,
~30 B in a front queue); nothing is ever pickled.

Choices, and why:

* Mercator as it is, not simplified: K front queues, at most B back queues (one host each)
  refilled by the biased selector, whose state lives in Redis so all workers share one
  rotation. Routing every host straight to its own queue would lose the priority order across
  hosts (a host's low-priority link would go before another host's high-priority one).
* Each script does bounded work: a refill moves at most ``refill_batch`` URLs, ``next``
  expires at most 16 leases, reports read counters and cardinalities (``counts`` is O(K));
  ``waiting_hosts`` walks the host set from the client with SSCAN in batches.
* An expired or released lease puts its URL back at the head of its host's back queue even if
  the host had lost its back queue meanwhile: B may be exceeded by a few for a while, rather
  than a URL losing its place.
* The scripts are given one key, the stats hash, and build the others on its hash tag with the
  names :class:`~crawler.backends.redis.keys.FrontierKeys` gives them
  (:class:`~crawler.backends.redis.keys.ScriptKeys`): a script cannot be told ahead which hosts
  it meets, and every name passed would cost Redis more per call. All share the hash tag, so
  they are on one cluster slot; a Redis that enforces declared keys would need the scripts
  rewritten as Redis Functions with key lists.

The seen-set (:mod:`~crawler.backends.redis.seen`), the reports on hosts
(:mod:`~crawler.backends.redis.host_reports`), the operator's controls
(:mod:`~crawler.backends.redis.controls`) and the wake-ups (:mod:`~crawler.backends.redis.wake`)
have modules of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

import msgpack
import redis

from crawler.backends.redis.calls import ScriptCall, ScriptRunner, script_runner
from crawler.backends.redis.cash import (
    FETCHED_KEYS,
    Credit,
    OpicCash,
    credit_items,
    pack_credits,
)
from crawler.backends.redis.entries import pack_entry, unpack_entry
from crawler.backends.redis.fingerprint import CrawlFingerprint
from crawler.backends.redis.frontier_lua import SCRIPT_KEYS, SCRIPTS
from crawler.backends.redis.host_reports import HostReports, OperatorControls
from crawler.backends.redis.keys import CrawlKeys
from crawler.backends.redis.seen import SEEN_SCRIPTS, SeenConfig, entry_seen_key, seen_key
from crawler.backends.redis.wake import listen
from crawler.config import defaults
from crawler.frontier.api import (
    AddResult,
    Clock,
    Entry,
    Frontier,
    FrontierCounts,
    Lease,
    Outcome,
    Settlement,
)
from crawler.frontier.opic import FLOOR_BITS
from crawler.frontier.opic import selector_weights as opic_weights
from crawler.frontier.politeness import PolitenessPolicy
from crawler.frontier.store import identity

# The storage layout of a crawl: a crawl stored by another version is refused, not read. 5: the
# queued URL is the request URL (the link as found, made safe) with its seen key when its
# canonical form differs (crawler.backends.redis.entries); OPIC's cash records in buckets per
# host ({crawl}:cr:<b>:<host>); referrers as deltas.
LAYOUT = "5"
# the scripts whose writes a replica must have before they count (FRONTIER_REPLICA_WAIT): links
# stored, fetches completed and acknowledged, the operator's acts. A lease lost in a failover
# only makes its URL due again.
_WRITES = frozenset(
    {"add", "complete", "ack", "release", "block", "unblock", "control", "hold", "mark_seen"}
)
_REASONS = ("", "seen", "host_budget", "host_skipped", "host_dead", "host_blocked")
_ADD_RESULTS = [AddResult(True)] + [AddResult(False, r) for r in _REASONS[1:]]


def _chunks(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


class RedisFrontier(OpicCash, CrawlFingerprint, OperatorControls, HostReports, Frontier):
    """API v2 over one Redis (its keys: :class:`~crawler.backends.redis.keys.FrontierKeys`).

    ``client`` must return bytes (``decode_responses=False``). ``back_queues`` is Mercator's B,
    shared by all workers (rule of thumb: 3 x the fetches in flight across the crawl).
    ``clock`` is for tests only: when given, its time is passed to the scripts instead of
    Redis's ``TIME``. ``worker_id`` is recorded in each lease so an operator can see who holds
    what; tokens are unique across workers anyway (a shared counter).
    """

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        policy: PolitenessPolicy,
        *,
        front_queues: int = defaults.FRONTIER_FRONT_QUEUES,
        back_queues: int = 256,
        max_pages_per_host: int | None = None,
        lease_ttl: float = defaults.FRONTIER_LEASE_TTL,
        clock: Clock | None = None,
        worker_id: str | None = None,
        chunk_size: int = 1000,
        selector_weights: Sequence[int] | None = None,
        refill_batch: int = defaults.FRONTIER_REFILL_BATCH,
        expire_batch: int = 100,
        seen_bloom: tuple[int, int] | None = None,
        seen: SeenConfig | None = None,
        on_give_up: Callable[[str, str, int], None] | None = None,
        shard: int = 0,
        shards: int = 1,
        runner: ScriptRunner | None = None,
        opic: bool = False,
        back_run: int = 0,
    ) -> None:
        """``seen``: the seen-set's shape (:class:`~crawler.backends.redis.seen.SeenConfig`:
        exact, then a scalable Bloom filter); ``seen_bloom`` (deprecated): ``(bits, probes)``
        of a fixed Bloom filter instead. Every worker of a crawl must use the same.
        ``shard`` of ``shards``: the part of a sharded crawl's frontier this object serves
        (:class:`~crawler.backends.redis.sharded.ShardedFrontier` holds one per shard);
        ``runner`` sends its scripts (:mod:`~crawler.backends.redis.calls`: a cluster's node,
        replicas waited on). ``opic``: OPIC cash orders the front queues (``back_run``: as
        the embedded frontier's; ``frontier_lua_opic``)."""
        self.crawl_keys = CrawlKeys(key, shards=shards)
        if client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("the Redis client must return bytes (decode_responses=False)")
        if front_queues < 1 or back_queues < 1:
            raise ValueError("at least one front queue and one back queue are needed")
        if not 1 <= chunk_size <= 1000:
            raise ValueError("chunk_size must be within 1..1000")
        default = opic_weights(front_queues) if opic else [
            front_queues - i for i in range(front_queues)
        ]
        weights = list(selector_weights or default)
        if len(weights) != front_queues or min(weights) < 1:
            raise ValueError("one positive weight per front queue is needed")
        self.client = client
        self.key = key
        self.keys = self.crawl_keys.frontier(shard)
        self.shard_count = shards
        self.runner = runner or script_runner(client)
        self.prefix = self.keys.prefix
        self.policy = policy
        self.front_queue_count = front_queues
        self.back_queue_count = back_queues
        self.max_pages_per_host = max_pages_per_host
        self.lease_ttl = lease_ttl
        self.clock = clock
        self.worker_id = worker_id or ""
        self.chunk_size = chunk_size
        self.expire_batch = expire_batch
        self.on_give_up = on_give_up  # (host, reason, URLs dropped), as the embedded frontier
        self.opic = opic
        self.back_run = back_run
        # OPIC: the URLs this worker leased (its fetched pages; their str hash, computed once
        # per string), so that the many repeated links to them send no cash to Redis and cost
        # no seen key; cleared past FETCHED_KEYS
        self._fetched: set[int] = set()
        self.credits_dropped = 0.0  # the cash they brought (history: not queued any more)
        self.halt = ""  # the operator's halt, as the last script call saw it
        self.overdue = 0.0  # how long the earliest host had been due, as the last call saw it
        self.control_epoch = 0  # operator actions announced on the wake channel (watch)
        self._stats = self.keys.stats
        self._keys = SCRIPT_KEYS.keys(self.keys)
        self.seen = seen or SeenConfig(bloom=seen_bloom)
        self.seen_bloom = self.seen.bloom
        self._config = msgpack.packb(
            [
                policy.min_delay,
                policy.delay_factor,
                policy.max_delay,
                policy.host_concurrency,
                policy.max_crawl_delay,
                policy.max_failures,
                -1 if max_pages_per_host is None else max_pages_per_host,
                front_queues,
                back_queues,
                lease_ttl,
                refill_batch,
                weights,
                policy.failure_window,
                policy.window_failures,
                *self.seen.script_config(),
                1 if opic else 0,
                back_run if opic else 0,
                FLOOR_BITS,
            ]
        )
        self._scripts = {
            name: client.register_script(src) for name, src in {**SCRIPTS, **SEEN_SCRIPTS}.items()
        }
        layout = client.hget(self.keys.meta, "layout")
        if layout is None:
            client.hsetnx(self.keys.meta, "layout", LAYOUT)
        elif layout.decode() != LAYOUT:
            raise RuntimeError(
                f"Redis frontier {key!r} was stored by another version (layout "
                f"{layout.decode()}, this code reads {LAYOUT}): reset it (FRONTIER_RESET) or "
                "use another key"
            )

    # -- plumbing -----------------------------------------------------------------------------

    def _now_arg(self) -> str:
        return "" if self.clock is None else repr(float(self.clock()))

    def _script_call(self, name: str, *args: Any) -> ScriptCall:
        return ScriptCall(
            self._scripts[name], self._keys, [self._now_arg(), self._config, *args], name in _WRITES
        )

    def _call(self, name: str, *args: Any) -> Any:
        return self.runner.run(self._script_call(name, *args))

    def _now(self) -> float:
        """The frontier's clock, for reports computed client-side."""
        if self.clock is not None:
            return float(self.clock())
        sec, usec = self.client.time()
        return sec + usec / 1e6

    def _priority(self, p: int) -> int:
        return 0 if p < 0 else min(p, self.front_queue_count - 1)

    # -- adding -------------------------------------------------------------------------------

    def _add_call(
        self,
        entries: Sequence[Entry],
        force: bool,
        first: bool,
        credits: Sequence[Credit] = (),
    ) -> ScriptCall:
        args: list[Any] = ["1" if force else "0", "1" if first else "0"]
        if self.opic:  # the cash and policy go with each link, into the same script call
            for e in entries:
                p = self._priority(e.priority)
                args += [
                    entry_seen_key(e), e.host, "a", pack_entry(e, p), repr(float(e.cash)), e.policy
                ]
            # the cash for URLs seen before in one argument (cash.pack_credits)
            packed, dropped = pack_credits(credits, self._fetched)
            self.credits_dropped += dropped
            args.append(packed)
            return self._script_call("add", *args)
        for e in entries:
            p = self._priority(e.priority)
            args += [entry_seen_key(e), e.host, p, pack_entry(e, p)]
        return self._script_call("add", *args)

    def _add_chunk(self, entries: Sequence[Entry], force: bool, first: bool) -> list[int]:
        return self.runner.run(self._add_call(entries, force, first))

    def add_calls(
        self, entries: Sequence[Entry], credits: Sequence[Credit] = ()
    ) -> list[ScriptCall]:
        """The script calls that queue ``entries`` (a page's links of this shard), one per
        ``chunk_size``, for a caller that pipelines them with other shards'. Their replies
        are :meth:`add_results`. ``credits`` (OPIC: cash for URLs seen before, as
        :func:`credit_items` gives them) go in the last call, after the links: a page's links
        and its cash stay one script call."""
        if not self.opic:
            credits = ()
        chunks = list(_chunks(entries, self.chunk_size)) or ([[]] if credits else [])
        last = len(chunks) - 1
        return [
            self._add_call(chunk, False, False, credits if i == last else ())
            for i, chunk in enumerate(chunks)
        ]

    @staticmethod
    def add_results(replies: Sequence[Sequence[int]]) -> list[AddResult]:
        return [_ADD_RESULTS[c] for reply in replies for c in reply]

    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        code = self._add_chunk([entry], force, first)[0]
        if code == 0:
            entry.priority = self._priority(entry.priority)
        return _ADD_RESULTS[code]

    def add_many(self, entries: Sequence[Entry]) -> list[AddResult]:
        """One script call per ``chunk_size`` entries, all in one pipeline: one round trip."""
        calls = self.add_calls(entries)
        return self.add_results(self.runner.run_many(calls) if calls else [])

    def mark_seen(self, keys: Iterable[str]) -> int:
        return sum(
            self._call("mark_seen", *[seen_key(u) for u in chunk])
            for chunk in _chunks(keys, self.chunk_size)
        )

    def has_seen(self, urls: Sequence[str]) -> list[bool]:
        """The seen-test alone (nothing written): for reports and benchmarks."""
        calls = [
            self._script_call("has_seen", *[seen_key(u) for u in chunk])
            for chunk in _chunks(urls, self.chunk_size)
        ]
        return [bool(x) for reply in self.runner.run_many(calls) for x in reply] if calls else []

    # -- leasing ------------------------------------------------------------------------------

    def next(self) -> Lease | None:
        leases = self.next_many(1)
        return leases[0] if leases else None

    def next_many(self, n: int) -> list[Lease]:
        """One script call for up to ``n`` leases, earliest ready host first."""
        return self.lease_with_status(n)[0]

    def lease_with_status(self, n: int) -> tuple[list[Lease], tuple[float | None, int, int]]:
        """``next_many(n)`` and ``status()`` after it, in one script call."""
        now, rows, status = self._call("next", max(n, 0), self.worker_id)
        issued = float(now)
        leases = []
        for token, slot, blob, name, *ranking in rows:
            entry = unpack_entry(blob, name.decode())
            if ranking:  # OPIC: the cash it gathered, the crawl policy it was found under
                entry.cash = float(ranking[0])
                entry.policy = ranking[1].decode()
                if len(self._fetched) >= FETCHED_KEYS:
                    self._fetched.clear()
                self._fetched.add(hash(identity(entry)))
            leases.append(Lease(token.decode(), entry, int(slot), issued))
        return leases, self._status(status)

    def _status(self, reply: Sequence[Any]) -> tuple[float | None, int, int]:
        """A script's status reply; its fourth part, the operator's halt, is kept for
        ``halted``."""
        self.halt = reply[3].decode() if isinstance(reply[3], bytes) else str(reply[3] or "")
        due, open_leases, queued = _status(reply[:3])
        self.overdue = 0.0 if due is None else max(0.0, -due)
        return (None if due is None else max(0.0, due)), open_leases, queued

    def complete(
        self,
        token: str,
        duration: float | None,
        outcome: Outcome = Outcome.FETCHED,
        *,
        size: int = 0,
    ) -> float | None:
        return self._completed(
            self._call("complete", token, _seconds(duration), str(outcome), "0", int(size))
        )

    def finish(
        self,
        token: str,
        duration: float | None,
        outcome: Outcome = Outcome.FETCHED,
        *,
        size: int = 0,
    ) -> float | None:
        """``complete`` and ``ack`` in one script call: one round trip, not two."""
        return self._completed(
            self._call("complete", token, _seconds(duration), str(outcome), "1", int(size))
        )

    def settle_call(self, settlement: Settlement) -> ScriptCall:
        """The script call of one completion or acknowledgement (its reply:
        :meth:`settled`)."""
        if settlement.kind == "ack":
            return self._script_call("ack", settlement.token)
        return self._script_call(
            "complete",
            settlement.token,
            _seconds(settlement.duration),
            str(settlement.outcome),
            "1" if settlement.kind == "finish" else "0",
            int(settlement.size),
        )

    def settled(self, settlement: Settlement, reply: Any) -> float | None:
        return None if settlement.kind == "ack" else self._completed(reply)

    def settle_many(self, settlements: Sequence[Settlement]) -> list[float | None]:
        """Every completion and acknowledgement in one pipeline: one round trip."""
        replies = self.runner.run_many([self.settle_call(s) for s in settlements])
        return [self.settled(s, r) for s, r in zip(settlements, replies, strict=True)]

    def apply(
        self,
        entries: Sequence[Entry],
        settlements: Sequence[Settlement],
        credits: Sequence[tuple[Any, ...]] = (),
    ) -> tuple[list[AddResult], list[float | None]]:
        """Cash and links, then completions, in one pipeline."""
        items = credit_items(credits) if credits and self.opic else []
        adds = self.add_calls(entries, items) if entries or items else []
        settles = [self.settle_call(s) for s in settlements]
        replies = self.runner.run_many(adds + settles) if adds or settles else []
        rests = [
            self.settled(s, r) for s, r in zip(settlements, replies[len(adds) :], strict=True)
        ]
        return self.add_results(replies[: len(adds)]), rests

    def _completed(self, reply: list[Any]) -> float | None:
        """The complete script's reply: the slot's rest, then the host it gave up, if any."""
        rest, *gave_up = reply
        if gave_up:
            self._gave_up(gave_up)
        return float(rest) if rest else None

    def _gave_up(self, reply: Any) -> bool:
        """A script that gave a host up says which: reported once, by the worker whose call
        did it, through ``on_give_up`` like the embedded frontier."""
        if not isinstance(reply, list):
            return False
        name, reason, dropped = reply
        if self.on_give_up is not None:
            self.on_give_up(name.decode(), reason.decode(), int(dropped))
        return True

    def ack(self, token: str) -> None:
        self._call("ack", token)

    def renew(self, tokens: Iterable[str]) -> int:
        return sum(self._call("renew", *chunk) for chunk in _chunks(tokens, self.chunk_size))

    def release(self, tokens: Iterable[str], *, rest: bool = False) -> int:
        flag = "1" if rest else "0"
        return sum(
            self._call("release", flag, *chunk) for chunk in _chunks(tokens, self.chunk_size)
        )

    def expire(self) -> int:
        total = 0
        while True:
            n = self._call("expire", self.expire_batch)
            total += n
            if n < self.expire_batch:
                return total

    # -- hosts --------------------------------------------------------------------------------

    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        reply = self._call("crawl_delay", host, _seconds(seconds))
        return not self._gave_up(reply) and bool(reply)

    def hold_host(self, host: str, seconds: float) -> None:
        self._call("hold", host, _seconds(seconds))

    # -- what the scheduler asks about --------------------------------------------------------

    def status(self) -> tuple[float | None, int, int]:
        """Due time, open leases and queued URLs in one script call (it also expires a few
        leases and refills back queues, as ``next`` does)."""
        return self._status(self._call("due"))

    def due_in(self) -> float | None:
        return self.status()[0]

    def has_work(self, horizon: float) -> bool:
        due, open_leases, _ = self.status()
        return open_leases > 0 or (due is not None and due <= horizon)

    def watch(self, on_change: Callable[[], None]) -> Callable[[], None]:
        """Listen on the crawl's wake channel (:func:`crawler.backends.redis.wake.listen`): the
        scripts publish when a host becomes ready sooner than the earliest ready time, or the
        last lease drains; an operator's action also bumps ``control_epoch``."""
        return listen(self.client, self.keys.wake, on_change, self._control_heard)

    def _control_heard(self) -> None:
        self.control_epoch += 1

    def in_flight(self) -> int:
        return self.client.zcard(self.keys.leases)

    def __len__(self) -> int:
        return int(self.client.hget(self._stats, "queued") or 0)

    def counts(self) -> FrontierCounts:
        """O(K) in Redis: counters, cardinalities and ZCOUNT, never a walk over the queues."""
        _, leases, seen, hosts, ready, waiting, front, flat, halt = self._call("counts")
        self.halt = halt.decode()
        stats = {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)
                 if flat[i + 1].lstrip(b"-").isdigit()}  # (OPIC's cash sums: cash_totals)
        return FrontierCounts(
            queued=stats.get("queued", 0),
            in_flight=leases,
            seen=seen,
            hosts=hosts,
            hosts_ready=ready,
            hosts_waiting=waiting,
            hosts_busy=stats.get("busy", 0),
            front_queued=front,
            back_queues_used=stats.get("used", 0),
            extra={k[5:]: v for k, v in stats.items() if k.startswith("drop:")}
            | ({"back_queues_released": stats["br"]} if stats.get("br") else {}),
        )

    def halted(self) -> str:
        return self.halt

    def parts(self) -> list[RedisFrontier]:
        """The shard frontiers this frontier is made of (itself; a sharded one, its shards)."""
        return [self]

    def token_of(self, token: str) -> str:
        """A lease token of this shard as the crawl's frontier names it."""
        return token if self.shard_count == 1 else f"{self.keys.index}:{token}"

    def shard_loads(self) -> list[dict[str, Any]]:
        """This one shard's load and its node's (``scrapy frontier`` status)."""
        from crawler.backends.redis.sharded import shard_loads  # it reads RedisFrontier

        return shard_loads([self])

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Nothing to write: every call was already atomic in Redis. Shared state stays; the
        client belongs to the caller."""

    def reset(self) -> int:
        """Delete every key of this crawl (FRONTIER_RESET); returns how many. Uses SCAN, so it
        never blocks Redis for long, and UNLINK, so big keys are freed in the background."""
        deleted = 0
        for pattern in self.crawl_keys.patterns():
            for chunk in _chunks(self.client.scan_iter(match=pattern, count=1000), 500):
                deleted += self.client.unlink(*chunk)
        return deleted


def _status(reply: Sequence[Any]) -> tuple[float | None, int, int]:
    due, open_leases, queued = reply
    return (float(due) if due else None), int(open_leases), int(queued)


def _seconds(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def server_clock(client: redis.Redis) -> Callable[[], float]:
    """Redis's own clock as a callable (for callers that compare with lease ``issued_at``)."""

    def now() -> float:
        sec, usec = client.time()
        return sec + usec / 1e6

    return now


__all__ = [
    "LAYOUT",
    "RedisFrontier",
    "pack_entry",
    "seen_key",
    "server_clock",
    "unpack_entry",
]
