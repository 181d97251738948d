"""A partition's hosts' next fetch times are kept on Redis's clock
(``crawler.backends.redis.queue_store``): on a cluster, where each node keeps its own, the
clock of the node that holds the partition, so that every owner in turn reads and writes
them on the same one (two nodes' clocks differ as their machines' do)."""

from __future__ import annotations

from crawler.backends.redis.controls import CrawlControls
from crawler.backends.redis.keys import CrawlKeys, PartitionKeys
from crawler.backends.redis.status import SharedCrawl, crawl_report
from tests.frontier_contract import FakeClock
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import fresh_key
from tests.test_frontier_partitioned import partitioned

COUNT = 16


def time_calls(node: object) -> int:
    stats = node.client().info("commandstats")  # type: ignore[attr-defined]
    return int(stats.get("cmdstat_time", {}).get("calls", 0))


def test_an_owner_reads_the_clock_of_the_node_that_holds_the_partition(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    client = redis_cluster.client()
    try:
        key = fresh_key()
        masters = {node.address: node for node in redis_cluster.masters()}
        holding = {client.get_node_from_key(PartitionKeys(key, i, COUNT).hosts).name
                   for i in range(COUNT)}  # fmt: skip
        assert len(holding) == len(masters) == 3  # the partitions spread over the masters
        for node in masters.values():
            node.client().config_resetstat()
        worker = partitioned(client, key, FakeClock(), count=COUNT, worker="w1")
        assert sorted(worker.parts) == list(range(COUNT))  # each taken up: read from Redis
        assert {name: time_calls(masters[name]) > 0 for name in holding} == dict.fromkeys(
            holding, True
        )
        worker.close()
    finally:
        client.close()


def test_the_crawls_controls_and_heartbeats_read_the_clock_of_the_crawls_node(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    """A deadline is written on one clock and compared with it at every refresh, a block is
    stamped, heartbeats are judged against ``now``: all on the node of the crawl's ``{crawl}``
    keys, not on whichever node a keyless ``TIME`` reaches."""
    client = redis_cluster.client()
    try:
        key = fresh_key()
        keys = CrawlKeys(key)
        masters = {node.address: node for node in redis_cluster.masters()}
        home = client.get_node_from_key(keys.controls).name
        for node in masters.values():
            node.client().config_resetstat()
        controls = CrawlControls(client, key)
        for _ in range(6):  # a keyless TIME goes to a random node: six reach another likely
            controls.set_control("deadline", 60, relative=True)
            controls.refresh()
        controls.block("a.example", wait=0)
        for _ in range(6):
            crawl_report(SharedCrawl(client, key, COUNT, 1))
        asked = {name for name, node in masters.items() if time_calls(node) > 0}
        assert asked == {home}
    finally:
        client.close()
