"""Partition inboxes (``crawler.backends.redis.mail``): a letter comes out as it went in, every
letter sent reaches the partition's owner (those sent before it opened the inbox too, those a
dead owner read and never acknowledged too), and a letter leaves the inbox only in the owner's
fenced call: an owner that lost its partition acknowledges nothing. On a real Redis, and one
test on a real Redis Cluster."""

from __future__ import annotations

from collections.abc import Callable

import hiredis
import msgpack
import pytest
import redis

from crawler.backends.redis.fence import FencedWriter, PartitionLost
from crawler.backends.redis.keys import PartitionKeys, key_slot
from crawler.backends.redis.mail import Letter, Mailboxes, pack_letter, unpack_letter
from crawler.frontier.api import SEED, Entry
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import fresh_key, redis_client, redis_server  # noqa: F401

PARTITIONS = 4


def partitions(crawl: str, count: int = PARTITIONS) -> Callable[[int], PartitionKeys]:
    return lambda index: PartitionKeys(crawl, index, count)


def owned(client: redis.Redis, keys: PartitionKeys, worker: str = "w1/1") -> FencedWriter:
    """A writer of the partition's owner: the lease is ``worker``'s."""
    client.set(keys.lease, worker)
    return FencedWriter(client, keys, worker, 60.0)


def letter_of(*urls: str, cash: float = 0.0) -> Letter:
    return Letter(adds=[(Entry(url, url.split("/")[2], cash=cash), False, False) for url in urls])


def urls_of(blob: bytes) -> list[str]:
    return [entry.url for entry, _, _ in unpack_letter(blob).adds]


def every_field() -> Letter:
    """Links with every field an Entry carries (but the store's row id) and every flag."""
    page = "https://docs.example.org/nodejs/api/index.html"
    seed = Entry("https://docs.example.org/", "docs.example.org", 1, 0, SEED)
    linked = Entry(
        "https://docs.example.org/nodejs/api/child_process.html", "docs.example.org",
        priority=3, depth=2, cash=0.125, policy="docs", referrer=page, key=-(2**63),
    )  # fmt: skip
    foreign = Entry(
        "http://other.example.net/r\u00e9sum\u00e9/\u65e5\u672c?q=1", "other.example.net",
        priority=7, depth=100_000, payload=b"\x80\x00 bytes", cash=0.125, referrer=page,
        key=2**63 - 1,
    )  # fmt: skip
    first = Entry(
        "https://other.example.net:8443/robots.txt", "other.example.net", priority=0,
        depth=1, payload={"meta": {"k": [1, 2.5, "v"]}}, cash=1e-300, policy="news",
    )  # fmt: skip
    return Letter(
        adds=[(seed, False, False), (linked, True, False), (foreign, False, True),
              (first, True, True)],
        credits=[
            (1234567890123, 0.125, ""),
            ("https://docs.example.org/seen.html", 0.125, "docs"),
            (-5, 0.0, "feeds"),
        ],
    )  # fmt: skip


def test_a_letter_comes_back_as_it_went_in():
    letter = every_field()
    assert unpack_letter(pack_letter(letter)) == letter
    assert unpack_letter(pack_letter(Letter())) == Letter()


def test_a_links_priority_travels_as_the_owner_queues_it():
    """Clamped to the front queues, as the owner's frontier would (in the tag: an entry of
    the depth order stores no depth then)."""
    links = [Entry(f"https://d.test/{p}", "d.test", p, 3) for p in (-2, 0, 3, 7, 300)]
    back = unpack_letter(pack_letter(Letter(adds=[(e, False, False) for e in links])))
    assert [e.priority for e, _, _ in back.adds] == [0, 0, 3, 7, 7]
    assert [e.depth for e, _, _ in back.adds] == [3] * 5


def test_a_letter_is_msgpack_and_one_cash_a_page():
    """Data, not pickle; the cash a page hands each of its links is stored once; a link costs
    little more than its packed entry."""
    blob = pack_letter(letter_of(*[f"https://a.example/{i}.html" for i in range(50)], cash=0.02))
    hosts, policies, referrers, adds, credits = msgpack.unpackb(blob)
    assert len(hosts) == 1 and policies == [""] and referrers == [""] and credits == []
    assert adds[2::3] == [0.02] + [None] * 49
    # a link costs its packed entry and 4 bytes: bin8 header (2), tag, nil cash
    assert len(blob) - sum(len(entry) for entry in adds[0::3]) <= 50 * 4 + 40


