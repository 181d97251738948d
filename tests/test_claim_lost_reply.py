"""A worker's claim of a URL in the seen-set of a partition another worker owns
(``PartitionedFrontier.mark_seen``, ``SeenSet.add_many``: a page requisite is fetched by
whichever worker claims it first) whose reply was lost: Redis applied the ``SADD`` (or
``BF.MADD``) and the connection dropped before its answer came. The crawl's client on one
Redis sends a command again once after a lost connection (``retry_on_timeout``, scrapy-redis's
default); the claim sent again would answer "seen" for the worker's own claim, and nobody
would fetch the requisite. A claim of unknown outcome is the worker's own: it answers new (a
duplicate fetch at worst). On a real Redis, the reply cut by a loopback proxy."""

from __future__ import annotations

from scrapy.settings import Settings

from crawler.backends.redis.connection import redis_client
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.reply_cut import reply_cutter
from tests.test_frontier_partitioned import partitioned


def test_a_claim_in_another_partition_whose_reply_was_lost_says_new(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    url = "http://a.test/style.css"
    key, clock = fresh_key(), FakeClock()
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        owner = partitioned(direct, key, clock, count=1, worker="a")
        owner.beat()
        assert len(owner.parts) == 1  # the only partition: the other worker owns none
        # the crawl's own client (it resends once), through the proxy
        settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{proxy.port}", "REDIS_CLUSTER": "no"})
        through = redis_client(settings)
        other = partitioned(through, key, clock, count=1, worker="b")
        other.mark_seen(["http://a.test/warm.css"])  # (the seen-set reserved, connected)
        proxy.cut_after(b"BF.MADD" if _bloom(other) else b"SADD")
        new = other.mark_seen([url])
        assert proxy.cuts == 1
        assert new == 1  # claimed by this worker, which fetches it
        assert other.mark_seen([url]) == 0  # on the server all the same: seen from now on
        assert owner.mark_seen([url]) == 0
        other.close()
        owner.close()
        through.close()


def _bloom(frontier: object) -> bool:
    return bool(frontier._seen.bloom)  # type: ignore[attr-defined]
