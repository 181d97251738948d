"""A worker's claim of a URL in the seen-set of a partition it owns
(``PartitionedFrontier.mark_seen``: a page requisite's claim, then its add) whose fenced write
is cut on the way, Redis away for a moment. The frontier's worker runs a failed job again
whole; the claim must not then answer "seen" for the URL it claimed itself, or the requisite
is never queued. On a real Redis, the reply cut by a loopback proxy."""

from __future__ import annotations

import redis

from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.reply_cut import reply_cutter
from tests.test_frontier_partitioned import partitioned


def test_a_claim_whose_write_was_cut_still_says_new(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    url = "http://a.test/style.css"
    with reply_cutter(redis_server.port) as proxy:
        worker = partitioned(proxy.client(), fresh_key(), FakeClock(), count=1)
        proxy.cut_after(b"EXEC")  # the fenced call that writes the claim
        try:
            new = worker.mark_seen([url])
        except redis.ConnectionError:
            new = worker.mark_seen([url])  # the worker's job, run again
        assert proxy.cuts == 1
        assert new == 1
        assert worker.mark_seen([url]) == 0  # claimed once: seen from now on
        worker.close()