def test_a_negative_priority_travels_as_the_owner_would_clamp_it():
    letter = Letter(adds=[(Entry("https://a.example/x", "a.example", -3), False, False)])
    assert unpack_letter(pack_letter(letter)).adds[0][0].priority == 0


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\x93\x01\x02\x03",
        msgpack.packb(["a", [], [b"", 9, 0]]),
        msgpack.packb([[b"\x01"], [""], [b"\x01"], [b"\x00\x00", 4, None], []]),  # no host 1
        msgpack.packb([[b"\x01"], [], [], [b"\x00\x00", 0, None], []]),
        msgpack.packb([[b"\x01"], [""], [""], [b"\x00\x00", -4, None], []]),  # index -1
    ],
)
def test_bytes_that_are_no_letter_are_refused(blob: bytes):
    with pytest.raises(ValueError):
        unpack_letter(blob)


def test_letters_round_trip_through_an_inbox(redis_client: redis.Redis):  # noqa: F811
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    boxes.open(2)
    boxes.send({2: pack_letter(every_field())})
    [(_, blob)] = boxes.receive([2], "w1")[2]
    assert unpack_letter(blob) == every_field()
    assert boxes.receive([2], "w1", count=0) == {}
    assert boxes.receive([2], "w1") == {}


def test_letters_sent_before_the_inbox_was_opened_are_received(redis_client: redis.Redis):  # noqa: F811
    """A sender need not wait for the owner: XADD makes the stream, and the group opened later
    starts at its first letter (with ``$`` it would start after them: lost mail)."""
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    boxes.send({1: pack_letter(letter_of("https://a.example/early"))})
    boxes.open(1)
    boxes.open(1)  # idempotent: the group is kept
    boxes.send({1: pack_letter(letter_of("https://a.example/late"))})
    received = boxes.receive([1], "w1")[1]
    assert [urls_of(blob) for _, blob in received] == [
        ["https://a.example/early"],
        ["https://a.example/late"],
    ]


def test_send_to_three_partitions_in_one_call(redis_client: redis.Redis):  # noqa: F811
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    boxes.send({i: pack_letter(letter_of(f"https://h{i}.example/")) for i in (0, 1, 3)})
    boxes.send({})
    assert [boxes.backlog(i) for i in range(PARTITIONS)] == [1, 1, 0, 1]
    for i in (0, 1, 3):
        boxes.open(i)
        [(_, blob)] = boxes.receive([i], "w1")[i]
        assert urls_of(blob) == [f"https://h{i}.example/"]


def test_every_inbox_of_an_owner_is_read_in_one_command(redis_client: redis.Redis):  # noqa: F811
    """One XREADGROUP over the streams of all the owner's inboxes, not one per inbox."""
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    for i in range(PARTITIONS):
        boxes.open(i)
    boxes.send({i: pack_letter(letter_of(f"https://h{i}.example/")) for i in (0, 2, 3)})
    calls = redis_client.info("commandstats").get("cmdstat_xreadgroup", {}).get("calls", 0)
    got = boxes.receive(list(range(PARTITIONS)), "w1")
    assert {i: [urls_of(blob) for _, blob in got[i]] for i in got} == {
        i: [[f"https://h{i}.example/"]] for i in (0, 2, 3)
    }
    assert redis_client.info("commandstats")["cmdstat_xreadgroup"]["calls"] == calls + 1


class _Inbox:
    def __init__(self, index: int, claiming: bool = True) -> None:
        self.index, self.claiming = index, claiming


def test_an_owner_claims_what_was_left_pending_once_then_reads_new_letters(
    redis_client: redis.Redis,  # noqa: F811
):
    """``read`` claims an inbox's pending letters while it is claiming (a partition just
    taken up), with its new letters; then only new letters: no XAUTOCLAIM at every read."""
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    boxes.open(0)
    boxes.open(1)
    boxes.send({0: pack_letter(letter_of("https://a.example/left"))})
    boxes.receive([0], "dead")  # read by an owner that died before acknowledging
    boxes.send({0: pack_letter(letter_of("https://a.example/new"))})
    inboxes = [_Inbox(0), _Inbox(1)]
    got = boxes.read(inboxes, "heir", 64)
    assert [[e.url for e, _, _ in letter.adds] for _, letter in got[0]] == [
        ["https://a.example/left"], ["https://a.example/new"],
    ]  # fmt: skip
    assert [inbox.claiming for inbox in inboxes] == [False, False]
    claims = redis_client.info("commandstats")["cmdstat_xautoclaim"]["calls"]
    assert boxes.read(inboxes, "heir", 64) == {}
    assert redis_client.info("commandstats")["cmdstat_xautoclaim"]["calls"] == claims


def test_a_failed_read_claims_at_the_next(redis_client: redis.Redis, monkeypatch):  # noqa: F811
    """A read whose reply was lost may have left letters pending to this owner: the next read
    claims them."""
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    boxes.open(0)
    boxes.send({0: pack_letter(letter_of("https://a.example/x"))})
    inboxes = [_Inbox(0, claiming=False)]
    receive = boxes.receive

    def lost_reply(*args, **kwargs):
        receive(*args, **kwargs)  # the server delivered them to this consumer
        raise redis.ConnectionError("connection lost")

    monkeypatch.setattr(boxes, "receive", lost_reply)
    with pytest.raises(redis.ConnectionError):
        boxes.read(inboxes, "w1", 64)
    monkeypatch.undo()
    assert inboxes[0].claiming
    [(_, letter)] = boxes.read(inboxes, "w1", 64)[0]
    assert [e.url for e, _, _ in letter.adds] == ["https://a.example/x"]


