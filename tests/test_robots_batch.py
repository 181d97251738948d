"""A batch of new origins (a seeds file's hosts) costs one robots.txt cache read, not five per
origin, and every decision stays what it was: a real Redis cache (``INFO commandstats``
counts the reads), a real link intake."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from crawler.backends.redis.robots import RedisRobotsCache
from crawler.frontier import MercatorFrontier, PolitenessPolicy, Prioritizer, UrlPolicy
from crawler.frontier.api import SEED
from crawler.frontier.scope import ScopeRegistry
from crawler.robots.book import QUEUED, RobotsBook
from crawler.robots.rules import ALLOW_ALL, RULES, RobotsRecord
from crawler.scheduler.admission import Admission
from crawler.scheduler.intake import LinkIntake
from crawler.scheduler.stats import FrontierStats
from tests.redis_support import redis_server  # noqa: F401
from tests.test_scheduler_intake import Stats

ORIGINS = [f"https://h{i}.test" for i in range(6)]


def reads(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {c: stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("hget", "hmget")}


def meet(book: RobotsBook, origin: str, now: float) -> tuple[bool, bool]:
    """The robots.txt fetcher's steps when the scheduler announces ``origin``:
    (a fresh copy is in force, a robots.txt request is to be queued)."""
    with book.batch():
        book.discovered(origin, origin.split("//")[1])
        if book.fresh(origin, now):
            return True, False
        if not book.needs_fetch(origin, now):
            return False, False
        book.queued(origin)
        return False, True


def test_a_batch_of_origins_is_read_once_with_the_decisions_of_one_read_each(
    redis_server,  # noqa: F811
) -> None:
    client = redis_server.client()
    key = "robots-batch"
    writer = RedisRobotsCache(client, key)
    now = 1000.0
    writer.put(RobotsRecord(ORIGINS[0], RULES, 200, now, now + 3600, "User-agent: *\n"))
    writer.put(RobotsRecord(ORIGINS[1], ALLOW_ALL, 404, now - 7200, now - 3600, ""))  # expired
    unbatched = RobotsBook(RedisRobotsCache(client, key), "bot")
    client.config_resetstat()
    expected = [meet(unbatched, o, now) for o in ORIGINS]
    assert expected == [(True, False), *[(False, True)] * 5]  # the expired copy: refetched
    assert reads(client) == {"hget": len(ORIGINS), "hmget": 0}  # one each (was five)

    batched = RobotsBook(RedisRobotsCache(client, key), "bot")
    client.config_resetstat()
    batched.prefetch(ORIGINS)
    assert [meet(batched, o, now) for o in ORIGINS] == expected
    assert reads(client) == {"hget": 0, "hmget": 1}
    # the prefetched copies were used once: a later look at a queued origin reads again
    assert batched.state(ORIGINS[2]).fetching == QUEUED
    assert reads(client) == {"hget": 1, "hmget": 1}
    # origins already met are not read again by a later batch's prefetch
    client.config_resetstat()
    batched.prefetch(ORIGINS[:2])
    assert reads(client) == {"hget": 0, "hmget": 0}


def announcing_intake(
    policy: UrlPolicy, order: str = "depth"
) -> tuple[LinkIntake, MercatorFrontier, list[Any]]:
    """A link intake over a memory frontier, and what its admission announces, in order:
    ("batch", origins) for a batch's new origins, ("one", origin) for each."""
    heard: list[Any] = []
    admission = Admission(
        policy,
        Prioritizer(order, 4),
        ScopeRegistry(),
        lambda origin, host: heard.append(("one", origin)),
        discovering=lambda origins: heard.append(("batch", origins)),
    )
    frontier = MercatorFrontier(PolitenessPolicy(min_delay=0.0))
    intake = LinkIntake(
        admission, frontier, FrontierStats(Stats()), slice_size=1000, cache_size=1000
    )
    return intake, frontier, heard


def test_a_seed_batch_announces_its_new_origins_together_before_each() -> None:
    intake, frontier, heard = announcing_intake(UrlPolicy())
    intake.take_seeds([("https://a.test/1", "f"), ("https://b.test/", "f"), ("nope", "f"),
                       ("https://a.test/2", "f")])
    assert heard == [
        ("batch", ["https://a.test", "https://b.test"]),
        ("one", "https://a.test"),
        ("one", "https://b.test"),
    ]
    heard.clear()
    intake.take_seeds([("https://b.test/3", "f"), ("http://c.test/", "f")])
    assert heard == [("batch", ["http://c.test"]), ("one", "http://c.test")]
    leases = frontier.next_many(10)
    assert {le.entry.url for le in leases} == {"https://a.test/1", "https://b.test/",
                                               "http://c.test/"}
    assert all(le.entry.payload == SEED for le in leases)


@pytest.mark.parametrize("cash", [0.0, 1.0], ids=["plain", "opic"])
def test_a_pages_links_announce_their_new_origins_together(cash: float) -> None:
    """A page's links, with or without OPIC cash to hand on (two paths in the intake), announce
    the page's new origins in one batch before each: one robots.txt read for all of them."""
    policy = UrlPolicy(domains=("b.test", "c.test"))
    intake, frontier, heard = announcing_intake(policy, "opic" if cash else "depth")
    page = "https://a.test/"
    intake.take(["https://b.test/1", "https://c.test/", "https://b.test/2"], 1, None, None,
                cash=cash, page=page)  # fmt: skip
    assert heard == [
        ("batch", ["https://b.test", "https://c.test"]),
        ("one", "https://b.test"),
        ("one", "https://c.test"),
    ]
    assert len(frontier) == 3
