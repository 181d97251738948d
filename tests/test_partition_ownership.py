"""Workers own the partitions of a crawl's hosts (``crawler.backends.redis.ownership``): one
worker takes them all, workers that join get their fair share within a few beats (16 over 3:
6/5/5), a worker that stops beating loses its partitions to the others once its leases expire
(with a higher epoch, so its fenced writes are refused and change nothing), and a worker that
releases or leaves hands its partitions over at once and says so. A busy owner hands a surplus
partition over once its open leases are settled, never with them. On a real Redis
(and one Redis Cluster), in real time with short TTLs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from crawler.backends.redis import fence
from crawler.backends.redis import partitioned as partitioned_module
from crawler.backends.redis.fence import PartitionLost
from crawler.backends.redis.keys import CrawlKeys, PartitionKeys
from crawler.backends.redis.ownership import PartitionOwnership, fair_share
from crawler.frontier import PolitenessPolicy
from tests.frontier_contract import FakeClock, entries
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import fresh_key, redis_client, redis_server  # noqa: F401
from tests.test_frontier_partitioned import partitioned
from tests.test_partition_round_trips import round_trips

COUNT = 16
TTL = 5.0  # seconds: no lease expires within a test that does not wait for it, even on a busy box
ROUNDS = 6  # "a few beats"


def beat_round(workers: list[PartitionOwnership]) -> None:
    """Each worker beats once and hands its surplus over at once (nothing to flush here)."""
    for worker in workers:
        for index in worker.beat().surplus:
            worker.release(index)


def rounds_until(
    workers: list[PartitionOwnership], done: Callable[[], bool], limit: int = ROUNDS
) -> int:
    """Beat rounds until ``done()``; how many it took (fails past ``limit``)."""
    for rounds in range(1, limit + 1):
        beat_round(workers)
        if done():
            return rounds
    pytest.fail(f"not settled after {limit} rounds: {[sorted(w.owned) for w in workers]}")


def shares(workers: list[PartitionOwnership]) -> list[int]:
    return [len(w.owned) for w in workers]


def assert_one_owner_each(client: redis.Redis, workers: list[PartitionOwnership]) -> None:
    """Every partition has exactly one owner, and Redis's leases say the same."""
    owners = [(i, w) for w in workers for i in w.owned]
    assert sorted(i for i, _ in owners) == list(range(COUNT))
    for index, worker in owners:
        ownership = worker.owned[index]
        assert client.get(ownership.keys.lease) == ownership.value.encode()
        assert ownership.value == f"{worker.worker}/{ownership.epoch}"


def worker(client: redis.Redis, crawl: str, name: str, ttl: float = TTL) -> PartitionOwnership:
    return PartitionOwnership(client, crawl, COUNT, name, ttl)


def live_workers(worker: PartitionOwnership) -> int:
    """How many workers have beaten within the TTL, by Redis's clock."""
    now = worker._now_ms()
    return int(worker.client.zcount(worker.members, now - worker.ttl_ms, "+inf"))


def beat_while_away(monkeypatch: pytest.MonkeyPatch, worker: PartitionOwnership) -> None:
    """A beat of ``worker`` that fails: Redis is away (its clock, the beat's first call)."""

    def away(self: PartitionOwnership) -> int:
        raise redis.ConnectionError("Redis is away")

    with monkeypatch.context() as outage:
        outage.setattr(PartitionOwnership, "_now_ms", away)
        with pytest.raises(redis.ConnectionError):
            worker.beat()


def test_one_worker_takes_every_partition(redis_client: redis.Redis) -> None:  # noqa: F811
    crawl = fresh_key()
    alone = worker(redis_client, crawl, "w1")
    beat = alone.beat()
    assert sorted(o.keys.index for o in beat.claimed) == list(range(COUNT))
    assert (beat.lost, beat.surplus) == ([], [])
    assert [o.epoch for o in beat.claimed] == [1] * COUNT
    assert_one_owner_each(redis_client, [alone])
    assert 0 < redis_client.pttl(PartitionKeys(crawl, 3, COUNT).lease) <= TTL * 1000
    again = alone.beat()  # renews, claims nothing new
    assert (again.claimed, again.lost, again.surplus) == ([], [], [])
    assert live_workers(alone) == 1
    assert redis_client.zscore(CrawlKeys(crawl).members, "w1") is not None