def test_a_letter_never_acknowledged_goes_to_the_next_owner(redis_client: redis.Redis):  # noqa: F811
    """The first owner read three letters and died; its successor (another consumer) claims
    them, in the order sent, then receives the new one; its own unacknowledged ones are
    claimed again too (a claim takes every pending letter)."""
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    boxes.open(0)
    for i in range(3):
        boxes.send({0: pack_letter(letter_of(f"https://a.example/{i}"))})
    first = boxes.receive([0], "dead")[0]
    assert len(first) == 3
    boxes.send({0: pack_letter(letter_of("https://a.example/new"))})
    assert boxes.claim(0, "next", count=2) == (first[:2], False)
    assert boxes.claim(0, "next", count=10) == (first, True)
    [new] = boxes.receive([0], "next")[0]
    assert urls_of(new[1]) == ["https://a.example/new"]
    assert boxes.claim(0, "next") == ([*first, new], True)
    pending = redis_client.xpending(boxes.partition_keys(0).inbox, Mailboxes.GROUP)
    assert pending["pending"] == 4 and {c["name"] for c in pending["consumers"]} == {b"next"}


def test_acknowledged_letters_are_gone(redis_client: redis.Redis):  # noqa: F811
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    keys = boxes.partition_keys(3)
    boxes.open(3)
    for i in range(5):
        boxes.send({3: pack_letter(letter_of(f"https://a.example/{i}"))})
    received = boxes.receive([3], "w1")[3]
    writer = owned(redis_client, keys)
    writer.write("RPUSH", keys.front(0), *[blob for _, blob in received])  # what they caused
    boxes.acknowledge(writer, 3, [message_id for message_id, _ in received])
    writer.flush()
    assert boxes.backlog(3) == 0
    assert redis_client.xpending(keys.inbox, Mailboxes.GROUP)["pending"] == 0
    assert redis_client.llen(keys.front(0)) == 5
    assert boxes.receive([3], "w1") == {}
    boxes.open(3)  # a new owner's open keeps the group (and its position): nothing again
    assert boxes.claim(3, "w2") == ([], True)
    assert boxes.receive([3], "w2") == {}


def test_an_owner_that_lost_its_partition_acknowledges_nothing(redis_client: redis.Redis):  # noqa: F811
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    keys = boxes.partition_keys(1)
    boxes.open(1)
    boxes.send({1: pack_letter(letter_of("https://a.example/a", "https://a.example/b"))})
    received = boxes.receive([1], "w1")[1]
    writer = owned(redis_client, keys, "w1/1")
    redis_client.set(keys.lease, "w2/2")  # w1 stalled past its lease; w2 owns the partition
    writer.write("RPUSH", keys.front(0), received[0][1])
    boxes.acknowledge(writer, 1, [message_id for message_id, _ in received])
    with pytest.raises(PartitionLost):
        writer.flush()
    assert redis_client.llen(keys.front(0)) == 0
    assert boxes.backlog(1) == 1
    assert redis_client.xpending(keys.inbox, Mailboxes.GROUP)["pending"] == 1
    assert boxes.claim(1, "w2") == (received, True)  # the new owner gets them


def test_many_letters_acknowledged_in_one_flush(redis_client: redis.Redis):  # noqa: F811
    """More ids than one fenced write takes: split into several XACK/XDEL writes."""
    boxes = Mailboxes(redis_client, partitions(fresh_key()))
    keys = boxes.partition_keys(0)
    boxes.open(0)
    blob = pack_letter(letter_of("https://a.example/x"))
    pipe = redis_client.pipeline(transaction=False)
    for _ in range(5000):
        pipe.xadd(keys.inbox, {b"l": blob})
    pipe.execute()
    received = boxes.receive([0], "w1", count=6000)[0]
    assert len(received) == 5000
    writer = owned(redis_client, keys)
    boxes.acknowledge(writer, 0, [message_id for message_id, _ in received])
    writer.flush()
    assert boxes.backlog(0) == 0
    assert redis_client.xpending(keys.inbox, Mailboxes.GROUP)["pending"] == 0


