"""Which worker owns which partition of the crawl's hosts: leases, heartbeats and fair shares.

A worker owns a partition while it holds its lease key (``{<tag>}:lease``, value
``<worker>/<epoch>``, expiring after ``ttl``); a killed worker's leases expire and the others
claim them with a higher epoch, which its :class:`FencedWriter` then refuses to write under.
How leases are claimed, renewed, handed over and taken back after an outage:
docs/decisions/0002-partition-owned-frontier.md. Every command touches one hash tag, so it
all runs on redis-py's ``RedisCluster`` in non-transactional pipelines.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.controls import redis_time
from crawler.backends.redis.fence import FencedWriter, PartitionLost, flush_together
from crawler.backends.redis.keys import CrawlKeys, PartitionKeys

# Seconds without a beat (the owner's calls stuck) after which its leases are no longer kept
# alive (:meth:`PartitionOwnership.keep_alive`): it gives its partitions up as if killed.
STUCK = 60.0


@dataclass
class Ownership:
    """One partition this worker owns: its keys, the epoch of the claim and the fenced writer
    every write of the owner to the partition's state goes through."""

    keys: PartitionKeys
    epoch: int
    writer: FencedWriter
    value: str  # the lease value, f"{worker}/{epoch}"


@dataclass
class Beat:
    """What one beat changed: the caller recovers the ``claimed`` partitions' state from Redis,
    drops its state of the ``lost`` ones, and hands over the ``surplus`` ones once settled
    (flush their writes, then :meth:`PartitionOwnership.release`)."""

    claimed: list[Ownership] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    surplus: list[int] = field(default_factory=list)


def fair_share(count: int, workers: list[str], worker: str) -> int:
    """How many of ``count`` partitions ``worker`` should own among the live ``workers``, the
    first ``count % len(workers)`` by name owning one more: every worker computes the same
    split from the same members, so the shares add up to ``count``."""
    ranked = sorted(set(workers) | {worker})
    base, extra = divmod(count, len(ranked))
    return base + (ranked.index(worker) < extra)