def test_two_workers_converge_to_equal_shares(redis_client: redis.Redis) -> None:  # noqa: F811
    crawl = fresh_key()
    a, b = worker(redis_client, crawl, "a"), worker(redis_client, crawl, "b")
    rounds_until([a, b], lambda: shares([a, b]) == [8, 8])
    assert_one_owner_each(redis_client, [a, b])
    beat_round([a, b])  # settled: nothing moves
    assert shares([a, b]) == [8, 8]
    assert live_workers(a) == live_workers(b) == 2


def test_a_third_worker_joining_gets_its_share(redis_client: redis.Redis) -> None:  # noqa: F811
    crawl = fresh_key()
    a, b = worker(redis_client, crawl, "a"), worker(redis_client, crawl, "b")
    rounds_until([a, b], lambda: shares([a, b]) == [8, 8])
    c = worker(redis_client, crawl, "c")
    # as even as can be: 6/5/5 (the first by name owns the extra one), not 6/6/4
    rounds_until([a, b, c], lambda: shares([a, b, c]) == [6, 5, 5])
    assert_one_owner_each(redis_client, [a, b, c])
    beat_round([a, b, c])  # settled: nothing moves
    assert shares([a, b, c]) == [6, 5, 5]


def test_fair_shares_add_up_to_the_partitions() -> None:
    for count in (1, 3, 16, 17):
        for n in range(1, 6):
            names = [f"w{i}" for i in range(n)]
            split = [fair_share(count, names, name) for name in names]
            assert sum(split) == count and max(split) - min(split) <= 1, (count, split)


def test_a_worker_that_stops_beating_loses_its_partitions(redis_client: redis.Redis) -> None:  # noqa: F811
    crawl = fresh_key()
    ttl = 1.0
    a, b = worker(redis_client, crawl, "a", ttl), worker(redis_client, crawl, "b", ttl)
    rounds_until([a, b], lambda: shares([a, b]) == [8, 8])
    stalled = dict(b.owned)  # b stops beating (a stalled process: it still holds its state)
    for _ in range(60):  # a keeps beating, a few times per TTL, until b's leases expired
        time.sleep(ttl / 4)
        beat_round([a])
        if len(a.owned) == COUNT:
            break
    assert sorted(a.owned) == list(range(COUNT))
    assert live_workers(a) == 1  # b's membership went stale and was removed
    for index, old in stalled.items():
        assert a.owned[index].epoch > old.epoch
        assert int(redis_client.get(old.keys.epoch)) == a.owned[index].epoch
        old.writer.write("HSET", old.keys.hosts, "stale.test", "from b")
        old.writer.write("RPUSH", old.keys.front(0), "stale entry")
        with pytest.raises(PartitionLost):
            old.writer.flush()
        assert old.writer.pending == 0
        assert not redis_client.exists(old.keys.hosts, old.keys.front(0))  # nothing written
    mine = a.owned[next(iter(stalled))]  # the new owner's writes land
    mine.writer.write("HSET", mine.keys.hosts, "live.test", "from a")
    mine.writer.flush()
    assert redis_client.hget(mine.keys.hosts, "live.test") == b"from a"
    woke = b.beat()  # b wakes up: its renewals are refused, it drops what it held
    assert sorted(woke.lost) == sorted(stalled)
    assert b.owned == {} and woke.claimed == []


