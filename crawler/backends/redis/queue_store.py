"""One partition's queues in Redis: the store of the :class:`MercatorFrontier` its owner runs.

The owner is the partition's only writer (:mod:`crawler.backends.redis.ownership`), so the
store keeps in memory what it needs to decide without asking Redis (the heads of the front
queues, the head of each back queue, every list's length, the hosts' numbers) and writes the
durable copy behind it: every change since the last :meth:`RedisQueueStore.flush` goes in one
fenced atomic call (:class:`~crawler.backends.redis.fence.FencedWriter`), so Redis holds the
state as of some flush, never half of one. The owner flushes after every call (never in the
middle of one: a batch of acknowledgements is one write), and the URL of a page is forgotten
(its ``HDEL``) in the same call as the links the page brought, or in a later one.

The seen-test asks Redis only about keys the store does not know: those it added since the
last flush, and those it knows are seen (it added them, or Redis said so: a seen-set only
grows), up to ``2 x SEEN_MEMORY`` per partition. The owner of several partitions asks about a
call's links in one round trip (:func:`prime_seen`).

Where a URL is (the keys: docs/reference/redis-keys.md): in a front queue's LIST until the
refill routes it; then in its host's back queue, the first ``BACK_BUFFER`` in memory (each also
in the HASH ``o`` under an id of this ownership), the rest in the host's LIST ``b:<host>``;
leased or handed back, still in ``o`` until acknowledged (``forget``). A new owner
(:meth:`RedisQueueStore.recover`) puts everything of ``o`` and of the ``b:`` lists back at the
head of its front queue, in the order it was routed: the frontier routes it again. The hosts'
state carries their next fetch time on Redis's clock, so politeness holds across owners.

A queued URL is :func:`crawler.backends.redis.entries.pack_entry`'s bytes under its host's
number; in a front queue without its priority (the queue's), elsewhere with it, as a recovery
moves it to a front queue unchanged. Writes are merged per flush: one ``RPUSH`` and one
``LPOP`` per list (pushes go to the tail and pops take the head, so all pushes then all pops
leave the list as the calls did in order), one ``HSET``/``HDEL`` on ``o``."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Collection, Iterator, Sequence
from itertools import chain
from typing import Any

import msgpack

from crawler.backends.redis.controls import redis_time
from crawler.backends.redis.entries import (
    is_first,
    pack_entry,
    stored_priority,
    unpack_entry,
)
from crawler.backends.redis.fence import MAX_ARGUMENTS, FencedWriter
from crawler.backends.redis.keys import PartitionKeys
from crawler.backends.redis.seenset import SeenSet, contains_across
from crawler.frontier.api import Clock, Entry
from crawler.frontier.store import QueueStore, SavedHost

READ_AHEAD = 256  # front-queue entries read per LRANGE
BACK_BUFFER = 64  # entries of a back queue held in memory; the rest wait in its list
# keys the owner knows are seen (it added them, or Redis said so), per generation of its
# memory of them: two generations of at most this many (~70 B each in Python) per partition
SEEN_MEMORY = 8_192
COUNT_EVERY = 1.0  # seconds between writes of the seen count (its INCRBY) at the least


def prime_seen(client: Any, batches: dict[RedisQueueStore, Sequence[int]]) -> None:
    """One seen-test for the seen keys (``entry_key``) of the entries about to be added to
    several partitions' stores (one round trip:
    :func:`crawler.backends.redis.seenset.contains_across`); each store keeps its answers
    (:meth:`RedisQueueStore.prime`) for its frontier's adds."""
    tests, asked = [], []  # (no comprehension: a function object and a frame each)
    for store, keys in batches.items():
        unknown = store.unknown(keys)
        if unknown:
            tests.append((store, unknown))
            asked.append((store.seen, unknown))
    if tests:
        answers = contains_across(client, asked)
        for (store, keys), seen in zip(tests, answers, strict=True):
            store.prime(keys, seen)


