"""What a worker takes from a list or stream in Redis, the reply lost after Redis applied it
(Redis away at that moment): an owner's read of its inbox (``crawler.backends.redis.mail``),
a batch of seeds taken off ``<site>:start_urls`` (``crawler.backends.redis.inbox``). The
crawl's client on one Redis sends a command again once after a lost connection
(``retry_on_timeout``, scrapy-redis's default): nothing taken may be lost. On a real Redis,
the reply cut by a loopback proxy.
"""

from __future__ import annotations

import contextlib

import redis
from scrapy.settings import Settings

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.inbox import SEED_BATCH, RedisScopeRegistry, SharedInbox
from crawler.backends.redis.keys import CrawlKeys
from tests.frontier_contract import FakeClock, entries
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.reply_cut import reply_cutter
from tests.test_frontier_partitioned import partitioned

COUNT = 4


def crawl_client(port: int) -> redis.Redis:
    """The crawl's own client (``crawler.backends.redis.connection``) to the Redis on ``port``."""
    settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{port}", "REDIS_CLUSTER": "no"})
    client = redis_client(settings)
    assert isinstance(client, redis.Redis)
    return client


def test_letters_whose_read_lost_its_reply_are_queued_once(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key, clock = fresh_key(), FakeClock()
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        through = crawl_client(proxy.port)
        a = partitioned(direct, key, clock, count=COUNT, worker="a")
        b = partitioned(through, key, clock, count=COUNT, worker="b")
        for _ in range(3):  # a hands partitions over to b at its beats
            a.beat()
            b.beat()
        assert len(a.parts) == len(b.parts) == 2
        links = entries(20, 2)  # 20 hosts over 4 partitions
        a.apply(links, [])
        mailed = len(links) - len(a)
        assert mailed > 0
        proxy.cut_after(b"XREADGROUP")
        with contextlib.suppress(redis.ConnectionError):  # (what matters: what b queues)
            b.read_mail()
        assert proxy.cuts == 1
        for _ in range(3):
            b.beat()
        assert len(b) == mailed  # every letter queued, once
        through.close()


def test_seeds_taken_off_the_list_whose_reply_was_lost_are_handed_over(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """The request that takes a batch of seeds off ``<site>:start_urls`` loses its reply
    after Redis applied it; the crawl's client sends it again once by itself. Every seed
    pushed is handed over all the same."""
    keys = CrawlKeys(fresh_key(), "site")
    total = SEED_BATCH + 50
    pushed = [f"https://s{i}.test/" for i in range(total)]
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        through = crawl_client(proxy.port)
        seeds: list[str] = []
        inbox = SharedInbox(through, keys.seeds, RedisScopeRegistry(through, keys.scope),
                            on_seeds=seeds.extend, on_scope=None)  # fmt: skip
        direct.rpush(keys.seeds, *pushed)
        for marker in (b"LPOP", b"LTRIM"):  # (the take: a pop, or the trim that ends it)
            proxy.cut_after(marker)
        polls = 0
        while direct.llen(keys.seeds) and polls < 10:
            polls += 1
            with contextlib.suppress(redis.ConnectionError):
                inbox.poll()
        assert proxy.cuts == 1 and direct.llen(keys.seeds) == 0
        assert set(seeds) == set(pushed)
        inbox.scope.close()


def test_seeds_whose_take_was_lost_before_redis_ran_it_are_handed_over(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """The request that trims a batch of seeds off ``<site>:start_urls`` is lost on its way
    (Redis never ran it): the batch was handed over all the same (its outcome unknown), and
    the next take reads it again at the list's head and hands it over again: every seed at
    least once, none lost (the scheduler's seen-test queues a seed handed over twice once)."""
    keys = CrawlKeys(fresh_key(), "site")
    total = SEED_BATCH + 50
    pushed = [f"https://s{i}.test/" for i in range(total)]
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        through = crawl_client(proxy.port)
        seeds: list[str] = []
        inbox = SharedInbox(through, keys.seeds, RedisScopeRegistry(through, keys.scope),
                            on_seeds=seeds.extend, on_scope=None)  # fmt: skip
        direct.rpush(keys.seeds, *pushed)
        proxy.drop_at(b"LTRIM")
        polls = 0
        while direct.llen(keys.seeds) and polls < 10:
            polls += 1
            with contextlib.suppress(redis.ConnectionError):
                inbox.poll()
        assert proxy.cuts == 1 and direct.llen(keys.seeds) == 0
        assert set(seeds) == set(pushed) and len(seeds) == total + SEED_BATCH
        inbox.scope.close()
