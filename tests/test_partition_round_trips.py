"""What a worker of the partition-owned Redis frontier sends Redis per call (issue 37, "Costs"):
the seen-test of a call's links is one round trip however many partitions they touch, and none
for links known to be seen; a page's links and acknowledgement in one partition are one fenced
call; the crawl's seen count is one round trip. Counted on the wire, on a real redis-server.
And what it costs the worker: each link's URL is hashed once a call."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.connection import Connection

from crawler.backends.redis import letters as letters_module
from crawler.backends.redis import mail as mail_module
from crawler.backends.redis import partitioned as partitioned_module
from crawler.backends.redis import queue_store
from crawler.backends.redis.keys import PartitionKeys
from crawler.backends.redis.partitioned import PartitionedFrontier
from crawler.frontier import store as store_module
from crawler.frontier.api import Entry, Settlement
from crawler.frontier.mercator import MercatorFrontier
from tests.frontier_contract import FakeClock, entries
from tests.redis_cluster_support import start_cluster
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_partitioned import partitioned, two_workers

SEEN_TESTS = (b"SISMEMBER", b"SMISMEMBER", b"BF.MEXISTS")


@pytest.fixture
def client(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:  # noqa: F811
    monkeypatch.setattr(partitioned_module, "BEAT", 3600.0)  # (no lease renewal is counted)
    c = redis_server.client()
    yield c
    c.close()


@contextmanager
def round_trips(
    monkeypatch: pytest.MonkeyPatch, carrying: Callable[[bytes], bool]
) -> Iterator[list[bytes]]:
    """The requests (commands sent together) that ``carrying`` picks, while the block runs."""
    sent: list[bytes] = []
    send = Connection.send_packed_command

    def counted(self: Connection, command: bytes | list[bytes], check_health: bool = True):
        data = command if isinstance(command, bytes) else b"".join(command)
        if carrying(data):
            sent.append(data)
        send(self, command, check_health)

    with monkeypatch.context() as m:
        m.setattr(Connection, "send_packed_command", counted)
        yield sent


def seen_test(data: bytes) -> bool:
    return any(name in data for name in SEEN_TESTS)


def owner_and_sender(client: redis.Redis) -> tuple[PartitionedFrontier, PartitionedFrontier]:
    """Two workers of a new 4-partition crawl: "owner" took all four (it has not beaten since
    "sender" came), "sender" owns none and mails its links."""
    key, clock = fresh_key(), FakeClock()
    owner = partitioned(client, key, clock, count=4, worker="owner")
    sender = partitioned(client, key, clock, count=4, worker="sender")
    return owner, sender


def test_a_calls_links_are_seen_tested_in_one_round_trip(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Links to four partitions, one owner: one seen-test request, not one per partition;
    the same links again: none (the owner knows they are seen)."""
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    assert len(f.parts) == 4
    links = entries(20, 2)  # 20 hosts over the 4 partitions
    assert len({f.shard(e.host) for e in links}) == 4
    with round_trips(monkeypatch, seen_test) as sent:
        assert all(r.added for r in f.add_many(links))
    assert len(sent) == 1
    with round_trips(monkeypatch, seen_test) as sent:
        assert not any(r.added for r in f.add_many(links))
    assert sent == []
    assert len(f) == len(links)