def test_a_released_partition_is_claimed_by_another(redis_client: redis.Redis) -> None:  # noqa: F811
    crawl = fresh_key()
    a, b = worker(redis_client, crawl, "a"), worker(redis_client, crawl, "b")
    a.beat()
    assert b.beat().claimed == []  # every lease is a's
    surplus = a.beat().surplus
    assert len(surplus) == COUNT - 8
    index = surplus[0]
    handed = a.owned[index]
    handed.writer.write("HSET", handed.keys.hosts, "h.test", "last words")
    with pytest.raises(ValueError, match="unflushed"):
        a.release(index)  # the caller flushes first
    handed.writer.flush()
    heard = redis_client.pubsub(ignore_subscribe_messages=True)
    heard.subscribe(CrawlKeys(crawl).handover)
    a.release(index)
    assert index not in a.owned and not redis_client.exists(handed.keys.lease)
    deadline, message = time.monotonic() + 30, None
    while message is None and time.monotonic() < deadline:  # said: the others claim it now
        message = heard.get_message(timeout=1.0)
    heard.close()
    assert message is not None and message["data"] == b"released"
    # whatever of it still runs at a (a frontier call that missed the release) is refused:
    # the release raised the epoch, so the lease is no lapsed one of a's to take back
    handed.writer.write("HSET", handed.keys.hosts, "h.test", "too late")
    with pytest.raises(PartitionLost):
        handed.writer.flush()
    claimed = b.beat().claimed
    assert [o.keys.index for o in claimed] == [index]
    assert claimed[0].epoch == handed.epoch + 2  # the release's and b's claim
    assert redis_client.hget(handed.keys.hosts, "h.test") == b"last words"
    handed.writer.write("HDEL", handed.keys.hosts, "h.test")
    with pytest.raises(PartitionLost):
        handed.writer.flush()


def test_a_worker_that_leaves_hands_everything_over_at_once(redis_client: redis.Redis) -> None:  # noqa: F811
    crawl = fresh_key()
    a, b = worker(redis_client, crawl, "a"), worker(redis_client, crawl, "b")
    rounds_until([a, b], lambda: shares([a, b]) == [8, 8])
    left = dict(a.owned)
    a.leave()
    assert a.owned == {}
    assert not any(redis_client.exists(o.keys.lease) for o in left.values())
    assert redis_client.zrange(CrawlKeys(crawl).members, 0, -1) == [b"b"]
    assert live_workers(b) == 1
    assert sorted(o.keys.index for o in b.beat().claimed) == sorted(left)  # no TTL to wait
    assert_one_owner_each(redis_client, [b])


def test_ownership_on_a_redis_cluster(redis_cluster: RedisClusterServers) -> None:  # noqa: F811
    client = redis_cluster.client()
    try:
        crawl = fresh_key()
        a, b = worker(client, crawl, "a"), worker(client, crawl, "b")
        rounds_until([a, b], lambda: shares([a, b]) == [8, 8])
        assert_one_owner_each(client, [a, b])
        nodes = {client.get_node_from_key(o.keys.lease).name for o in a.owned.values()}
        nodes |= {client.get_node_from_key(o.keys.lease).name for o in b.owned.values()}
        assert len(nodes) == 3  # the partitions spread over the masters
        mine = next(iter(a.owned.values()))
        mine.writer.write("HSET", mine.keys.hosts, "h.test", "1")
        mine.writer.flush()
        assert client.hget(mine.keys.hosts, "h.test") == b"1"
        left = sorted(a.owned)
        a.leave()
        assert sorted(o.keys.index for o in b.beat().claimed) == left
        assert_one_owner_each(client, [b])
    finally:
        client.close()


