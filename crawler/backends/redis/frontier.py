"""The Mercator frontier inside Redis: several worker processes, one polite frontier.

Every operation is one Lua script (``redis_lua.py``) run atomically by Redis, so workers that
each hold a ``RedisFrontier`` on the same ``key`` share the front queues, the back queues, the
host table, the leases and the seen-set, and politeness holds across all of them together. Time
is Redis's ``TIME`` inside the scripts, so the workers' clocks never meet.

Layout, all under the hash tag ``{key}`` (one Redis Cluster slot per crawl):

==========================  ======  ===========================================================
``{key}:meta``              HASH    ``layout`` version and the settings fingerprint
``{key}:stats``             HASH    counters: ``queued``, ``busy`` hosts, ``used`` back queues,
                                    ``seq`` (lease tokens), ``drop:<reason>``
``{key}:f:<p>``             LIST    front queue of priority ``p`` (0 is the highest)
``{key}:sel``               HASH    the biased selector's state (smooth weighted round robin)
``{key}:q:<host>``          LIST    the host's back queue (at most B hosts hold one)
``{key}:fq:<host>``         LIST    the host's *first* entries (robots.txt)
``{key}:h:<host>``          HASH    the host's politeness state (see ``redis_lua``)
``{key}:hosts``             SET     host names (for reports, read with SSCAN)
``{key}:ready``             ZSET    hosts that may hand out a URL, by the time they may
``{key}:leases``            ZSET    lease token -> deadline
``{key}:lease``             HASH    lease token -> msgpack lease record
``{key}:seen``              SET     8-byte blake2b digests of the normalized URLs
``{key}:fetches``           ZSET    host -> fetches (``busiest_hosts``)
``{key}:ctl``               HASH    the operator's controls: ``paused``, ``deadline`` (Redis
                                    time), ``budget`` (bytes; ``{key}:stats`` counts ``bytes``)
``{key}:blocked``           HASH    ``h:<host>`` / ``d:<domain>`` -> when the operator blocked it
==========================  ======  ===========================================================

A queued URL is msgpack: the host, then ``[url, priority, depth, payload]`` in a LIST (about
80 bytes for a 50-character URL); nothing is ever pickled.

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
* The scripts build key names from ``KEYS[1]``'s prefix instead of declaring every key. All
  share the hash tag, so they are on one cluster slot; a Redis that enforces declared keys
  would need the scripts rewritten as Redis Functions with key lists.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from hashlib import blake2b
from itertools import islice
from typing import Any

import msgpack
import redis

from crawler.backends.redis.frontier_lua import SCRIPTS
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
from crawler.frontier.politeness import PolitenessPolicy

LAYOUT = "1"
_REASONS = ("", "seen", "host_budget", "host_skipped", "host_dead", "host_blocked")
_ADD_RESULTS = [AddResult(True)] + [AddResult(False, r) for r in _REASONS[1:]]


def seen_key(url: str) -> bytes:
    """The seen-set member of a normalized URL: the same 64-bit blake2b key as
    ``store.url_key`` (``url_key(url).to_bytes(8, "big", signed=True)``), as 8 raw bytes so a
    SET member costs ~64 bytes in Redis."""
    return blake2b(url.encode(), digest_size=8).digest()


def pack_entry(entry: Entry, priority: int) -> bytes:
    """msgpack, never pickle: what comes out of a shared Redis is data, not code.

    Two msgpack objects back to back: the host, then ``[url, priority, depth, payload]``. The
    scripts decode only the first (``cmsgpack.unpack_one``): Redis's cmsgpack cannot decode
    msgpack's bin type, which a bytes payload needs."""
    try:
        rest = msgpack.packb([entry.url, priority, entry.depth, entry.payload], use_bin_type=True)
    except TypeError as exc:
        raise TypeError(f"Entry.payload must be plain data (bytes, str, numbers): {exc}") from None
    return msgpack.packb(entry.host) + rest


def unpack_entry(blob: bytes) -> Entry:
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(blob)
    host = unpacker.unpack()
    url, priority, depth, payload = unpacker.unpack()
    return Entry(url=url, host=host, priority=priority, depth=depth, payload=payload)