def test_letters_of_several_partitions_are_seen_tested_in_one_round_trip(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five pages' letters to each of four partitions: one seen-test request for the 20."""
    owner, sender = owner_and_sender(client)
    assert len(owner.parts) == 4 and not sender.parts  # the owner has not beaten since
    links = entries(20, 5)
    for page in range(5):  # each page links to the 20 hosts, over the 4 partitions
        sender.add_many([e for e in links if e.url.endswith(f"/{page}")])
    with round_trips(monkeypatch, seen_test) as sent:
        assert owner.read_mail() == 20
    assert len(sent) == 1
    assert len(owner) == len(links)


def test_a_pages_links_and_acknowledgement_in_one_partition_are_one_fenced_call(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = partitioned(client, fresh_key(), FakeClock(), count=1)
    f.add_many(entries(1, 1))
    lease = f.next()
    assert lease is not None
    links = [e for e in entries(1, 5) if e.url != lease.entry.url]
    keys = f.parts[0].ownership.keys
    writes = (keys.out.encode(), keys.front(0).encode())  # the page's, its links'

    def fenced(data: bytes) -> bool:
        return b"EXEC" in data and any(key in data for key in writes)

    with round_trips(monkeypatch, fenced) as sent:
        results, _ = f.apply(links, [Settlement("finish", lease.token, 0.1)])
    assert all(r.added for r in results)
    assert len(sent) == 1
    assert client.hlen(keys.out) == 0  # the page is forgotten ...
    assert client.llen(keys.front(0)) == len(links)  # ... in the call that stored its links


def test_the_crawls_seen_count_is_one_round_trip(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    f.add_many(entries(20, 2))
    counters = b":s:n" if not f.parts[0].store.seen.config.bloom else b"BF.CARD"
    with round_trips(monkeypatch, lambda data: counters in data) as sent:
        assert f.counts().seen == 40
    assert len(sent) == 1


WATCH = b"$5\r\nWATCH\r\n"


def fenced_call(data: bytes) -> bool:
    """The first request of a fenced call: its partitions' leases watched and read (its
    transaction follows, on the same connection)."""
    return WATCH in data


def test_a_calls_writes_to_several_partitions_are_one_round_trip(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Links to four partitions, one owner: their writes go in one fenced call (one
    request watches the four leases, one transaction writes), and nothing is lost."""
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    links = entries(20, 2)
    with round_trips(monkeypatch, fenced_call) as sent:
        assert all(r.added for r in f.add_many(links))
    assert len(sent) == 1 and sent[0].count(WATCH) == 1
    assert all(p.ownership.keys.lease.encode() in sent[0] for p in f.parts.values())
    assert len(f) == len(links) and len(f.parts) == 4


def test_a_partition_lost_among_several_written_together_is_mailed_alone(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four partitions written in one fenced call, one of them taken by another worker: the
    call writes nothing; the lost one's links go to its inbox, for its next owner, and the
    three others' are stored in the next call."""
    key = fresh_key()
    f = partitioned(client, key, FakeClock(), count=4)
    stolen = f.parts[2].ownership.keys
    client.set(stolen.lease, "thief/99")
    client.incr(stolen.epoch)
    links = entries(20, 2)
    with round_trips(monkeypatch, fenced_call) as sent:
        f.add_many(links)
    assert len(sent) == 2 and stolen.lease.encode() not in sent[1]
    assert sorted(f.parts) == [0, 1, 3]
    lost = [e for e in links if f.shard(e.host) == 2]
    assert lost and len(f) == len(links) - len(lost)
    assert client.xlen(f.mail._inbox(2)) == 1
    f.close()
    client.delete(stolen.lease)
    heir = partitioned(client, key, FakeClock(), count=4, worker="heir")
    assert len(heir) == len(links)


def test_a_pages_links_everywhere_and_its_acknowledgement_are_one_fenced_call(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's links to four partitions of one owner, on one server: the links of all four
    and the page's acknowledgement go in one fenced call, which writes them all or none."""
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    f.add_many(entries(1, 1))
    lease = f.next()
    assert lease is not None
    page = f.shard(lease.entry.host)
    links = [e for e in entries(20, 3) if e.url != lease.entry.url]
    out = f.parts[page].ownership.keys.out.encode()
    with round_trips(monkeypatch, lambda data: fenced_call(data) or b"EXEC" in data) as sent:
        f.apply(links, [Settlement("finish", lease.token, 0.1)])
    assert len(sent) == 2 and sent[0].count(WATCH) == 1 and out in sent[1]
    assert all(p.ownership.keys.lease.encode() in sent[0] for p in f.parts.values())
    assert client.hlen(out) == 0 and len(f) == len(links)


def test_a_pages_letters_ride_in_its_fenced_call(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers on one server: a page's links to the other worker's partitions travel
    in the fenced call that stores its own links and acknowledges it (no script of their
    own), and reach their owner once."""
    key, _clock, a, b = two_workers(client)
    assert len(a.parts) == len(b.parts) == 2
    a.add_many([e for e in entries(20, 1) if a.shard(e.host) in a.parts][:1])
    lease = a.next()
    assert lease is not None
    links = [e for e in entries(20, 3) if e.url != lease.entry.url]
    with round_trips(monkeypatch, lambda data: b"EVALSHA" in data or b"EXEC" in data) as sent:
        a.apply(links, [Settlement("finish", lease.token, 0.1)])
    assert len(sent) == 1 and b"EVALSHA" not in sent[0] and sent[0].count(b"XADD") == 2
    inboxes = [PartitionKeys(key, i, 4).inbox for i in sorted(b.parts)]
    assert [client.xlen(inbox) for inbox in inboxes] == [1, 1]
    b.read_mail()
    assert len(a) + len(b) == len(links)


def test_letters_carried_by_a_partition_found_lost_are_mailed_once(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fenced call that carries a page's letters finds the sender's partitions taken:
    nothing of it is written, and the letters still reach the other worker's inboxes, once
    (the lost partitions' own links go to their inboxes, for their next owner)."""
    key, _clock, a, b = two_workers(client)
    mine = sorted(a.parts)
    links = entries(20, 2)
    for index in mine:
        stolen = a.parts[index].ownership.keys
        client.set(stolen.lease, "thief/99")
        client.incr(stolen.epoch)
    with round_trips(monkeypatch, fenced_call) as sent:
        a.apply(links, [])
    assert len(sent) == 1 and not a.parts  # one call, refused: the letters were in it
    assert [client.xlen(PartitionKeys(key, i, 4).inbox) for i in range(4)] == [1] * 4
    b.read_mail()
    assert len(b) == len([e for e in links if b.shard(e.host) in b.parts])


def test_on_a_cluster_each_partitions_fenced_call_goes_to_its_master(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four partitions on three masters, one owner: each partition's fenced call goes to the
    master of its slot (a transaction holds one slot's keys), and nothing is lost."""
    monkeypatch.setattr(partitioned_module, "BEAT", 3600.0)  # (no lease renewal is counted)
    servers = start_cluster(tmp_path, 3, 0)
    try:
        client = servers.client()
        f = partitioned(client, fresh_key(), FakeClock(), count=4)
        nodes = {client.get_node_from_key(p.ownership.keys.lease).port for p in f.parts.values()}
        assert len(f.parts) == 4 and 1 < len(nodes) < 4
        links = entries(20, 3)
        assert all(r.added for r in f.add_many(links[:20]))
        with round_trips(monkeypatch, fenced_call) as sent:
            assert all(r.added for r in f.add_many(links[20:]))
        assert len(sent) == len(f.parts)
        assert len(f) == len(links) and len(f.parts) == 4
        f.close()
        heir = partitioned(client, f.crawl, FakeClock(), count=4, worker="heir")
        assert len(heir) == len(links)
        client.close()
    finally:
        servers.stop()


def test_the_owners_seen_count_rides_in_its_calls_now_and_then(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls that add URLs write the seen count the first time and then only every
    ``COUNT_EVERY`` s (an ``INCRBY`` in every fenced call costs Redis as much as a small
    command): the owner's count includes what it owes, and its close writes it."""
    monkeypatch.setattr(queue_store, "COUNT_EVERY", float("inf"))  # (however slow the test)
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    if f.parts[0].store.seen.config.bloom:
        pytest.skip("RedisBloom's filter counts itself (BF.CARD)")
    keys = [p.ownership.keys.seen_count for p in f.parts.values()]
    links = entries(20, 2)
    for page in range(2):
        f.add_many([e for e in links if e.url.endswith(f"/{page}")])
    assert sum(int(client.get(k) or 0) for k in keys) == 20  # the first page's
    assert f.counts().seen == 40
    f.close()
    assert sum(int(client.get(k) or 0) for k in keys) == 40


def test_a_senders_wake_ups_come_once_for_letters_sent_together(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages that mail the other worker one after another wake it once (it then reads every
    letter waiting, in one batch); the wake-up owed for the later letters goes out once
    ``WAKE_EVERY`` has passed, with the sender's next call."""
    _key, _clock, a, b = two_workers(client)
    monkeypatch.setattr(mail_module, "WAKE_EVERY", float("inf"))
    links = [e for e in entries(20, 3) if b.shard(e.host) in b.parts]
    with round_trips(monkeypatch, lambda data: b"PUBLISH" in data) as sent:
        for page in range(3):
            a.add_many([e for e in links if e.url.endswith(f"/{page}")])
    assert len(sent) == 1
    monkeypatch.setattr(mail_module, "WAKE_EVERY", 0.0)
    with round_trips(monkeypatch, lambda data: b"PUBLISH" in data) as sent:
        a.due_in()  # (a call that mails nothing)
        a.due_in()
    assert len(sent) == 1
    assert b.read_mail() == 6 and len(b) == len(links)


def test_letters_read_from_several_inboxes_are_acknowledged_in_one_fenced_call(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An owner of four partitions reads letters from all four inboxes: their links and the
    acknowledgements go in one fenced call, all or none."""
    owner, sender = owner_and_sender(client)
    links = entries(20, 2)
    for page in range(2):
        sender.add_many([e for e in links if e.url.endswith(f"/{page}")])
    with round_trips(monkeypatch, fenced_call) as sent:
        assert owner.read_mail() == 8
    assert len(sent) == 1
    assert len(owner) == len(links)
    assert [client.xlen(owner.mail._inbox(i)) for i in range(4)] == [0] * 4


@contextmanager
def hashes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The URLs hashed to their seen key (``url_key``) while the block runs (the owner's
    link intake calls it itself, ``entry_key`` inlined)."""
    hashed: list[str] = []
    url_key = store_module.url_key

    def counted(url: str) -> int:
        hashed.append(url)
        return url_key(url)

    with monkeypatch.context() as m:
        m.setattr(store_module, "url_key", counted)
        m.setattr(partitioned_module, "url_key", counted)
        m.setattr(letters_module, "url_key", counted)
        yield hashed


def test_a_pages_links_are_hashed_once_and_flushed_once(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's links to four partitions of one owner: each link's URL is hashed once (the
    seen-test asked ahead and the adds share the key), and the partitions are flushed once
    when one fenced call holds the page (no second pass over every partition)."""
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    f.add_many(entries(1, 1))
    lease = f.next()
    assert lease is not None
    links = [e for e in entries(20, 3) if e.url != lease.entry.url]
    flushes: list[int] = []
    flush = mail_module.Mailboxes.flush

    def counted(self: mail_module.Mailboxes, *args: object) -> object:
        flushes.append(1)
        return flush(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(mail_module.Mailboxes, "flush", counted)
    with hashes(monkeypatch) as hashed:
        results, _ = f.apply(links, [Settlement("finish", lease.token, 0.1)])
    assert all(r.added for r in results)
    assert sorted(hashed) == sorted(e.url for e in links)
    assert len(flushes) == 1


def test_a_call_stages_only_the_partitions_it_called(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker owning four partitions: a page whose links go to its own host stages (and
    writes) that host's partition alone, the others holding nothing to write since the last
    whole flush; a beat (which may write any) makes the next flush stage them all."""
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    monkeypatch.setattr(partitioned_module, "BEAT", math.inf)  # (no beat in between)
    f.add_many(entries(8, 2))
    lease = f.next()
    assert lease is not None and len(f.parts) == 4
    staged: list[int] = []
    stage = queue_store.RedisQueueStore.stage

    def counted(self: queue_store.RedisQueueStore, **kwargs: bool) -> None:
        staged.append(self.keys.index)
        stage(self, **kwargs)

    monkeypatch.setattr(queue_store.RedisQueueStore, "stage", counted)
    host = lease.entry.host
    links = [Entry(url=f"http://{host}/new{i}", host=host) for i in range(3)]
    results, _ = f.apply(links, [Settlement("finish", lease.token, 0.1)])
    assert all(r.added for r in results)
    assert set(staged) == {f.shard(host)}
    staged.clear()
    f.beat()
    f.settle_many([])
    assert set(staged) == set(range(4))
    staged.clear()
    f.settle_many([])
    assert staged == []


def test_letters_links_are_hashed_once(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The links of letters read from several inboxes: each URL hashed once."""
    owner, sender = owner_and_sender(client)
    links = entries(20, 2)
    sender.add_many(links)
    with hashes(monkeypatch) as hashed:
        assert owner.read_mail() == 4
    assert sorted(hashed) == sorted(e.url for e in links)
    assert len(owner) == len(links)


def test_an_inboxs_plain_letters_are_queued_in_one_pass_in_order(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Letters read from one inbox: the links of consecutive letters that carry nothing
    else go through the owner's intake together (one add_many, not one a letter); a forced
    link between them keeps its place."""
    owner, sender = owner_and_sender(client)
    host = "h0.test"
    index = owner.shard(host)
    link = [Entry(url=f"http://{host}/{i}", host=host) for i in range(5)]
    sender.add_many(link[:1])
    sender.add_many(link[1:3])
    sender.add(link[3], force=True)
    sender.add_many(link[4:])
    calls: list[tuple[str, list[str]]] = []
    add_many, add = MercatorFrontier.add_many, MercatorFrontier.add

    def counted_many(self: MercatorFrontier, batch: Any, keys: Any = ()) -> Any:
        calls.append(("add_many", [e.url for e in batch]))
        return add_many(self, batch, keys)

    def counted_add(self: MercatorFrontier, entry: Entry, **kwargs: Any) -> Any:
        if kwargs.get("force"):  # (add_many calls add for each new link: not counted)
            calls.append(("add", [entry.url]))
        return add(self, entry, **kwargs)

    monkeypatch.setattr(MercatorFrontier, "add_many", counted_many)
    monkeypatch.setattr(MercatorFrontier, "add", counted_add)
    assert owner.read_mail() == 4
    urls = [e.url for e in link]
    assert calls == [("add_many", urls[:3]), ("add", urls[3:4]), ("add_many", urls[4:])]
    assert len(owner.parts[index].frontier) == 5


def test_a_question_writes_nothing_and_its_routing_goes_with_the_next_call(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``due_in`` (asked after every batch of calls) routes front queues to back queues and
    expires leases in memory, without a fenced call of its own (a quarter of a real crawl's
    fenced calls): those changes go with the next call's writes, and Redis holds the state of
    the last write meanwhile, from which a new owner rebuilds the same."""
    key = fresh_key()
    f = partitioned(client, key, FakeClock(), count=1)
    f.add_many(entries(4, 2))
    keys = f.parts[0].ownership.keys
    assert client.hlen(keys.out) == 0  # (nothing routed yet)
    with round_trips(monkeypatch, fenced_call) as sent:
        assert f.due_in() == 0.0
    assert sent == []
    assert client.hlen(keys.out) == 0 and client.llen(keys.front(0)) == 8
    lease = f.next()
    assert lease is not None
    assert client.hlen(keys.out) == 8 and client.llen(keys.front(0)) == 0  # routed, written
    f.close()
    heir = partitioned(client, key, FakeClock(), count=1, worker="heir")
    assert len(heir) == 8  # (the lease's URL, never acknowledged, queued again)


def test_a_pages_links_ask_the_blocks_and_the_host_splitter_once_a_host(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's links mostly lead to a few hosts (its own, most of all): the operator's blocks
    and the host splitter are asked once per host of the batch, not once per link; a
    blocked host's links are refused, the others queued."""
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    links = entries(3, 5)  # 3 hosts, 5 links each
    blocked = links[0].host
    asked: list[str] = []
    split: list[str] = []
    monkeypatch.setattr(f.controls, "blocked", lambda host: asked.append(host) or host == blocked)
    shard = f.shard
    monkeypatch.setattr(f, "shard", lambda host: split.append(host) or shard(host))
    results = f.add_many(links)
    hosts = sorted({e.host for e in links})
    assert sorted(asked) == hosts
    assert sorted(split) == sorted(set(hosts) - {blocked})
    assert [r.reason for r in results if not r.added] == ["host_blocked"] * 5
    assert sum(r.added for r in results) == 10


def test_a_letter_carried_in_a_fenced_call_is_digested_once(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest that tells a letter from the last one sent to its inbox is also the
    sender's mark written with it: a page's letters are each hashed once, not once to
    compare and again to mark."""
    _key, _clock, a, _b = two_workers(client)
    a.add_many([e for e in entries(20, 1) if a.shard(e.host) in a.parts][:1])
    lease = a.next()
    assert lease is not None
    links = [e for e in entries(20, 3) if e.url != lease.entry.url]
    digested: list[bytes] = []
    blake2b = hashlib.blake2b

    def counted(data: bytes = b"", **kwargs: int) -> object:
        if kwargs.get("digest_size") == 16:
            digested.append(data)
        return blake2b(data, **kwargs)

    monkeypatch.setattr(mail_module.hashlib, "blake2b", counted)
    with round_trips(monkeypatch, lambda data: b"EVALSHA" in data) as sent:
        a.apply(links, [Settlement("finish", lease.token, 0.1)])
    assert sent == []  # (the letters rode in the page's fenced call)
    assert len(digested) == 2 and len(set(digested)) == 2  # the other worker's 2 partitions
