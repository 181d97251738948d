"""A flush of several partitions on a Redis Cluster (``crawler.backends.redis.fence``), each
partition's call to its own master: one partition found lost while another's call fails
(its master away, or refusing the call). The lost one is said to the caller, who mails what
its refused writes were to store (a page's links) to the partition's next owner; raised
with the other's error instead, its writes were dropped unsaid, and the links with them.
And a cluster none of whose nodes answers any more: what is sent to a node directly
(:class:`~crawler.backends.redis.fence.node_connection`) fails as Redis away."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.backends.redis.fence import FencedWriter, PartitionLost, flush_together
from crawler.backends.redis.keys import PartitionKeys
from crawler.backends.redis.mail import Mailboxes
from crawler.backends.redis.outage import TRANSIENT
from crawler.backends.redis.ownership import PartitionOwnership
from crawler.backends.redis.seenset import SeenSet, SeenSetConfig
from tests.redis_cluster_support import RedisClusterServers, redis_cluster, start_cluster  # noqa: F401
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


def test_calls_to_a_node_of_a_cluster_gone_whole_fail_as_redis_away(tmp_path: Path) -> None:
    """Every node of the cluster stopped (the worker cut off from them all): a claim in a
    seen-set, a fenced flush and an inbox's read, each sent to its node directly, fail with
    a lost connection, which the frontier's worker rides out (``TRANSIENT``), not with the
    cluster client's "cannot be connected" from the map of slots read again after it."""
    cluster = start_cluster(tmp_path, masters=3, replicas=0)
    client = cluster.client()
    try:
        keys = PartitionKeys(fresh_key(), 0, 1)
        seen = SeenSet(client, keys, SeenSetConfig(capacity=1000, error=0.01, bloom=False))
        assert seen.add_many([1, 2]) == [True, True]  # (connected to the node)
        client.set(keys.lease, "w/1")
        client.set(keys.epoch, "1")
        writer = FencedWriter(client, keys, "w/1", 60.0)
        writer.write("SET", keys.prefix + ":x", "1")
        writer.flush()
        mail = Mailboxes(client, lambda i: keys, "w1")
        mail.open(0)
        assert mail.receive([0], "w1") == {}
        cluster.stop()
        with pytest.raises(TRANSIENT):
            seen.add_many([3])
        writer.write("SET", keys.prefix + ":x", "2")
        with pytest.raises(TRANSIENT):
            writer.flush()
        assert writer.pending == 1  # (kept: sent again once the cluster is back)
        with pytest.raises(TRANSIENT):
            mail.receive([0], "w1")
    finally:
        client.close()
        cluster.stop()