def _chunks(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


class RedisFrontier(Frontier):
    """API v2 over one Redis: see the module docstring for the layout.

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
        on_give_up: Callable[[str, str, int], None] | None = None,
    ) -> None:
        """``seen_bloom``: ``(bits, probes)`` (:func:`bloom_params`) keeps the seen-set as a
        Bloom filter instead of a SET; every worker of a crawl must use the same."""
        if not key or any(c in key for c in "{}"):
            raise ValueError(f"frontier key {key!r} must be non-empty, without braces")
        if client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("the Redis client must return bytes (decode_responses=False)")
        if front_queues < 1 or back_queues < 1:
            raise ValueError("at least one front queue and one back queue are needed")
        if not 1 <= chunk_size <= 1000:
            raise ValueError("chunk_size must be within 1..1000")
        weights = list(selector_weights or [front_queues - i for i in range(front_queues)])
        if len(weights) != front_queues or min(weights) < 1:
            raise ValueError("one positive weight per front queue is needed")
        self.client = client
        self.key = key
        self.prefix = "{" + key + "}"
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
        self.halt = ""  # the operator's halt, as the last script call saw it
        self.control_epoch = 0  # operator actions announced on the wake channel (watch)
        self._stats = self.prefix + ":stats"
        self._keys = [self._stats]
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
                *(seen_bloom or (0, 0)),
            ]
        )
        self.seen_bloom = seen_bloom
        self._scripts = {name: client.register_script(src) for name, src in SCRIPTS.items()}
        layout = client.hget(self.prefix + ":meta", "layout")
        if layout is None:
            client.hsetnx(self.prefix + ":meta", "layout", LAYOUT)
        elif layout.decode() != LAYOUT:
            raise RuntimeError(
                f"Redis frontier {key!r} has layout {layout.decode()}, this code reads "
                f"layout {LAYOUT}: reset it (FRONTIER_RESET) or use another key"
            )

    # -- plumbing -----------------------------------------------------------------------------

    def _now_arg(self) -> str:
        return "" if self.clock is None else repr(float(self.clock()))

    def _call(self, name: str, *args: Any) -> Any:
        return self._scripts[name](keys=self._keys, args=[self._now_arg(), self._config, *args])

    def _now(self) -> float:
        """The frontier's clock, for reports computed client-side."""
        if self.clock is not None:
            return float(self.clock())
        sec, usec = self.client.time()
        return sec + usec / 1e6

    def _priority(self, p: int) -> int:
        return 0 if p < 0 else min(p, self.front_queue_count - 1)

    def settings_fingerprint(self) -> dict[str, str]:
        """The settings every worker of one crawl must share (politeness and queue shape)."""
        p = self.policy
        return {
            "min_delay": repr(float(p.min_delay)),
            "delay_factor": repr(float(p.delay_factor)),
            "max_delay": repr(float(p.max_delay)),
            "host_concurrency": str(p.host_concurrency),
            "max_crawl_delay": repr(float(p.max_crawl_delay)),
            "max_failures": str(p.max_failures),
            "failure_window": f"{p.failure_window}:{p.window_failures}",
            "front_queues": str(self.front_queue_count),
            "back_queues": str(self.back_queue_count),
            "max_pages_per_host": str(self.max_pages_per_host),
        }

    def check_compatible(self, settings_fingerprint: dict[str, Any]) -> list[str]:
        """Compare this worker's settings (politeness, queue shape, plus the caller's scope
        fingerprint) with those the crawl's first worker stored; store the ones not yet there.
        Returns one message per mismatch: workers of one crawl must obey one policy."""
        meta = self.prefix + ":meta"
        wanted = {
            **self.settings_fingerprint(),
            **{k: str(v) for k, v in settings_fingerprint.items()},
        }
        pipe = self.client.pipeline()
        for name, value in wanted.items():
            pipe.hsetnx(meta, "fp:" + name, value)
        pipe.hgetall(meta)
        stored = {k.decode(): v.decode() for k, v in pipe.execute()[-1].items()}
        problems = []
        if stored.get("layout") != LAYOUT:
            problems.append(f"layout: stored {stored.get('layout')}, expected {LAYOUT}")
        for name, value in wanted.items():
            have = stored.get("fp:" + name)
            if have != value:
                problems.append(f"{name}: crawl has {have}, this worker has {value}")
        return problems

    # -- adding -------------------------------------------------------------------------------

    def _add_chunk(self, entries: Sequence[Entry], force: bool, first: bool) -> list[int]:
        args: list[Any] = ["1" if force else "0", "1" if first else "0"]
        for e in entries:
            p = self._priority(e.priority)
            args += [seen_key(e.url), e.host, p, pack_entry(e, p)]
        return self._call("add", *args)

    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        code = self._add_chunk([entry], force, first)[0]
        if code == 0:
            entry.priority = self._priority(entry.priority)
        return _ADD_RESULTS[code]

    def add_many(self, entries: Sequence[Entry]) -> list[AddResult]:
        """One script call per ``chunk_size`` entries: one round trip per page's links."""
        results: list[AddResult] = []
        for chunk in _chunks(entries, self.chunk_size):
            results += [_ADD_RESULTS[c] for c in self._add_chunk(chunk, False, False)]
        return results

    def mark_seen(self, keys: Iterable[str]) -> int:
        if self.seen_bloom is not None:
            return self._bloom_mark(keys)
        new = 0
        for chunk in _chunks(keys, self.chunk_size):
            new += self.client.sadd(self.prefix + ":seen", *[seen_key(k) for k in chunk])
        return new

    def _bloom_mark(self, keys: Iterable[str]) -> int:
        """The Bloom filter's bits of ``keys`` set, one pipelined BITFIELD per key; returns
        how many were new (counted, as the add script counts them)."""
        assert self.seen_bloom is not None
        bloom = self.prefix + ":seen:bloom"
        new = 0
        for chunk in _chunks(keys, self.chunk_size):
            pipe = self.client.pipeline(transaction=False)
            for k in chunk:
                offsets = bloom_offsets(seen_key(k), *self.seen_bloom)
                pipe.execute_command(
                    "BITFIELD", bloom, *[a for o in offsets for a in ("SET", "u1", o, 1)]
                )
            fresh = sum(1 for old in pipe.execute() if 0 in old)
            if fresh:
                self.client.incrby(bloom + ":n", fresh)
            new += fresh
        return new

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
        leases = [
            Lease(token.decode(), unpack_entry(blob), int(slot), issued)
            for token, slot, blob in rows
        ]
        return leases, self._status(status)

    def _status(self, reply: Sequence[Any]) -> tuple[float | None, int, int]:
        """A script's status reply; its fourth part, the operator's halt, is kept for
        ``halted``."""
        self.halt = reply[3].decode() if isinstance(reply[3], bytes) else str(reply[3] or "")
        return _status(reply[:3])

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
        """Listen on ``{key}:wake`` (the scripts publish when a host becomes ready sooner than
        the earliest ready time, or the last lease drains) on a thread of its own with its own
        connection; blocked in a socket read, it costs Redis nothing while nothing happens.
        A lost connection is retried every second (redis-py subscribes again)."""
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        stop = threading.Event()

        def run() -> None:
            subscribed = False
            while not stop.is_set():
                try:
                    if not subscribed:
                        pubsub.subscribe(self.prefix + ":wake")
                        subscribed = True
                        on_change()  # whatever happened while not listening
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None:
                        if message.get("data") == b"ctl":  # an operator acted
                            self.control_epoch += 1
                        on_change()
                except (redis.RedisError, OSError, ValueError):
                    subscribed = False
                    stop.wait(1.0)

        thread = threading.Thread(target=run, name="frontier-wake", daemon=True)
        thread.start()

        def close() -> None:
            stop.set()
            thread.join(3.0)
            with contextlib.suppress(redis.RedisError, OSError):
                pubsub.close()

        return close

    def in_flight(self) -> int:
        return self.client.zcard(self.prefix + ":leases")

    def __len__(self) -> int:
        return int(self.client.hget(self._stats, "queued") or 0)

    def counts(self) -> FrontierCounts:
        """O(K) in Redis: counters, cardinalities and ZCOUNT, never a walk over the queues."""
        _, leases, seen, hosts, ready, waiting, front, flat, halt = self._call("counts")
        self.halt = halt.decode()
        stats = {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}
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
            extra={k[5:]: v for k, v in stats.items() if k.startswith("drop:")},
        )

    def _iter_hosts(self, batch: int = 500) -> Iterable[list[str]]:
        """Host names in batches, read with SSCAN (never one blocking call over all hosts)."""
        names: list[str] = []
        for raw in self.client.sscan_iter(self.prefix + ":hosts", count=batch):
            names.append(raw.decode())
            if len(names) >= batch:
                yield names
                names = []
        if names:
            yield names

    def hosts(self) -> list[str]:
        return [name for batch in self._iter_hosts() for name in batch]

    def waiting_hosts(self) -> list[HostReport]:
        """Hosts with queued URLs that ``next`` would not serve now. Read client-side in
        batches (SSCAN + pipelined HMGET), so a report never blocks Redis for long."""
        now = self._now()
        reports = []
        for names in self._iter_hosts():
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.hmget(self.prefix + ":h:" + name, "hq", "st", "bk", "fi")
                pipe.llen(self.prefix + ":fq:" + name)
                pipe.zscore(self.prefix + ":ready", name)
            replies = pipe.execute()
            for i, name in enumerate(names):
                (hq, st, bk, fi), firsts, ready = replies[3 * i : 3 * i + 3]
                queued = int(hq or 0)
                if not queued or st:
                    continue
                if ready is not None:
                    if ready <= now:
                        continue
                    reason, due = "politeness delay", ready - now
                elif bk != b"1" and not firsts:
                    reason, due = "waiting for a back queue", 0.0
                elif fi and int(fi):
                    reason, due = "first request in flight", 0.0
                else:
                    reason, due = "in flight", 0.0
                reports.append(HostReport(name, queued, due, reason))
        return sorted(reports, key=lambda r: -r.due_in)

    def busiest_hosts(self, n: int = 3) -> list[tuple[str, int, float]]:
        top = self.client.zrevrange(self.prefix + ":fetches", 0, n - 1, withscores=True)
        pipe = self.client.pipeline(transaction=False)
        for name, _ in top:
            pipe.hmget(self.prefix + ":h:" + name.decode(), "gs", "gn")
        out = []
        for (name, fetches), (gs, gn) in zip(top, pipe.execute(), strict=True):
            mean = float(gs) / int(gn) if gn and int(gn) else 0.0
            out.append((name.decode(), int(fetches), mean))
        return out

    # -- the operator's controls (``scrapy frontier <site> ...``) -------------------------------

    def halted(self) -> str:
        return self.halt

    def block(self, name: str, *, domain: bool = False) -> int:
        """Block a host, or a domain with all its hosts: their queued URLs are dropped
        (returned, and counted in ``drop:host_blocked``), no URL of theirs is admitted or
        handed out again, by any worker. A domain block is recorded first (hosts met later
        are blocked as they come), then the known hosts are walked with SSCAN, one script
        call per matching host: no script walks the host set."""
        name = name.lower().rstrip(".")
        if not domain:
            return int(self._call("block", name, "1"))
        self.client.hset(self.prefix + ":blocked", "d:" + name, repr(self._now()))
        dropped = 0
        for hosts in self._iter_hosts():
            for host in hosts:
                if _in_domain(host, name):
                    dropped += int(self._call("block", host, "0"))
        self.client.publish(self.prefix + ":wake", "ctl")
        return dropped

    def unblock(self, name: str, *, domain: bool = False) -> int:
        """Lift a block; returns how many hosts may be crawled again (a host also blocked by
        name or by another domain stays blocked). URLs dropped by the block stay dropped."""
        name = name.lower().rstrip(".")
        if not domain:
            return int(self._call("unblock", name, "1"))
        self.client.hdel(self.prefix + ":blocked", "d:" + name)
        lifted = 0
        for hosts in self._iter_hosts():
            for host in hosts:
                if _in_domain(host, name):
                    lifted += int(self._call("unblock", host, "0"))
        return lifted

    def set_control(self, name: str, value: float | None, *, relative: bool = False) -> str:
        """Set (None: clear) one control: ``paused`` (1), ``deadline`` (Redis time, or
        seconds from now with ``relative``), ``budget`` (bytes). Every worker hears of it at
        once (the wake channel) and obeys it inside the scripts. Returns the crawl's halt."""
        if name not in ("paused", "deadline", "budget"):
            raise ValueError(f"no such control: {name}")
        text = "" if value is None else repr(float(value)) if name == "deadline" else str(
            int(value)
        )
        _, halt = self._call("control", name, text, "rel" if relative else "abs")
        return halt.decode()

    def controls(self) -> dict[str, Any]:
        """The operator's controls as stored: paused, deadline (Redis time), byte budget and
        bytes so far, blocked hosts and domains."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.prefix + ":ctl")
        pipe.hget(self._stats, "bytes")
        pipe.hkeys(self.prefix + ":blocked")
        ctl, size, blocked = pipe.execute()
        ctl = {k.decode(): v.decode() for k, v in ctl.items()}
        names = sorted(b.decode() for b in blocked)
        return {
            "paused": ctl.get("paused") == "1",
            "deadline": float(ctl["deadline"]) if "deadline" in ctl else None,
            "byte_budget": int(ctl["budget"]) if "budget" in ctl else None,
            "bytes": int(size or 0),
            "blocked_hosts": [n[2:] for n in names if n.startswith("h:")],
            "blocked_domains": [n[2:] for n in names if n.startswith("d:")],
        }

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Nothing to write: every call was already atomic in Redis. Shared state stays; the
        client belongs to the caller."""

    def reset(self) -> int:
        """Delete every key of this crawl (FRONTIER_RESET); returns how many. Uses SCAN, so it
        never blocks Redis for long, and UNLINK, so big keys are freed in the background."""
        pattern = _glob_escape(self.prefix) + ":*"
        deleted = 0
        for chunk in _chunks(self.client.scan_iter(match=pattern, count=1000), 500):
            deleted += self.client.unlink(*chunk)
        return deleted