def test_a_busy_owner_hands_a_surplus_partition_over_only_once_settled(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner's fetches in the partition a joiner is owed stay open a long while (slow
    hosts, or pages whose links wait in a loaded machine's pipelines): it stops handing out
    from it at once, keeps it while they are open (Redis's clock moves on a minute over its
    beats here), and hands it over once they are settled. The joiner, told, claims it and
    hands out what was still queued there, never the URLs the old owner fetched: no page is
    fetched twice for want of a fault."""
    monkeypatch.setattr(partitioned_module, "BEAT", 3600.0)  # the test's calls beat
    skew = [0]  # ms added to Redis's clock, for both workers: a long wait without waiting
    now_ms = PartitionOwnership._now_ms
    monkeypatch.setattr(PartitionOwnership, "_now_ms", lambda self: now_ms(self) + skew[0])
    key, clock = fresh_key(), FakeClock()
    policy = PolitenessPolicy(min_delay=30.0)
    ttl = 30.0  # the partitions' leases (real keys): none lapses while the test runs
    a = partitioned(redis_client, key, clock, count=2, worker="a", policy=policy, ttl=ttl)
    a.add_many(entries(8, 2))
    out = a.next_many(16)  # one per host (each host then busy), in both partitions
    assert len(out) == 8 and len(a.parts) == 2
    b = partitioned(redis_client, key, clock, count=2, worker="b", policy=policy, ttl=ttl)
    stop = b.watch(lambda: None)
    try:
        assert b.parts == {}  # both a's, for now
        for _ in range(15):  # beats 4 s apart (within the TTL), a minute in all
            skew[0] += 4000
            b.beat()
            a.beat()
            assert a.next() is None  # every host busy; the surplus one hands out nothing
            assert len(a.parts) == 2 and b.parts == {}  # kept while its leases are open
        for lease in out:  # fetched and processed at last
            a.finish(lease.token, 0.1)
        a.beat()
        assert len(a.parts) == 1
        (handed,) = set(range(2)) - set(a.parts)
        deadline = time.monotonic() + 60
        while handed not in b.parts:  # b's next call after the wake-up claims it
            assert time.monotonic() < deadline, "the joiner never claimed the partition"
            b.due_in()
            time.sleep(0.05)
    finally:
        stop()
    done = {lease.entry.url for lease in out}
    there = [e.url for e in entries(8, 2) if a.shard(e.host) == handed]
    waiting = sorted(url for url in there if url not in done)
    assert waiting and len(b) == len(waiting)
    clock.now += 2 * policy.min_delay
    assert sorted(lease.entry.url for lease in b.next_many(16)) == waiting


def test_a_worker_hands_its_surplus_over_together_once_all_of_it_is_settled(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A surplus partition whose fetches are settled is not handed over while another of the
    surplus still has fetches open: the claimers would take up the settled ones (empty ones
    are settled at once) before the busy ones come, and one of them could own only partitions
    without work. All of it goes together, with one wake-up."""
    monkeypatch.setattr(partitioned_module, "BEAT", 3600.0)  # the test's calls beat
    key, clock = fresh_key(), FakeClock()
    policy = PolitenessPolicy(min_delay=30.0)
    a = partitioned(redis_client, key, clock, count=4, worker="a", policy=policy, ttl=30.0)
    a.add_many(entries(32, 2))
    out = a.next_many(64)  # one per host, in every partition
    assert len(a.parts) == 4 and {a.shard(lease.entry.host) for lease in out} == set(range(4))
    b = partitioned(redis_client, key, clock, count=4, worker="b", policy=policy, ttl=30.0)
    a.beat()
    surplus = sorted(i for i, part in a.parts.items() if part.draining)
    assert len(surplus) == 2
    for lease in out:  # the first surplus partition's fetches are settled, the other's not
        if a.shard(lease.entry.host) == surplus[0]:
            a.finish(lease.token, 0.1)
    a.beat()
    assert sorted(a.parts) == list(range(4))  # both kept: one still has fetches open
    for lease in out:
        if a.shard(lease.entry.host) != surplus[0]:
            a.finish(lease.token, 0.1)
    a.beat()
    assert sorted(set(range(4)) - set(a.parts)) == surplus  # together
    b.beat()
    assert sorted(b.parts) == surplus


def test_a_slow_fetch_holds_the_rest_of_the_surplus_back_only_so_long(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``TOGETHER_WAIT`` since the surplus was named, its settled partitions go without
    the one whose fetch is still open (a slow host): a joiner waits seconds, not a timeout."""
    monkeypatch.setattr(partitioned_module, "BEAT", 3600.0)  # the test's calls beat
    key, clock = fresh_key(), FakeClock()
    policy = PolitenessPolicy(min_delay=30.0)
    a = partitioned(redis_client, key, clock, count=4, worker="a", policy=policy, ttl=30.0)
    a.add_many(entries(32, 2))
    out = a.next_many(64)
    partitioned(redis_client, key, clock, count=4, worker="b", policy=policy, ttl=30.0)
    a.beat()
    surplus = sorted(i for i, part in a.parts.items() if part.draining)
    for lease in out:
        if a.shard(lease.entry.host) == surplus[0]:
            a.finish(lease.token, 0.1)
    a.beat()
    assert sorted(a.parts) == list(range(4))  # within the wait: kept
    monkeypatch.setattr(partitioned_module, "TOGETHER_WAIT", 0.0)  # (the wait is over)
    a.beat()
    assert surplus[0] not in a.parts and surplus[1] in a.parts


def test_a_partition_found_lost_as_it_hands_out_gives_the_engine_nothing(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner stalled past its lease and another worker took the partition, and the
    hand-out's fenced write is what finds it out: its leases are refused in Redis, where the
    URLs stay queued for the new owner, who hands them out. The old owner hands the engine
    none of them: each URL is fetched once, by the new owner."""
    monkeypatch.setattr(partitioned_module, "BEAT", 3600.0)  # no beat finds it out first
    key, clock = fresh_key(), FakeClock()
    old = partitioned(redis_client, key, clock, count=1, worker="old")
    old.add_many(entries(3, 2))
    keys = old.parts[0].ownership.keys
    redis_client.delete(keys.lease)  # lapsed while "old" stalled; "new" claims it
    new = partitioned(redis_client, key, clock, count=1, worker="new")
    assert old.next_many(4) == [] and old.parts == {}
    assert sorted(lease.entry.url for lease in new.next_many(4)) == [
        f"http://h{i}.test/0" for i in range(3)
    ]


def test_back_from_an_outage_a_worker_claims_no_lease_that_lapsed_meanwhile(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis away (restarted): the workers' beats fail, and their leases and memberships lapse
    meanwhile. The first worker back, whose own last beat is not a TTL old, claims none of
    the partitions of a worker not back yet: that one, back a moment later, takes its own
    leases again and goes on with the work it holds, which a claimer would fetch again."""
    skew = [0]  # ms added to Redis's clock, for both workers: the outage without waiting
    now_ms = PartitionOwnership._now_ms
    monkeypatch.setattr(PartitionOwnership, "_now_ms", lambda self: now_ms(self) + skew[0])
    crawl, ttl = fresh_key(), 30.0
    a, b = worker(redis_client, crawl, "a", ttl), worker(redis_client, crawl, "b", ttl)
    rounds_until([a, b], lambda: shares([a, b]) == [8, 8])
    b.beat()  # b's last beat before Redis went away; a's a few seconds later
    skew[0] += 5_000
    a.beat()
    beat_while_away(monkeypatch, a)
    for ownership in b.owned.values():  # b's leases lapse during the outage
        redis_client.delete(ownership.keys.lease)
    skew[0] += 27_000  # a back: its last beat 27 s old, b's membership 32 s (past the TTL)
    assert a.beat().claimed == []
    assert shares([a, b]) == [8, 8]
    skew[0] += 3_000  # b back: its renewals take its own leases again
    assert b.beat().lost == []
    a.beat()
    assert shares([a, b]) == [8, 8]
    assert_one_owner_each(redis_client, [a, b])


def test_a_worker_whose_calls_are_held_up_keeps_its_leases_alive(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """The owner's calls stop for longer than a lease (its frontier thread behind a backlog
    of calls after an outage, a starved process), with URLs handed out: a thread of its own
    renews the leases, so no other worker claims the partition and fetches those URLs again.
    Stopped (the worker killed, or its calls stuck past ``STUCK``), it renews nothing, and
    the partition goes to the other worker once the lease lapses."""
    key, clock, ttl = fresh_key(), FakeClock(), 2.0
    a = partitioned(redis_client, key, clock, count=1, worker="a", ttl=ttl)
    a.add_many(entries(3, 1))
    assert len(a.next_many(3)) == 3
    stop = a.ownership.keep_alive(0.1)
    try:
        b = partitioned(redis_client, key, clock, count=1, worker="b", ttl=ttl)
        start = b.ownership._now_ms()
        while b.ownership._now_ms() - start < 3 * ttl * 1000:  # a's calls held up 3 TTLs
            b.beat()
            assert b.parts == {}, "a's lease lapsed while a was alive"
            time.sleep(0.05)
    finally:
        stop()
    deadline = time.monotonic() + 60
    while not b.parts:  # a renews nothing more: its lease lapses, b claims the partition
        assert time.monotonic() < deadline, "the lease was still renewed after the stop"
        b.beat()
        time.sleep(0.05)


def test_a_release_cut_short_keeps_the_partition_and_its_lease(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis goes away as a surplus partition is released: the partition stays this worker's
    (renewed, given up at a later beat), and the DEL that failed is not sent again with the
    next renewal, which would free the lease of a partition still served (handing out again
    while the beats cannot tell the members apart): another worker would claim it, and fetch
    again the URLs it holds."""
    # (the renewals are GETEX, no fenced call: a leftover DEL has no call to ride in)
    crawl = fresh_key()
    a = worker(redis_client, crawl, "a")
    a.beat()
    index = next(iter(a.owned))

    def away(*args: object, **kwargs: object) -> None:
        raise redis.ConnectionError("Redis is away")

    with monkeypatch.context() as outage:
        outage.setattr(fence, "transact", away)
        with pytest.raises(redis.ConnectionError):
            a.release(index)
    assert index in a.owned
    with round_trips(monkeypatch, lambda data: True) as sent:
        a.beat()  # Redis back: the renewals go through, without the DEL
    assert any(b"GETEX" in data for data in sent)
    assert not any(b"$3\r\nDEL\r\n" in data for data in sent)
    assert redis_client.get(a.owned[index].keys.lease) == a.owned[index].value.encode()


def test_back_from_an_outage_a_surplus_partition_stays_surplus(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker back from an outage does not know which workers are live for a TTL: what it
    was handing over stays surplus (it hands out nothing more there), rather than being
    served again and claimed, meanwhile, by the worker it was going to."""
    crawl = fresh_key()
    a, b = worker(redis_client, crawl, "a"), worker(redis_client, crawl, "b")
    a.beat()
    b.beat()
    surplus = a.beat().surplus
    assert len(surplus) == COUNT // 2
    beat_while_away(monkeypatch, a)
    assert a.beat().surplus == surplus  # quiet: claims nothing, hands over what it was


def test_a_beat_renews_every_lease_in_one_call_and_drops_only_the_lost(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker renews the leases of all its partitions at every beat: one request of a
    ``GETEX`` each, not a round trip each, and no fenced call (a GETEX costs Redis an eighth
    of a lease's share of one). Two leases taken behind its back (it stalled past them) say
    so in their replies: only they are dropped, and their values stay the other worker's."""
    crawl = fresh_key()
    a = worker(redis_client, crawl, "a")
    rounds_until([a], lambda: len(a.owned) == COUNT)
    stolen = [3, 11]
    for index in stolen:  # another worker's claim: a new epoch, then its lease
        keys = a.partitions[index]
        redis_client.incr(keys.epoch)
        redis_client.set(keys.lease, "b/99", px=60_000)
    kept = [a.owned[i] for i in range(COUNT) if i not in stolen]
    for ownership in kept:
        redis_client.pexpire(ownership.keys.lease, 1000)  # due for renewal
    with round_trips(monkeypatch, lambda data: b"GETEX" in data or b"WATCH" in data) as sent:
        beat = a.beat()
    assert sorted(beat.lost) == stolen
    assert len(sent) == 1 and b"WATCH" not in sent[0]  # one request renewed all 16
    assert sorted(a.owned) == [i for i in range(COUNT) if i not in stolen]
    for ownership in kept:
        assert redis_client.pttl(ownership.keys.lease) > 1000
    for index in stolen:
        assert redis_client.get(a.partitions[index].lease) == b"b/99"


def test_the_keep_alive_renews_the_other_leases_when_one_was_taken(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """The keep-alive thread renews every lease in one call; a lease taken behind the
    worker's back refuses that call, and the others are renewed all the same (the beat, held
    up, is what drops the lost one)."""
    crawl = fresh_key()
    a = worker(redis_client, crawl, "a")
    rounds_until([a], lambda: len(a.owned) == COUNT)
    taken = a.partitions[5]
    redis_client.incr(taken.epoch)
    redis_client.set(taken.lease, "b/99", px=60_000)
    kept = [a.owned[i] for i in range(COUNT) if i != 5]
    for ownership in kept:
        redis_client.pexpire(ownership.keys.lease, 1000)  # lapses within a second unrenewed
    stop = a.keep_alive(0.05)
    try:
        deadline = time.monotonic() + 30
        while not all(redis_client.pttl(o.keys.lease) > 1000 for o in kept):
            assert time.monotonic() < deadline, [redis_client.pttl(o.keys.lease) for o in kept]
            time.sleep(0.05)
    finally:
        stop()
    assert redis_client.get(taken.lease) == b"b/99"


def test_a_joining_worker_gets_partitions_with_work(redis_client: redis.Redis) -> None:  # noqa: F811
    """A crawl of few hosts: half the partitions hold work, and they are the ones the first
    worker prefers. By preference alone it would keep them all and the joiner would own
    only empty partitions, fetching nothing; each gets half of the work instead."""
    crawl = fresh_key()
    a = worker(redis_client, crawl, "a")
    rounds_until([a], lambda: len(a.owned) == COUNT)
    busy = [i for i in a.order][: COUNT // 2]  # a's most preferred
    redis_client.hset(CrawlKeys(crawl).partitions, mapping={
        **{str(i): "12 1" for i in busy}, **{str(i): "0 0" for i in a.order[COUNT // 2 :]},
    })
    b = worker(redis_client, crawl, "b")
    rounds_until([a, b], lambda: shares([a, b]) == [8, 8])
    assert_one_owner_each(redis_client, [a, b])
    assert len(set(a.owned) & set(busy)) == len(set(b.owned) & set(busy)) == COUNT // 4


def test_a_surplus_once_named_stays_named_while_it_drains(redis_client: redis.Redis) -> None:  # noqa: F811
    """The surplus a busy owner drains is not renamed at the next beat when the work it said
    it holds changes: a partition being drained is handed over, not kept half-drained."""
    crawl = fresh_key()
    a = worker(redis_client, crawl, "a")
    rounds_until([a], lambda: len(a.owned) == COUNT)
    loads = CrawlKeys(crawl).partitions
    redis_client.hset(loads, mapping={str(i): "3 0" for i in range(0, COUNT, 2)})
    b = worker(redis_client, crawl, "b")
    b.beat()
    first = a.beat().surplus
    assert len(first) == COUNT // 2
    redis_client.hset(loads, mapping={str(i): "0 0" for i in range(COUNT)})  # all drained
    assert a.beat().surplus == first


def test_a_named_surplus_stays_named_when_another_worker_joins(redis_client: redis.Redis) -> None:  # noqa: F811
    """A worker joining while the surplus drains makes its owner name more, keeping what it
    named: a partition being drained (its queue waiting there) is not taken back half-drained
    because it now looks like the one with work. One leaving makes it keep some of what it
    named, not start draining others."""
    crawl = fresh_key()
    a = worker(redis_client, crawl, "a")
    rounds_until([a], lambda: len(a.owned) == COUNT)
    loads = CrawlKeys(crawl).partitions
    redis_client.hset(loads, mapping={str(i): "3 0" for i in range(0, COUNT, 2)})
    worker(redis_client, crawl, "b").beat()
    first = a.beat().surplus
    assert len(first) == COUNT // 2
    # what the surplus holds waits there (it hands out nothing); the rest was fetched
    redis_client.hset(loads, mapping={str(i): "3 0" if i in first else "0 0" for i in range(COUNT)})
    c = worker(redis_client, crawl, "c")
    c.beat()
    second = a.beat().surplus
    assert len(second) == COUNT - 6  # a's share of 16 among 3: 6
    assert set(first) <= set(second)
    # and when one leaves, some of the named are kept: none of the others starts to drain
    c.leave()
    said = {str(i): "0 0" if i in second else "3 0" for i in range(COUNT)}  # the kept have work
    redis_client.hset(loads, mapping=said)
    third = a.beat().surplus
    assert len(third) == COUNT // 2
    assert set(third) <= set(second)