class RedisQueueStore(QueueStore):
    """See the module docstring. ``clock`` is the frontier's: hosts' times are saved on
    Redis's clock (``TIME`` read at :meth:`recover`) and read back on the frontier's."""

    batched_seen = True
    rebuilds_cash = False  # a takeover must not read a partition's every URL

    def __init__(
        self,
        client: Any,
        keys: PartitionKeys,
        writer: FencedWriter,
        seen: SeenSet,
        front_queues: int,
        clock: Clock,
    ) -> None:
        self.client = client
        self.keys = keys
        self.writer = writer
        self.seen = seen
        self.clock = clock
        self.front_sizes = [0] * front_queues
        self._front_keys = [keys.front(q) for q in range(front_queues)]
        # each front queue's head: entries pushed while it held the whole list, or read ahead
        # (bytes, decoded when popped)
        self._head: list[deque[Entry | bytes]] = [deque() for _ in range(front_queues)]
        self._back: dict[str, deque[Entry]] = {}
        self._overflow: dict[str, int] = {}
        self._hid: dict[str, int] = {}
        self._host_of: dict[int, str] = {}
        self._hosts: dict[str, Any] = {}  # name -> HostState (as last saved)
        self._saved: list[SavedHost] = []
        self._firsts: list[Entry] = []
        self._next_id = 1
        self._offset = 0.0  # Redis's time minus the frontier's clock
        # what the next flush writes
        self._pushes: dict[str, list[bytes]] = {}
        self._pops: dict[str, int] = {}
        self._out_set: dict[int, bytes] = {}
        self._out_del: list[int] = []
        self._dirty: set[str] = set()
        self._back_hosts: dict[str, bool] = {}  # host -> its b: list exists (SADD / SREM)
        self._new_seen: set[int] = set()
        self._primed: dict[int, bool] = {}  # seen-test answers asked ahead (:meth:`prime`)
        self._counted: int | None = None  # see :meth:`counted`
        self._count_sent = float("-inf")  # when the seen count was last queued
        self._known_seen: set[int] = set()  # see SEEN_MEMORY: the newer generation
        self._known_seen_old: set[int] = set()
        self._stale: dict[str, int] = {}  # OPIC's stale copies made (+) and met (-)
        self._pack = msgpack.Packer().pack  # (msgpack.packb makes a Packer a call)

    # -- taking the partition over -----------------------------------------------------------

    def recover(self) -> int:
        """Read the partition as the last owner left it: hosts, list lengths; everything that
        was out of the front queues goes back to their heads. Returns how many URLs that
        was."""
        k = self.keys
        # the clock of the node holding the partition (on a cluster each node has its own)
        self._offset = redis_time(self.client, k.hosts) - self.clock()
        for name, blob in self.client.hgetall(k.hosts).items():
            host = name.decode()
            hid, admitted, delay, dead, skipped, free_at, failures, bits = msgpack.unpackb(blob)
            self._number(host, hid)
            self._saved.append(
                SavedHost(
                    host,
                    admitted,
                    delay,
                    bool(dead),
                    bool(skipped),
                    free_at - self._offset if free_at else 0.0,
                    failures,
                    bits,
                )
            )
        back_hosts = sorted(m.decode() for m in self.client.smembers(k.back_hosts))
        pipe = self.client.pipeline(transaction=False)
        for q in range(len(self.front_sizes)):
            pipe.llen(k.front(q))
        pipe.hgetall(k.out)
        for host in back_hosts:
            pipe.lrange(k.back(host), 0, -1)
        replies = pipe.execute()
        count = len(self.front_sizes)
        sizes, out, lists = replies[:count], replies[count], replies[count + 1 :]
        moved: list[list[bytes]] = [[] for _ in sizes]
        gone = []
        for i in sorted(out, key=int):
            if is_first(out[i]):  # stays out, as a first request again
                entry = unpack_entry(out[i], self._host_of)
                entry.id = int(i)
                self._firsts.append(entry)
            else:
                gone.append(i)
        self._next_id = max(map(int, out), default=0) + 1
        blobs = [out[i] for i in gone]
        blobs += [b for blobs in lists for b in blobs]
        for blob in blobs:  # each with its priority (packed out of the front queues)
            moved[min(max(stored_priority(blob), 0), count - 1)].append(blob)
        for q, queued in enumerate(moved):
            self.front_sizes[q] = sizes[q] + len(queued)
            # LPUSH puts each value at the head in turn: reversed, they keep their order
            self.writer.write_many("LPUSH", k.front(q), queued[::-1])
        self.writer.write_many("HDEL", k.out, gone)
        for host in back_hosts:
            self.writer.write("DEL", k.back(host))
        if back_hosts:
            self.writer.write("DEL", k.back_hosts)
        self.writer.flush()
        return len(blobs)

    def load_hosts(self) -> list[SavedHost]:
        saved, self._saved = self._saved, []  # read once, by the frontier built over the store
        return saved

    def first_push(self, entry: Entry) -> None:
        hid = self._hid.get(entry.host) or self._number(entry.host)
        entry.id = self._next_id
        self._next_id += 1
        self._out_set[entry.id] = pack_entry(entry, hid, first=True)

    def load_firsts(self) -> list[Entry]:
        return self._firsts

    def stale_copies(self) -> dict[tuple[str | int, int], int]:
        stale: dict[tuple[str | int, int], int] = {}
        for field, n in self.client.hgetall(self.keys.stale).items():
            queue, _, name = field.decode().partition(":")
            identity: str | int = int(name[1:]) if name[0] == "i" else name[1:]
            if int(n) > 0:
                stale[(identity, int(queue))] = int(n)
        return stale

    def note_stale(self, identity: str | int, queue: int, delta: int) -> None:
        kind = "i" if isinstance(identity, int) else "s"
        field = f"{queue}:{kind}{identity}"
        self._stale[field] = self._stale.get(field, 0) + delta

    def _number(self, host: str, hid: int | None = None) -> int:
        if hid is None:
            hid = len(self._hid) + 1
            self._dirty.add(host)  # its number is written with it
        self._hid[host] = hid
        self._host_of[hid] = host
        return hid

    # -- front queues ------------------------------------------------------------------------

    def front_push(self, entry: Entry) -> None:
        hid = self._hid.get(entry.host) or self._number(entry.host)
        q = entry.priority
        head = self._head[q]
        if len(head) == self.front_sizes[q]:  # the head holds the whole list: keep it so
            head.append(entry)
        blob = pack_entry(entry, hid, queue=q)
        self._pushes.setdefault(self._front_keys[q], []).append(blob)
        self.front_sizes[q] += 1

    def front_pop(self, priority: int) -> Entry:
        head = self._head[priority]
        key = self._front_keys[priority]
        if not head:
            self.flush()
            # read ahead as they are stored, each decoded when popped: a new owner's first pop
            # of each of its queues read 256 entries and decoded them all (~10k instructions
            # each) for the few a short spell pops (8 queues x 16 partitions a takeover)
            head.extend(self.client.lrange(key, 0, READ_AHEAD - 1))
        self._pops[key] = self._pops.get(key, 0) + 1
        self.front_sizes[priority] -= 1
        entry = head.popleft()
        if type(entry) is bytes:
            return unpack_entry(entry, self._host_of, priority)
        entry.id = 0
        return entry

    # -- back queues -------------------------------------------------------------------------

    def back_push(self, host: str, entry: Entry) -> None:
        queue = self._back.get(host)
        if queue is None:
            queue = self._back[host] = deque()
        if len(queue) < BACK_BUFFER and not self._overflow.get(host):
            self._take_out(entry)
            queue.append(entry)
            return
        self._pushes.setdefault(self.keys.back(host), []).append(pack_entry(entry, self._hid[host]))
        if not self._overflow.get(host):
            self._back_hosts[host] = True
        self._overflow[host] = self._overflow.get(host, 0) + 1

    def _take_out(self, entry: Entry) -> None:
        """The entry leaves the lists for memory: it is kept in ``o`` under a new id."""
        entry.id = self._next_id
        self._next_id += 1
        self._out_set[entry.id] = pack_entry(entry, self._hid[entry.host])

    def back_pop(self, host: str) -> Entry:
        queue = self._back[host]
        if not queue:
            self._load_back(host, BACK_BUFFER)
        entry = queue.popleft()
        if not queue and not self._overflow.get(host):
            del self._back[host]
        return entry

    def _load_back(self, host: str, limit: int) -> None:
        self.flush()
        key = self.keys.back(host)
        blobs = self.client.lrange(key, 0, limit - 1)
        queue = self._back.setdefault(host, deque())
        for blob in blobs:
            entry = unpack_entry(blob, self._host_of)
            self._take_out(entry)
            queue.append(entry)
        self._pops[key] = self._pops.get(key, 0) + len(blobs)
        left = self._overflow[host] = self._overflow[host] - len(blobs)
        if not left:
            del self._overflow[host]
            self._back_hosts[host] = False

    def back_len(self, host: str) -> int:
        queue = self._back.get(host)
        return (len(queue) if queue is not None else 0) + self._overflow.get(host, 0)

    def back_drop(self, host: str) -> list[Entry]:
        if host not in self._back:
            return []
        if self._overflow.get(host):
            self._load_back(host, self._overflow[host])
        return list(self._back.pop(host))

    # -- seen-set, hosts, deletions ----------------------------------------------------------

    def seen_add(self, key: int) -> bool:
        return self.seen_add_many([key])[0]

    def seen_add_many(self, keys: Sequence[int]) -> list[bool]:
        primed, pending = self._primed, self._new_seen
        ask = set(keys).difference(primed)  # (most calls: none, prime_seen asked)
        if ask and (ask := self.unknown(list(ask))):
            self.prime(ask, self.seen.contains_many(ask))
        out = []
        for key in keys:  # primed True: seen; False: not, unless added since (pending)
            if primed[key] or key in pending:
                out.append(False)
            else:
                pending.add(key)
                out.append(True)
        return out

    def unknown(self, keys: Sequence[int]) -> list[int]:
        """The keys a seen-test must ask Redis about: neither added by this owner since its
        last flush nor known to be seen (a seen-set only grows, so what was seen stays seen;
        the memory goes with the store when the partition is dropped). The others are primed
        as seen (:meth:`prime`)."""
        ask = (given := set(keys)).difference(
            self._new_seen, self._known_seen, self._known_seen_old)  # fmt: skip
        if len(ask) < len(keys):
            self._primed.update(dict.fromkeys(given.difference(ask), True))
        return list(ask)

    def prime(self, keys: Sequence[int], answers: Sequence[bool]) -> None:
        """Answers of a seen-test asked ahead for the coming adds (a caller testing the links
        of several partitions in one round trip); kept until the next flush."""
        if len(answers) != len(keys):
            raise ValueError(f"{len(answers)} answers to {len(keys)} seen-tests")
        primed, seen = self._primed, []
        for i, key in enumerate(keys):  # (no zip: its strict= costs ~1.3k instructions a call)
            primed[key] = answer = answers[i]
            if answer:
                seen.append(key)
        if seen:
            self._remember_seen(seen)

    def _remember_seen(self, keys: Collection[int]) -> None:
        """Keys known to be seen, a batch at once (a call a key cost ~0.7k instructions):
        the newer generation becomes the older when the batch would take it past
        ``SEEN_MEMORY`` (by a batch at most)."""
        known = self._known_seen
        if len(known) + len(keys) > SEEN_MEMORY:
            self._known_seen_old, known = known, set()
            self._known_seen = known
        known.update(keys)

    def seen_count(self) -> int:
        counted, self._counted = self._counted, None
        return (self.seen.count() if counted is None else counted) + len(self._new_seen)

    def counted(self, seen: int) -> None:
        """The seen-set's count, read by the caller with others' (one round trip): the next
        :meth:`seen_count` uses it instead of asking Redis."""
        self._counted = seen

    def save_host(self, host: Any) -> None:
        self._hosts[host.name] = host
        self._dirty.add(host.name)

    def _host_record(self, name: str) -> bytes:
        hid = self._hid.get(name) or self._number(name)
        host = self._hosts.get(name)
        if host is None:
            return self._pack([hid, 0, None, 0, 0, 0.0, 0, 0])
        free_at = max(host.free_at)
        return self._pack(
            [
                hid,
                host.admitted,
                host.crawl_delay,
                int(host.dead),
                int(host.skipped),
                free_at + self._offset if free_at > self.clock() else 0.0,
                host.failures,
                host.failure_bits,
            ]
        )

    def forget(self, entry: Entry) -> None:
        if entry.id:
            if self._out_set.pop(entry.id, None) is None:
                self._out_del.append(entry.id)
            entry.id = 0

    # -- writing out -------------------------------------------------------------------------

    def flush(self) -> None:
        """Write every change since the last flush, the seen count included, in one fenced
        call (or a few, for a big batch: each is whole, and they land in order)."""
        self.stage(count=True)
        if self.writer.pending:
            self.writer.flush()

    def unstaged(self) -> int:
        """At most how many writes :meth:`stage` would queue now (without staging: changes
        staged apart are not merged, ``forget`` of an entry taken out since included)."""
        if not (self._pushes or self._pops or self._stale or self._out_set or self._out_del
                or self._dirty or self._new_seen):  # fmt: skip
            return 8  # (most partitions, most calls)
        n = len(self._pushes) + len(self._pops) + len(self._stale) + 8
        n += sum(map(len, self._pushes.values())) // MAX_ARGUMENTS
        n += (2 * (len(self._out_set) + len(self._dirty)) + len(self._out_del)) // MAX_ARGUMENTS
        return n + len(self._new_seen)  # (a bucket each at most)

    def stage(self, *, count: bool = False) -> None:
        """Queue every change since the last flush on the writer, without sending it (the
        caller adds writes that must land after these: an inbox's acknowledgements). The
        seen count goes with them with ``count``, the first time, and ``COUNT_EVERY`` s after
        the last (see ``SeenSet.queue_owed``)."""
        if self._primed:
            self._primed = {}
        if not (
            self._new_seen or self._pushes or self._pops or self._out_set or self._out_del
            or self._dirty or self._stale or self._back_hosts or count
        ):  # fmt: skip
            return  # the owner flushes every partition after every call: most have nothing
        k, w = self.keys, self.writer
        now = time.monotonic()
        count = count or now - self._count_sent >= COUNT_EVERY
        if self._new_seen:
            self.seen.queue_adds(w, list(self._new_seen))
            self._remember_seen(self._new_seen)
            self._new_seen = set()
        if count and self.seen.queue_owed(w):
            self._count_sent = now
        for key, values in self._pushes.items():
            w.write_many("RPUSH", key, values)
        for key, n in self._pops.items():
            w.write("LPOP", key, n)
        self._pushes, self._pops = {}, {}
        if self._out_set:
            w.write_many("HSET", k.out, list(chain.from_iterable(self._out_set.items())))
            self._out_set = {}
        w.write_many("HDEL", k.out, self._out_del)
        self._out_del = []
        if self._dirty:
            items = []
            for name in list(self._dirty):  # (a copy: _host_record may number a host)
                items += (name, self._host_record(name))
            w.write_many("HSET", k.hosts, items)
            self._dirty = set()
        for field, delta in self._stale.items():
            if delta:
                w.write("HINCRBY", k.stale, field, delta)
        self._stale = {}
        if self._back_hosts:
            w.write_many("SADD", k.back_hosts, [h for h, e in self._back_hosts.items() if e])
            w.write_many("SREM", k.back_hosts, [h for h, e in self._back_hosts.items() if not e])
            self._back_hosts = {}

    def close(self) -> None:
        self.flush()

    def iter_queued(self) -> Iterator[Entry]:
        self.flush()
        k = self.keys
        for q in range(len(self.front_sizes)):
            for blob in self.client.lrange(k.front(q), 0, -1):
                yield unpack_entry(blob, self._host_of, q)
        for queue in self._back.values():
            yield from queue
        for host in self._overflow:
            for blob in self.client.lrange(k.back(host), 0, -1):
                yield unpack_entry(blob, self._host_of)
