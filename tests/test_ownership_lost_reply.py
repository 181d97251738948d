"""A claim whose reply was lost (``crawler.backends.redis.ownership``): Redis set the lease, the
connection dropped before the worker heard it. The lease value is the worker's own, so the
worker recognises it and serves the partition at once, instead of leaving it idle (leased to
nobody who knows) for a lease TTL. On a real Redis, the reply cut by a loopback proxy.
"""

from __future__ import annotations

import pytest
import redis

from crawler.backends.redis.keys import PartitionKeys
from crawler.backends.redis.ownership import PartitionOwnership
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.reply_cut import reply_cutter
from tests.test_frontier_partitioned import partitioned

COUNT = 4
TTL = 30.0  # no lease may lapse within the test: a lapse would hide the idle partition


def test_a_claim_whose_reply_was_lost_is_recognised_at_the_next_beat(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    crawl = fresh_key()
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        worker = PartitionOwnership(proxy.client(), crawl, COUNT, "w1", TTL)
        proxy.cut_after(b"NX")  # the SET NX of the claim: applied, its reply lost
        with pytest.raises(redis.ConnectionError):
            worker.beat()
        assert proxy.cuts == 1
        leases = [direct.get(PartitionKeys(crawl, i, COUNT).lease) for i in range(COUNT)]
        assert all(v is not None and v.startswith(b"w1/") for v in leases)  # Redis has them
        assert worker.owned == {}
        beat = worker.beat()  # the worker's own values: its leases, served now
        assert sorted(o.keys.index for o in beat.claimed) == list(range(COUNT))
        assert sorted(worker.owned) == list(range(COUNT))
        for index, ownership in worker.owned.items():
            assert ownership.value.encode() == leases[index]
            ownership.writer.write("HSET", ownership.keys.hosts, "a.test", "1")
            ownership.writer.flush()  # its fenced writes land: the lease is its own
            assert direct.hget(ownership.keys.hosts, "a.test") == b"1"
        assert worker.beat().claimed == []  # renewed, nothing claimed twice


def test_a_claim_retried_by_the_client_is_still_won(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A client that resends a pipeline after a dropped connection (a cluster client does,
    once) gets "not set" for the SET NX it applied the first time: the GET in the same
    pipeline tells the lease is the worker's."""
    crawl = fresh_key()
    with reply_cutter(redis_server.port) as proxy:
        worker = PartitionOwnership(proxy.client(retries=1), crawl, COUNT, "w1", TTL)
        proxy.cut_after(b"NX")
        beat = worker.beat()
        assert proxy.cuts == 1
        assert sorted(o.keys.index for o in beat.claimed) == list(range(COUNT))


def test_a_partition_lost_at_a_beat_cut_short_is_dropped_at_the_next(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A beat finds a lease taken by another worker, then Redis goes away before the beat
    ends (its look for partitions to claim cut): the next beat still drops the lost partition,
    whose queues the other worker serves now, instead of serving it on from memory."""
    key, clock = fresh_key(), FakeClock()
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        worker = partitioned(proxy.client(), key, clock, count=COUNT, worker="w1", ttl=TTL)
        assert sorted(worker.parts) == list(range(COUNT))
        taken = PartitionKeys(key, 2, COUNT)
        direct.set(taken.lease, b"w2/99", px=int(TTL * 1000))  # w2 claimed it meanwhile
        proxy.cut_after(b"HGETALL")  # the beat's look at the loads, to claim free partitions
        with pytest.raises(redis.ConnectionError):
            worker.beat()
        assert proxy.cuts == 1
        worker.beat()
        assert sorted(worker.parts) == [0, 1, 3] and worker.lost == 1
