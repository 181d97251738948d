"""A flush of several partitions on a Redis Cluster (``crawler.backends.redis.fence``), each
partition's call to its own master: one partition found lost while another's call fails
(its master away, or refusing the call). The lost one is said to the caller, who mails what
its refused writes were to store (a page's links) to the partition's next owner; raised
with the other's error instead, its writes were dropped unsaid, and the links with them."""

from __future__ import annotations

from crawler.backends.redis.fence import PartitionLost, flush_together
from crawler.backends.redis.ownership import PartitionOwnership
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import fresh_key

COUNT = 16
TTL = 30.0  # no lease may lapse within the test


def test_a_partition_lost_is_said_though_another_partitions_call_failed(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    client = redis_cluster.client()
    try:
        crawl = fresh_key()
        worker = PartitionOwnership(client, crawl, COUNT, "w1", TTL)
        worker.beat()
        assert len(worker.owned) == COUNT
        by_node = {}
        for ownership in worker.owned.values():
            by_node.setdefault(client.get_node_from_key(ownership.keys.lease).name, ownership)
        lost, failing = list(by_node.values())[:2]  # two partitions on two masters
        client.set(lost.keys.lease, "w2/99", px=int(TTL * 1000))  # w2 took it meanwhile
        client.set(failing.keys.hosts, "not a hash")  # its master refuses the call's HSET
        lost.writer.write("RPUSH", lost.keys.front(0), "a link")
        failing.writer.write("HSET", failing.keys.hosts, "a.test", "1")
        said = flush_together(client, [lost.writer, failing.writer])
        assert isinstance(said[0], PartitionLost) and said[1] is None
        assert [w[0] for w in lost.writer.dropped] == ["RPUSH"]  # to be mailed by the caller
        assert failing.writer.pending == 1  # kept: its call goes again at the next flush
        assert not client.exists(lost.keys.front(0))
    finally:
        client.close()