def bloom_params(capacity: int, error: float) -> tuple[int, int]:
    """Bits and probes of a Bloom filter holding ``capacity`` keys at false-positive rate
    ``error``: m = -n ln p / (ln 2)^2 (at most Redis's 2^32-bit string), k = m/n ln 2."""
    if capacity < 1 or not 0.0 < error < 1.0:
        raise ValueError("a Bloom filter needs a capacity >= 1 and an error rate in (0, 1)")
    bits = min(2**32, math.ceil(-capacity * math.log(error) / math.log(2) ** 2))
    return bits, max(1, round(bits / capacity * math.log(2)))


def bloom_offsets(key: bytes, bits: int, probes: int) -> list[int]:
    """The bits of ``key`` (an 8-byte seen key), as the add script computes them."""
    h1, h2 = int.from_bytes(key[:4], "big"), int.from_bytes(key[4:8], "big")
    return [(h1 + i * h2) % bits for i in range(probes)]


def _in_domain(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def _status(reply: Sequence[Any]) -> tuple[float | None, int, int]:
    due, open_leases, queued = reply
    return (float(due) if due else None), int(open_leases), int(queued)


def _seconds(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def server_clock(client: redis.Redis) -> Callable[[], float]:
    """Redis's own clock as a callable (for callers that compare with lease ``issued_at``)."""

    def now() -> float:
        sec, usec = client.time()
        return sec + usec / 1e6

    return now


__all__ = [
    "LAYOUT",
    "RedisFrontier",
    "bloom_offsets",
    "bloom_params",
    "pack_entry",
    "seen_key",
    "server_clock",
    "unpack_entry",
]
