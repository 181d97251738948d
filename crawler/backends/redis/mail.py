"""Partition inboxes: the links and OPIC cash a worker found for hosts of a partition it does not
own, carried to that partition's owner (docs/decisions/0002-partition-owned-frontier.md).

An inbox (:attr:`crawler.backends.redis.keys.PartitionKeys.inbox`) is a Redis Stream read by
the consumer group ``owner``, one message per page and partition: a letter
(:class:`~crawler.backends.redis.letters.Letter`). A new
owner claims the letters delivered and not acknowledged (a dead owner's, its own before a lost
reply), then receives new ones, and acknowledges them in the same fenced call as the queue
writes they caused: they leave the inbox if and only if their links were queued. A letter
delivered twice is queued again by the next owner, whose seen-test drops what the first queued.

A letter is added once: a sender sends a batch whose reply was lost again, whole, and the
frontier's call that wrote it may run again and write it alike; ``lua/post.lua`` adds a letter
only when its digest differs from the last one the same sender added to that inbox (the mark
``{tag}:in:<worker>``), so its links, cash and counts travel once.

What a letter holds and its bytes: :mod:`crawler.backends.redis.letters`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence, Sized
from importlib import resources
from typing import Any

import msgpack
import redis
from redis.exceptions import AskError, NoScriptError

from crawler.backends.redis.fence import (
    MAX_ARGUMENTS,
    FencedWriter,
    PartitionLost,
    flush_together,
    is_cluster,
    node_connection,
    one_call,
    raise_reply_error,
    reread_slots,
)
from crawler.backends.redis.keys import PartitionKeys
from crawler.backends.redis.letters import Letter, deliver_all, pack_letter, unpack_letter
from crawler.backends.redis.queue_store import prime_seen

FIELD = b"l"  # a message's one field: the letter
_XADD_ID_FIELD = b"$1\r\n*\r\n$%d\r\n%b\r\n" % (len(FIELD), FIELD)  # (an XADD's, packed)
# ids per XACK/XDEL write: the group name and the ids stay within one fenced write's arguments
ACK_CHUNK = MAX_ARGUMENTS - 1
# XAUTOCLAIM calls per claim: each scans at most 10 x count pending entries (Redis's limit);
# what a claim leaves pending comes at the next
CLAIM_ROUNDS = 4
LETTERS_PER_READ = 256  # letters read from one inbox at a time
READS_PER_CALL = 8  # reads of one inbox per call at most (a backlog drains over a few calls)
POST_SOURCE = resources.files("crawler.backends.redis").joinpath("lua/post.lua").read_text()
POST_SHA = hashlib.sha1(POST_SOURCE.encode()).hexdigest()
# How long an inbox remembers the last letter a sender added (ms): a letter sent again later
# than this (an outage longer than a day) is added twice, as if it were not marked
MARK_TTL_MS = 86_400_000
_MARK_TTL = b"$2\r\nPX\r\n$%d\r\n%d\r\n" % (len(str(MARK_TTL_MS)), MARK_TTL_MS)  # (packed)
WAKE_EVERY = 0.1  # seconds between a sender's wake-ups for its letters at the least


class Mailboxes:
    """The inboxes of a crawl's partitions: senders add letters, each partition's owner reads
    them through the consumer group :attr:`GROUP`.

    The stream is never trimmed (a MAXLEN would drop letters nobody read); an acknowledged
    letter is deleted with its acknowledgement, so an inbox holds only what waits. ``client``
    returns bytes (``decode_responses`` off); a ``RedisCluster`` routes each call by the
    partition's hash tag.
    """

    GROUP = "owner"

    def __init__(
        self,
        client: redis.Redis | Any,
        partition_keys: Callable[[int], PartitionKeys],
        sender: str = "",
    ) -> None:
        self.client = client
        self.partition_keys = partition_keys
        self.sender = sender  # the sending worker: its mark in each inbox
        self._cluster = is_cluster(client)
        # letters handed to send() and not known to be in their inboxes, in order
        self._unsent: list[dict[int, bytes]] = []
        self._last: dict[int, bytes] = {}  # digest of the last letter carried, by partition
        self._carried: dict[str, int] = {}  # inbox -> partition, of the letters carried
        self._woke = float("-inf")  # when flush() last published a wake-up
        self._pack = msgpack.Packer(use_bin_type=True).pack  # (one thread: the frontier's)
        self._heads: dict[str, tuple[bytes, str, bytes]] = {}  # see carry
        self._wake_owed = False  # letters sent since

    def _inbox(self, index: int) -> str:
        return self.partition_keys(index).inbox

    @property
    def unsent(self) -> int:
        """Batches of letters whose sending failed: sent first at the next :meth:`send`."""
        return len(self._unsent)

    def send(self, letters: dict[int, bytes], wake: tuple[str, bytes] | None = None) -> None:
        """Add each letter to its partition's inbox (partition index -> packed letter) through
        ``lua/post.lua`` (once: see the module; it makes the stream if there is none yet, a
        sender need not wait for the owner), in one round trip (a cluster client's pipeline
        sends each master its part), and publish ``wake`` (channel, message) with them (on a
        cluster after them: its pipeline takes no PUBLISH). Letters whose sending fails are
        kept and sent first at the next call (``letters`` may be empty then): the caller
        hands each batch over once."""
        if letters:
            self._unsent.append(dict(letters))
        while self._unsent:
            self._post(self._unsent[0], wake)
            del self._unsent[0]

    def one_call(
        self, parts: Sequence[Any], letters: Sized = (), settlements: Sized = ()
    ) -> FencedWriter | None:
        """The writer whose fenced call can carry letters (:meth:`carry`), when the writes
        of the owned ``parts`` (each with its ``store``: those queued and those it would
        stage), of ``letters`` and of ``settlements`` to come (a few writes each) go as one
        call (:func:`~.fence.one_call`: on one server), and no letters wait to be sent
        first; else None."""
        if self._unsent:
            return None
        writers, more = [], 3 * len(letters) + (8 * len(settlements) + 64 if settlements else 0)
        for part in parts:  # (a loop: a comprehension is a function and a frame, ~1k)
            writers.append(part.store.writer)
            more += part.store.unstaged()
        return one_call(self.client, writers, more)

    def flush(
        self, parts: Sequence[Any], letters: dict[int, Letter], wake: tuple[str, bytes]
    ) -> list[PartitionLost | None]:
        """Send ``letters`` (partition index -> letter) and write the owned ``parts``' changes
        (:func:`crawler.backends.redis.fence.flush_together`): the letters in the parts'
        fenced call when it is one (:meth:`carry`), else first, on their own (:meth:`send`),
        with ``wake`` (the owners read their inboxes now). A letter the same as the last one
        handed over for its inbox goes no more: the call that wrote it ran again (the
        frontier's guard retries it whole), and the first is sent, or waits in a call to be
        sent again. Returns, per part, the refusal of a partition found lost, or None."""
        packed, digests = {}, {}
        for index, letter in letters.items():
            blob = pack_letter(letter, self._pack)
            digest = hashlib.blake2b(blob, digest_size=16).digest()
            if self._last.get(index) != digest:  # (else: the call that wrote it ran again)
                self._last[index] = digests[index] = digest
                packed[index] = blob
        for part in parts:
            part.store.stage()
        carrier = self.one_call(parts, packed) if packed else None
        now = self._wake(wake, bool(packed))
        if carrier is not None:
            self.carry(carrier, packed, now, digests)
        elif packed or self._unsent:  # kept until sent: the next call sends them then
            self.send(packed, wake=now)
        elif now is not None:  # (owed for letters sent before)
            self.client.publish(*now)
        return flush_together(self.client, [part.store.writer for part in parts])

    def _wake(self, wake: tuple[str, bytes], sending: bool) -> tuple[str, bytes] | None:
        """``wake`` if it is to be published now: letters were sent since the last one, which
        went ``WAKE_EVERY`` s ago or more. An owner woken reads every letter waiting, so one
        wake-up per sender and ``WAKE_EVERY`` makes it read letters in batches (each read
        and acknowledgement costs Redis as much as a few letters); a letter waits that much
        longer at most, or until its owner's next beat if its sender makes no call."""
        self._wake_owed |= sending
        now = time.monotonic()
        if not self._wake_owed or now - self._woke < WAKE_EVERY:
            return None
        self._wake_owed, self._woke = False, now
        return wake

    def carry(
        self,
        writer: FencedWriter,
        letters: dict[int, bytes],
        wake: tuple[str, bytes] | None,
        digests: dict[int, bytes],
    ) -> None:
        """Queue ``letters`` on ``writer``, an owned partition's (on one server, where a
        fenced call may write another partition's inbox): each lands in the same atomic,
        numbered call as the writes of the page that found its links (a call sent again is
        applied once), with the sender's mark (a letter :meth:`rescue` sends again through
        ``lua/post.lua`` after all is added once), then ``wake`` is published (if any).
        ``digests``: the letters' digests, as :meth:`flush` compared them."""
        for index, blob in letters.items():
            digest = digests[index]
            inbox = self._inbox(index)
            self._carried[inbox] = index
            # XADD <inbox> * l <letter>, SET <mark> <digest> PX <ttl>, from heads packed once
            if (heads := self._heads.get(inbox)) is None:  # (pack_command: ~7k instructions)
                box, mark = inbox.encode(), f"{inbox}:{self.sender}".encode()
                xadd = b"*5\r\n$4\r\nXADD\r\n$%d\r\n%b\r\n%b" % (len(box), box, _XADD_ID_FIELD)
                put = b"*5\r\n$3\r\nSET\r\n$%d\r\n%b\r\n" % (len(mark), mark)
                heads = self._heads[inbox] = (xadd, mark.decode(), put)
            xadd, mark_key, set_head = heads
            writer.write_packed("XADD", inbox, b"%b$%d\r\n%b\r\n" % (xadd, len(blob), blob))
            request = b"%b$%d\r\n%b\r\n%b" % (set_head, len(digest), digest, _MARK_TTL)
            writer.write_packed("SET", mark_key, request)
        if letters and wake is not None:
            writer.write("PUBLISH", *wake)

    def rescue(self, writer: FencedWriter) -> None:
        """Discard the writes of ``writer``, whose partition was lost, but not the letters
        it carried (:meth:`carry`) that are not known to be written: they are sent at the
        next :meth:`send` (``lua/post.lua`` finds those that were, by the sender's mark)."""
        writer.discard()
        letters = {  # (a packed XADD's last argument: after its head and the length's line)
            self._carried[key]: args[args.index(b"\r\n", len(self._heads[key][0])) + 2 : -2]
            for command, key, args in writer.dropped if command == "XADD" and key in self._carried
        }  # fmt: skip
        writer.dropped = []
        if letters:
            self._unsent.append(letters)

    def _post(self, letters: dict[int, bytes], wake: tuple[str, bytes] | None) -> None:
        """One batch: each letter through ``lua/post.lua``, with the inbox's mark of this
        sender. A cluster client's pipeline takes no script: there each master holding an
        inbox gets its letters in a pipeline of its own, one round trip each."""
        calls = []
        for index, blob in letters.items():
            inbox = self._inbox(index)
            digest = hashlib.blake2b(blob, digest_size=16).digest()
            calls.append((inbox, f"{inbox}:{self.sender}", digest, blob))
        if not self._cluster:
            if self._run(self.client, calls, wake):
                raise redis.ResponseError("MOVED from a Redis that is no cluster")
            return
        by_node: dict[str, tuple[Any, list[tuple[str, str, bytes, bytes]]]] = {}
        for call in calls:
            node = self.client.get_node_from_key(call[0])
            by_node.setdefault(node.name, (node, []))[1].append(call)
        for node, part in by_node.values():
            try:
                moved = self._run(self.client.get_redis_connection(node), part, None)
            except (redis.ConnectionError, redis.TimeoutError):
                # the master died: the client's map of slots still names it, and nothing
                # routed through the client need correct it (a worker that owns no partition
                # there): read the map again, so the batch, sent again, finds the promoted one
                reread_slots(self.client)
                raise
            for call in moved:  # one by one: the cluster client follows MOVED and ASK
                self._redirected(call)
        if wake is not None:
            self.client.publish(*wake)

    def _redirected(self, call: tuple[str, str, bytes, bytes]) -> None:
        """A letter whose slot moves (a reshard): the cluster client sends it where the slot
        is now, or is moving to (``ASKING``), loading the script on every master if that
        node lacks it."""
        inbox, mark, digest, blob = call
        for attempt in range(2):
            try:
                self.client.evalsha(POST_SHA, 2, inbox, mark, digest, MARK_TTL_MS, FIELD, blob)
                return
            except NoScriptError:
                if attempt:
                    raise
                self.client.script_load(POST_SOURCE)

    def _run(
        self,
        server: redis.Redis,
        calls: list[tuple[str, str, bytes, bytes]],
        wake: tuple[str, bytes] | None,
    ) -> list[tuple[str, str, bytes, bytes]]:
        """The ``calls`` (inbox, mark, digest, letter) on one server in one pipeline, the
        script loaded first if the server lacks it (the batch then goes again: it adds once).
        Returns the calls refused with ``MOVED`` or ``ASK`` (a cluster's slot moving)."""
        for _ in range(2):
            pipe = server.pipeline(transaction=False)
            for inbox, mark, digest, blob in calls:
                pipe.evalsha(POST_SHA, 2, inbox, mark, digest, MARK_TTL_MS, FIELD, blob)
            if wake is not None:
                pipe.publish(*wake)
            replies = pipe.execute(raise_on_error=False)
            failed = [r for r in replies if isinstance(r, Exception)]
            if not any(isinstance(r, NoScriptError) for r in failed):
                break
            server.script_load(POST_SOURCE)
        if any(not isinstance(r, AskError) for r in failed):  # MOVED is an AskError too
            raise next(r for r in failed if not isinstance(r, AskError))
        return [c for c, r in zip(calls, replies, strict=False) if isinstance(r, AskError)]

    def open(self, index: int) -> None:
        """Make sure the partition's inbox has the group :attr:`GROUP` (a new owner calls this
        before its first :meth:`receive`). A new group starts at the stream's first message,
        not at its end (``$``): letters sent before any owner opened the inbox are delivered
        too. An existing group is kept, with what it delivered and nobody acknowledged."""
        try:
            self.client.xgroup_create(self._inbox(index), self.GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if not str(exc).startswith("BUSYGROUP"):
                raise

    def claim(
        self, index: int, consumer: str, count: int = 64
    ) -> tuple[list[tuple[bytes, bytes]], bool]:
        """Up to ``count`` letters the group delivered and nobody acknowledged, whoever they
        went to (an owner before this one, or this one before a lost reply), as (message id,
        letter bytes), and whether none is left: XAUTOCLAIM with no minimum idle time moves
        them to ``consumer``. There is one owner at a time, so nothing pending belongs to a
        live reader. A new owner calls it (until none is left) before :meth:`receive`."""
        key = self._inbox(index)
        out: list[tuple[bytes, bytes]] = []
        start: bytes | str = "0-0"
        for _ in range(CLAIM_ROUNDS):
            reply = self.client.xautoclaim(
                key, self.GROUP, consumer, 0, start_id=start, count=max(1, count - len(out))
            )
            start = reply[0]
            for message_id, fields in reply[1]:
                if fields and FIELD in fields:
                    out.append((message_id, fields[FIELD]))
            if start in (b"0-0", "0-0"):
                return out, True
            if len(out) >= count:
                break
        return out, False

    def receive(
        self, indexes: Sequence[int], consumer: str, count: int = 64
    ) -> dict[int, list[tuple[bytes, bytes]]]:
        """Up to ``count`` new letters of each inbox of ``indexes`` for ``consumer`` (the
        owner), as (message id, letter bytes) by partition: one XREADGROUP over every inbox
        on one server; on a cluster, where the streams of one command must share a slot and
        each partition has its own, one XREADGROUP per inbox, each master its own in one
        request. Never blocks.

        Sent once (:class:`~.fence.node_connection`): a read whose reply was lost delivered
        its letters all the same, and a read sent again gets only those after them, leaving
        these pending where nobody reads them while this worker owns the partition (the
        crawl's client on one Redis resends once, a cluster's client more). The lost reply
        is raised here, and :meth:`read` claims what is pending first at the next read; a
        refusal is raised, a slot that moved as ``TryAgainError``."""
        out: dict[int, list[tuple[bytes, bytes]]] = {}
        if not indexes or count <= 0:
            return out
        inboxes = {self._inbox(index): index for index in indexes}
        head = ("XREADGROUP", "GROUP", self.GROUP, consumer, "COUNT", count, "STREAMS")
        by_node: dict[str, tuple[Any, list[tuple[Any, ...]]]] = {}
        if self._cluster:
            for key in inboxes:
                node = self.client.get_node_from_key(key)
                by_node.setdefault(node.name, (node, []))[1].append((*head, key, ">"))
        else:
            by_node[""] = (None, [(*head, *inboxes, *[">"] * len(inboxes))])
        for node, commands in by_node.values():
            with node_connection(self.client, node) as conn:
                replies = conn.run(commands)
            raise_reply_error(self.client, replies)
            for reply in replies:
                streams = reply.items() if isinstance(reply, dict) else reply or ()  # (RESP3, 2)
                for key, messages in streams:
                    name = key.decode() if isinstance(key, bytes) else key
                    got = out.setdefault(inboxes[name], [])
                    for message_id, fields in messages:
                        letter = dict(zip(fields[::2], fields[1::2], strict=True)).get(FIELD)
                        if letter is not None:
                            got.append((message_id, letter))
        return out

    def deliver(
        self,
        parts: dict[int, Any],
        consumer: str,
        drop: Callable[[int, str], None],
    ) -> int:
        """Queue the letters waiting in the inboxes of ``parts`` (the owned partitions, by
        index: each with its ``store``, ``frontier`` and ``ownership.writer``) into their
        frontiers, with one seen-test for them all, and acknowledge each inbox's letters in
        the fenced call that writes the queue changes they caused (``drop(index, why)``
        drops a partition found lost). Every inbox is read at once (a partition just taken up
        claims what was left pending first); a full one is read again, up to
        ``READS_PER_CALL`` times. Returns how many letters were read."""
        read = 0
        waiting = list(parts.values())
        for _ in range(READS_PER_CALL):
            if not waiting:
                break
            letters = self.read(waiting, consumer, LETTERS_PER_READ)
            keys: dict[int, list[list[int]]] = {}  # each link's seen key, hashed once
            tests: dict[Any, list[int]] = {}  # a store's keys to seen-test (not forced)
            for i, pairs in letters.items():
                ks, test = keys.setdefault(i, []), tests.setdefault(parts[i].store, [])
                for _, lt in pairs:  # (no zip: its strict= costs ~1.3k instructions a letter)
                    lk, unforced = lt.seen_keys()
                    ks.append(lk)
                    test += unforced
            prime_seen(self.client, tests)  # one seen-test for every letter (one round trip)
            for index, pairs in letters.items():
                part = parts[index]
                deliver_all(part.frontier, [letter for _, letter in pairs], keys[index])
                part.store.stage()  # the queue writes the letters caused land first
                self.acknowledge(part.ownership.writer, index, [m for m, _ in pairs])
            written = [parts[i] for i in letters]
            while written:  # (in one fenced call on one server: flush_together)
                lost = flush_together(self.client, [p.ownership.writer for p in written])
                for part, refused in zip(written, lost, strict=True):
                    if refused is not None:
                        drop(part.index, refused.why)
                written = [p for p, r in zip(written, lost, strict=True)
                           if r is None and p.ownership.writer.pending]  # fmt: skip
            read += sum(len(pairs) for pairs in letters.values())
            waiting = [
                p for p in waiting if p.index in parts
                and (p.claiming or len(letters.get(p.index, ())) >= LETTERS_PER_READ)
            ]  # fmt: skip
        return read

    def read(
        self, inboxes: Sequence[Any], consumer: str, count: int
    ) -> dict[int, list[tuple[bytes, Letter]]]:
        """The letters of the owner ``consumer``'s inboxes (partitions, each with its ``index``
        and ``claiming``: whether letters left pending there, by an earlier owner or a read
        whose reply was lost, are claimed first), (message id, letter) by partition: up to
        ``count`` letters left pending in each inbox ``claiming`` (:meth:`claim`, one
        call each: a new owner's), then up to ``count`` new letters of every inbox with none
        left pending (:meth:`receive`: one round trip). A read that fails leaves every inbox
        claiming."""
        got: dict[int, list[tuple[bytes, bytes]]] = {}
        try:
            for inbox in inboxes:
                if inbox.claiming:
                    got[inbox.index], done = self.claim(inbox.index, consumer, count)
                    inbox.claiming = not done
            new = [i.index for i in inboxes if not i.claiming]
            for index, letters in self.receive(new, consumer, count).items():
                got[index] = got.get(index, []) + letters
        except BaseException:  # its letters may be pending here, their reply lost
            for inbox in inboxes:
                inbox.claiming = True
            raise
        return {i: [(m, unpack_letter(blob)) for m, blob in ms] for i, ms in got.items() if ms}

    def acknowledge(self, writer: FencedWriter, index: int, ids: Sequence[bytes]) -> None:
        """Queue the acknowledgement and deletion of the letters ``ids`` on ``writer``, the
        partition owner's: they are applied at its next flush, in the same fenced atomic call
        as the queue writes the letters caused. Either both land or, the partition lost,
        neither: the letters stay pending for the next owner. Call it after queueing those
        writes: a flush too large for one call is applied call by call, in order, so the
        letters are acknowledged only once what they caused is written (a redelivery of what
        was written finds its URLs in the seen-set)."""
        key = self._inbox(index)
        for i in range(0, len(ids), ACK_CHUNK):
            chunk = ids[i : i + ACK_CHUNK]
            writer.write("XACK", key, self.GROUP, *chunk)
            writer.write("XDEL", key, *chunk)

    def backlog(self, index: int) -> int:
        """Letters in the partition's inbox: waiting, or read and not yet acknowledged."""
        return int(self.client.xlen(self._inbox(index)))
