"""An owner's read of its inbox whose reply was lost (``crawler.backends.redis.mail``): Redis
delivered the letters to the owner (they wait in the group's pending list) and the reply never
came. The crawl's client on one Redis sends a command again once after a lost connection
(``retry_on_timeout``, scrapy-redis's default): the letters must still be queued, once. On a
real Redis, the reply cut by a loopback proxy.
"""

from __future__ import annotations

import contextlib

import redis
from scrapy.settings import Settings

from crawler.backends.redis.connection import redis_client
from tests.frontier_contract import FakeClock, entries
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.reply_cut import reply_cutter
from tests.test_frontier_partitioned import partitioned

COUNT = 4


def test_letters_whose_read_lost_its_reply_are_queued_once(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key, clock = fresh_key(), FakeClock()
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        # the crawl's own client, through the proxy
        settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{proxy.port}", "REDIS_CLUSTER": "no"})
        through = redis_client(settings)
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
