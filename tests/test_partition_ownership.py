"""Workers own the partitions of a crawl's hosts (``crawler.backends.redis.ownership``): one
worker takes them all, workers that join get their fair share within a few beats (16 over 3:
6/5/5), a worker that stops beating loses its partitions to the others once its leases expire
(with a higher epoch, so its fenced writes are refused and change nothing), and a worker that
releases or leaves hands its partitions over at once and says so. A busy owner hands a surplus
partition over within a bound, with its open leases, keeping their hosts' pace. On a real Redis
(and one Redis Cluster), in real time with short TTLs.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import pytest
import redis

from crawler.backends.redis import ownership as ownership_module
from crawler.backends.redis import partitioned as partitioned_module
from crawler.backends.redis.fence import FENCE_SOURCE, PartitionLost
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
    assert alone.live_workers() == 1
    assert redis_client.zscore(CrawlKeys(crawl).members, "w1") is not None


def test_two_workers_converge_to_equal_shares(redis_client: redis.Redis) -> None:  # noqa: F811
    crawl = fresh_key()
    a, b = worker(redis_client, crawl, "a"), worker(redis_client, crawl, "b")
    rounds_until([a, b], lambda: shares([a, b]) == [8, 8])
    assert_one_owner_each(redis_client, [a, b])
    beat_round([a, b])  # settled: nothing moves
    assert shares([a, b]) == [8, 8]
    assert a.live_workers() == b.live_workers() == 2


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
    assert a.live_workers() == 1  # b's membership went stale and was removed
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
    claimed = b.beat().claimed
    assert [o.keys.index for o in claimed] == [index]
    assert claimed[0].epoch == handed.epoch + 1
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
    assert b.live_workers() == 1
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
        assert mine.writer.flush() == 1
        assert client.hget(mine.keys.hosts, "h.test") == b"1"
        left = sorted(a.owned)
        a.leave()
        assert sorted(o.keys.index for o in b.beat().claimed) == left
        assert_one_owner_each(client, [b])
    finally:
        client.close()


def test_a_busy_owner_hands_a_surplus_partition_over_within_the_bound(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner's fetches in the partition a joiner is owed never settle (slow hosts): it
    stops handing out from it at once, and after ``HANDOVER_BOUND`` hands it over with them.
    The joiner claims it when told (its own beats are an hour apart here), and hands the open
    leases' URLs out again only once their hosts rested as if the leases had expired: the
    fetches it cannot see may run until then. The old owner's late completions do nothing."""
    monkeypatch.setattr(ownership_module, "HANDOVER_BOUND", 0.5)
    monkeypatch.setattr(partitioned_module, "BEAT", 3600.0)
    key, clock = fresh_key(), FakeClock()
    # the fake clock stands still while the test waits in real time for the handover (seconds,
    # on a loaded machine): Redis's clock carries the hold over, so it comes out that much
    # shorter on the fake one; a delay of 30 s leaves room for it
    policy = PolitenessPolicy(min_delay=30.0)
    lease_ttl = 60.0
    a = partitioned(redis_client, key, clock, count=2, worker="a", policy=policy,
                    lease_ttl=lease_ttl)  # fmt: skip
    a.add_many(entries(8, 2))
    out = a.next_many(16)  # one per host (each host then busy), in both partitions
    assert len(out) == 8 and len(a.parts) == 2
    b = partitioned(redis_client, key, clock, count=2, worker="b", policy=policy,
                    lease_ttl=lease_ttl)  # fmt: skip
    stop = b.watch(lambda: None)
    try:
        assert b.parts == {}  # both a's, for now
        deadline = time.monotonic() + 60
        while len(a.parts) == 2:  # a beats (its caller's calls) until it hands one over
            assert time.monotonic() < deadline, "the surplus partition was never handed over"
            a.beat()
            assert a.next() is None  # every host busy; the surplus one hands out nothing
            time.sleep(0.05)
        (handed,) = set(range(2)) - set(a.parts)
        while handed not in b.parts:  # b's next call after the wake-up claims it
            assert time.monotonic() < deadline, "the joiner never claimed the partition"
            b.due_in()
            time.sleep(0.05)
    finally:
        stop()
    moved = sorted(lease.entry.url for lease in out if a.shard(lease.entry.host) == handed)
    assert moved and len(b) == len(moved) * 2  # the open leases' URLs, queued again
    clock.now += lease_ttl  # the leases' deadline: the hosts rest their delay after it
    assert b.next() is None
    clock.now += 2 * policy.min_delay
    again = b.next_many(16)
    assert sorted(lease.entry.url for lease in again) == moved
    for lease in out:  # a's completions of the handed-over leases change nothing
        a.finish(lease.token, 0.1)
    assert len(b) == len(moved) and b.in_flight() == len(moved)


def test_a_beat_renews_every_lease_in_one_call_and_drops_only_the_lost(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker renews the leases of all its partitions at every beat: one call of the fence
    script on one server, not a round trip each. Two leases taken behind its back (it stalled
    past them) refuse that call: it goes again without them, and only they are dropped."""
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
    fence_sha = hashlib.sha1(FENCE_SOURCE.encode()).hexdigest().encode()
    with round_trips(monkeypatch, lambda data: fence_sha in data) as sent:
        beat = a.beat()
    assert sorted(beat.lost) == stolen
    assert len(sent) == 2  # refused (naming the two), then the other 14 renewed together
    assert sorted(a.owned) == [i for i in range(COUNT) if i not in stolen]
    for ownership in kept:
        assert redis_client.pttl(ownership.keys.lease) > 1000
    for index in stolen:
        assert redis_client.get(a.partitions[index].lease) == b"b/99"