def test_inboxes_on_a_redis_cluster(redis_cluster: RedisClusterServers):  # noqa: F811
    """Three partitions on three masters: one send reaches all three (with its wake-up), one
    read receives all three, each owner acknowledges through its fenced writer on the cluster
    client."""
    client = redis_cluster.client()
    try:
        crawl = fresh_key()
        boxes = Mailboxes(client, partitions(crawl, 3))
        nodes = {client.get_node_from_key(boxes.partition_keys(i).inbox).name for i in range(3)}
        assert len(nodes) == 3
        assert len({key_slot(boxes.partition_keys(i).tag.encode()) for i in range(3)}) == 3
        boxes.open(0)
        boxes.send(
            {i: pack_letter(letter_of(f"https://h{i}.example/", cash=0.5)) for i in range(3)},
            wake=(f"{crawl}:wake", b"mail"),
        )
        for i in range(3):
            boxes.open(i)
        got = boxes.receive([0, 1, 2], "w")  # one XREADGROUP per node, in one pipeline
        assert sorted(got) == [0, 1, 2]
        for i in range(3):
            keys = boxes.partition_keys(i)
            received = got[i]
            assert [urls_of(blob) for _, blob in received] == [[f"https://h{i}.example/"]]
            writer = owned(client, keys)  # type: ignore[arg-type]
            writer.write("RPUSH", keys.front(0), received[0][1])
            boxes.acknowledge(writer, i, [message_id for message_id, _ in received])
            writer.flush()
            assert boxes.backlog(i) == 0
            assert client.llen(keys.front(0)) == 1
    finally:
        client.close()


def test_a_letters_entries_are_packed_without_copies(monkeypatch: pytest.MonkeyPatch):
    """Each link is packed as it is (no copy of the entry per link: a copy cost more than
    its packing): its bytes are those of the entry without its referrer, cash and policy,
    its priority clamped, as the letter keeps them in its tables and tag."""
    import dataclasses

    from crawler.backends.redis import mail
    from crawler.backends.redis.entries import pack_entry

    copies: list[Entry] = []
    monkeypatch.setattr(mail, "replace", lambda e, **kw: copies.append(e), raising=False)
    letter = every_field()
    letter.adds.append((Entry("https://d.test/a", "d.test", 300, 3, referrer="https://x/"),
                        False, False))  # fmt: skip
    adds = msgpack.unpackb(pack_letter(letter))[3]
    assert copies == []
    hosts = {"docs.example.org": 0, "other.example.net": 1, "d.test": 2}
    for (entry, _, _), packed in zip(letter.adds, adds[0::3], strict=True):
        priority = min(max(entry.priority, 0), 7)
        alone = dataclasses.replace(entry, referrer="", priority=priority)
        assert packed == pack_entry(alone, hosts[entry.host], queue=priority, letter=True)


def test_a_letter_carries_its_urls_as_text():
    """Host names, referrers and URL tails go uncoded: a letter lives seconds in its inbox,
    where coding them cost its sender and its owner more than their bytes are worth."""
    link = Entry("https://d.test/docs/a.html", "d.test", 1, 1, referrer="https://x.test/p")
    hosts, _, referrers, adds, _ = msgpack.unpackb(
        pack_letter(Letter([(link, False, False)], [])), raw=False
    )
    assert hosts == ["d.test"] and referrers == ["https://x.test/p"]
    assert adds[0].endswith(b"docs/a.html")
    ((entry, _, _),) = unpack_letter(pack_letter(Letter([(link, False, False)], []))).adds
    assert (entry.url, entry.host, entry.referrer) == (link.url, link.host, link.referrer)


def test_a_carried_letters_writes_are_packed_as_hiredis_packs_them(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """A letter carried by a fenced call: its XADD and its mark SET, packed from heads kept
    per inbox, are byte for byte what ``hiredis.pack_command`` packs; they land, and a
    rescue of the writer (its partition lost) still finds the letter to send again."""
    crawl = fresh_key()
    keys = partitions(crawl)
    boxes = Mailboxes(redis_client, keys, "w1")
    blob = pack_letter(letter_of("https://a.example/1", "https://a.example/2"))
    digest = b"d" * 16
    for _ in range(2):  # (the second from the heads kept)
        writer = owned(redis_client, keys(0))
        boxes.carry(writer, {3: blob}, None, {3: digest})
        inbox = keys(3).inbox
        assert [request for _, _, request in writer._writes] == [
            hiredis.pack_command(("XADD", inbox, "*", b"l", blob)),
            hiredis.pack_command(("SET", f"{inbox}:w1", digest, "PX", 86_400_000)),
        ]
        writer.discard()
        boxes.rescue(writer)
        assert boxes._unsent[-1] == {3: blob}
    writer = owned(redis_client, keys(0))
    boxes.carry(writer, {3: blob}, None, {3: digest})
    writer.flush()
    assert redis_client.get(f"{keys(3).inbox}:w1") == digest
    ((_, fields),) = redis_client.xrange(keys(3).inbox)
    assert urls_of(fields[b"l"]) == ["https://a.example/1", "https://a.example/2"]