def preference(worker: str, index: int) -> int:
    """The rendezvous weight of partition ``index`` for ``worker``: workers spread over the
    partitions without talking, and a worker's choice does not move between beats."""
    digest = hashlib.blake2b(f"{worker}/{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class PartitionOwnership:
    """One worker's side of the partitions of a crawl: the ones it owns (:attr:`owned`).

    ``ttl`` (seconds) is the life of a lease and of a membership without a beat: beat well
    within it. ``replicas``: how many replicas each of an owner's writes waits for
    (:class:`FencedWriter`). Not thread-safe: one caller beats."""

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        crawl: str,
        count: int,
        worker: str,
        ttl: float,
        *,
        replicas: int = 0,
    ) -> None:
        self.client = client
        self.worker = worker
        self.count = count
        self.ttl_ms = max(1, round(ttl * 1000))
        self.replicas = replicas
        self._last_beat_ms: int | None = None  # Redis's time at the last beat
        self._quiet_until = 0  # no claims before (Redis ms): back from an outage
        self._away = False  # a beat failed since the last one that went through
        self._beaten = time.monotonic()  # when the last beat went through (keep_alive)
        self._lock = threading.Lock()  # a release, against keep_alive's renewals
        self._surplus: list[int] = []  # named at the last beat that knew the members
        crawl_keys = CrawlKeys(crawl)
        self.members, self.handover = crawl_keys.members, crawl_keys.handover
        self.loads = crawl_keys.partitions  # each partition's work, as its owner last said
        self.partitions = [PartitionKeys(crawl, i, count) for i in range(count)]
        self.order = sorted(range(count), key=lambda i: preference(worker, i), reverse=True)
        self.owned: dict[int, Ownership] = {}
        # index -> lease value of a claim whose outcome is unknown (its reply was lost): the
        # next beat reads the lease, and owns the partition if the value is this one
        self._unsure: dict[int, str] = {}
        # partitions found lost and dropped from ``owned`` since the last beat that returned
        # (one Redis going away cut short after that still says them, for the caller to drop)
        self._lost: list[int] = []

    # -- the beat -----------------------------------------------------------------------------

    def beat(self) -> Beat:
        """Record this worker's beat, renew its leases, claim free partitions up to the fair
        share and name the surplus.

        Back from an outage or a stall longer than a lease, it claims nothing for a TTL: the
        other workers' leases may have lapsed for the same reason, and they are coming back
        to take them again (through the fence) with the work they held; claiming them first
        would fetch that work twice."""
        try:
            beat = self._beat()
        except Exception:
            self._away = True
            raise
        beat.lost, self._lost = [*dict.fromkeys(self._lost)], []
        return beat

    def _beat(self) -> Beat:
        now = self._now_ms()
        last = self._last_beat_ms
        if last is not None and (self._away or now - last > self.ttl_ms):
            self._quiet_until = now + self.ttl_ms
        self._last_beat_ms, self._away = now, False
        quiet = now < self._quiet_until
        # one request: the membership, the renewals (GETEX) and the leases of claims whose
        # outcome is unknown (a GETEX too: renewed if ours, the other's extended if not)
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self.members, {self.worker: now})
        if not quiet:
            pipe.zremrangebyscore(self.members, "-inf", f"({now - self.ttl_ms}")
        pipe.zrange(self.members, 0, -1)
        held = list(self.owned.values())
        unsure = dict(self._unsure)
        for index in [*(o.keys.index for o in held), *unsure]:
            pipe.getex(self.partitions[index].lease, px=self.ttl_ms)
        replies = pipe.execute()
        self._unsure.clear()  # read: known now (a failed read leaves them for the next beat)
        values = replies[len(replies) - len(held) - len(unsure) :]
        live = replies[len(replies) - len(held) - len(unsure) - 1]
        kept = self._renewed(held, values[: len(held)])
        beat = Beat(lost=[o.keys.index for o, ours in zip(held, kept, strict=True) if not ours])
        for index in beat.lost:
            self.owned.pop(index, None)
        self._lost += beat.lost
        beat.claimed = [
            self._own(index, value)
            for (index, value), lease in zip(unsure.items(), values[len(held) :], strict=True)
            if lease == value.encode() and index not in self.owned
        ]
        self._beaten = time.monotonic()
        if quiet:  # the members are not known yet: what was surplus stays so, nothing more
            beat.surplus = [i for i in self._surplus if i in self.owned]
            return beat
        share = fair_share(self.count, [m.decode() for m in live], self.worker)
        if len(self.owned) < share:  # (only then: which leases exist is one more request)
            candidates = [i for i in self.order if i not in self.owned and i not in beat.lost]
            pipe = self.client.pipeline(transaction=False)
            for index in candidates:
                pipe.exists(self.partitions[index].lease)
            pipe.hgetall(self.loads)
            *taken, loads = pipe.execute()
            free = [i for i, held in zip(candidates, taken, strict=True) if not held]
            beat.claimed += self._claim(self._pick(free, share - len(self.owned), loads))
        elif len(self.owned) > share:
            named = [i for i in self._surplus if i in self.owned]  # (draining: not renamed)
            held = [i for i in self.owned if i not in named]
            if len(held) != share:  # the members changed: more named, or some named kept
                loads = self.client.hgetall(self.loads)
                keep = self._pick(held, share, loads) if len(held) > share \
                    else held + self._pick(named, share - len(held), loads)  # fmt: skip
                named = [i for i in self.order if i in self.owned and i not in keep]
            beat.surplus = named
        self._surplus = beat.surplus
        return beat

    def _pick(self, indexes: list[int], n: int, loads: dict[bytes, bytes]) -> list[int]:
        """``n`` of ``indexes``: the partitions with work (as their owners last said, in
        ``loads``) in proportion, then those without, each by this worker's preference.

        By preference alone, a worker that joins a crawl of few hosts may take up only empty
        partitions, and fetch nothing while the others hold every host: the partitions a
        holder keeps and the ones a joiner claims each carry their share of the work."""
        busy = {int(i) for i, said in loads.items() if said.split() != [b"0", b"0"]}
        ordered = [i for i in self.order if i in set(indexes)]
        full = [i for i in ordered if i in busy]
        empty = [i for i in ordered if i not in busy]
        k = min(len(full), n, max(n - len(empty), round(len(full) * n / max(1, len(ordered)))))
        return full[:k] + empty[: n - k]

    def _renewed(self, held: list[Ownership], values: list[bytes | None]) -> list[bool]:
        """Whether each lease of ``held`` is still ours, from the values its ``GETEX`` read;
        a lease found gone is taken back through the fence, if nobody claimed it since."""
        kept = [value == o.value.encode() for o, value in zip(held, values, strict=True)]
        gone = [i for i, value in enumerate(values) if value is None]
        if gone:
            writers = [self._writer(held[i].keys, held[i].value, numbered=False) for i in gone]
            for writer in writers:
                writer.write("PEXPIRE", writer.lease_key, self.ttl_ms)
            refused: list[PartitionLost | None] = [None] * len(writers)
            while any(w.pending for w in writers):  # a refused call: the others go again
                for j, why in enumerate(flush_together(self.client, writers)):
                    refused[j] = refused[j] or why
            for i, why in zip(gone, refused, strict=True):
                kept[i] = why is None
        return kept

    def _claim(self, candidates: list[int]) -> list[Ownership]:
        """Claim the ``candidates`` (free a moment ago): a new epoch each, then the lease if it
        is still free (epochs only need to grow, so one raised for nothing is harmless).

        Whether a claim was won is read back, not taken from the ``SET NX`` reply: a client
        that resends the pipeline after a lost reply gets "not set" for a lease it set. A
        pipeline that fails leaves its claims unsure, for the next beat to read."""
        if not candidates:
            return []
        pipe = self.client.pipeline(transaction=False)
        for index in candidates:
            pipe.incr(self.partitions[index].epoch)
        epochs = [int(e) for e in pipe.execute()]
        values = [f"{self.worker}/{epoch}" for epoch in epochs]
        pipe = self.client.pipeline(transaction=False)
        for index, value in zip(candidates, values, strict=True):
            pipe.set(self.partitions[index].lease, value, nx=True, px=self.ttl_ms)
            pipe.get(self.partitions[index].lease)
        try:
            held = pipe.execute()[1::2]
        except Exception:
            self._unsure.update(zip(candidates, values, strict=True))
            raise
        return [
            self._own(index, value)
            for index, value, lease in zip(candidates, values, held, strict=True)
            if lease == value.encode()
        ]

    def _own(self, index: int, value: str) -> Ownership:
        """Take partition ``index`` up under the lease ``value`` (``<worker>/<epoch>``)."""
        keys = self.partitions[index]
        epoch = int(value.rpartition("/")[2])
        ownership = Ownership(keys, epoch, self._writer(keys, value), value)
        self.owned[index] = ownership
        return ownership

    # -- handing over -------------------------------------------------------------------------

    def _writer(self, keys: PartitionKeys, value: str, *, numbered: bool = True) -> FencedWriter:
        return FencedWriter(
            self.client, keys, value, self.ttl_ms / 1000, numbered=numbered,
            replicas=self.replicas if numbered else 0,  # a renewal may be lost: it is renewed
        )

    def release(self, index: int, *, announce: bool = True) -> None:
        """Give partition ``index`` up: a fenced ``DEL`` of its lease and (``announce``) a
        wake-up on the ``handover`` channel. The caller flushes the owner's writes first; a
        lease already lost is left as it is."""
        ownership = self.owned[index]
        if ownership.writer.pending:
            raise ValueError(f"partition {index} has {ownership.writer.pending} unflushed writes")
        releaser = self._writer(ownership.keys, ownership.value, numbered=False)
        releaser.write("DEL", releaser.lease_key)
        # a new epoch with it: the lease is no longer one this worker may take back after a
        # lapse (the fence), so whatever of it is still running here is refused
        releaser.write("INCR", releaser.epoch_key)
        with self._lock:  # no renewal of keep_alive's may take the lease back after the DEL
            # a DEL cut short (Redis away) raises: the partition stays owned and renewed
            with contextlib.suppress(PartitionLost):
                releaser.flush()
            self.owned.pop(index, None)
        if announce:
            # a lost wake-up only delays the others' claim to their next beat; raising would
            # keep the caller serving a partition it no longer owns
            with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                self.announce()

    def keep_alive(self, every: float, bound: float = STUCK) -> Callable[[], None]:
        """Renew the owned leases every ``every`` seconds from a thread of their own, while
        the last beat is at most ``bound`` seconds old; returns what stops it. The beat rides
        on the owner's calls, which a loaded machine can hold up longer than a lease, and the
        next owner would fetch its URLs again; a worker stuck for ``bound`` gives its
        partitions up as if killed."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(every):
                # (a beat within the period renewed them all already)
                if every <= time.monotonic() - self._beaten <= bound and self.owned:
                    # Redis away: the beat says so; a partition lost is the beat's to drop
                    with self._lock, contextlib.suppress(Exception):
                        held = list(self.owned.values())
                        pipe = self.client.pipeline(transaction=False)
                        for ownership in held:
                            # (a plain GETEX, not a fenced write: one that hits a lease another
                            # worker took only extends that lease, and its reply says so)
                            pipe.getex(ownership.keys.lease, px=self.ttl_ms)
                        self._renewed(held, pipe.execute())

        threading.Thread(target=renew, name="partition-leases", daemon=True).start()
        return stop.set

    def announce(self) -> None:
        """Tell the crawl's workers that partitions were handed back (they beat and claim)."""
        self.client.publish(self.handover, b"released")

    def leave(self) -> None:
        """Release every partition (their writes flushed) and leave the members; the wake-up
        makes the others claim them at once, not after a TTL."""
        for index in list(self.owned):
            self.release(index, announce=False)
        self.client.zrem(self.members, self.worker)
        self.announce()

    def _now_ms(self) -> int:
        """Redis's clock in ms, from the server that holds the members (a cluster's nodes each
        keep their own clock: one clock for every score keeps "live" the same for all)."""
        return round(redis_time(self.client, self.members) * 1000)
