"""Link intake and admission without Scrapy: a page's links into a real Mercator frontier,
through the crawl's URL policy, with reactor turns the test runs itself."""

from __future__ import annotations

from collections.abc import Callable

from crawler.frontier import MercatorFrontier, PolitenessPolicy, Prioritizer, UrlPolicy
from crawler.frontier.scope import ScopeRegistry
from crawler.scheduler.admission import Admission
from crawler.scheduler.intake import LinkIntake
from crawler.scheduler.stats import FrontierStats


class Stats:
    """Scrapy's stats collector's two calls, into a dict."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count

    def set_value(self, key: str, value: int) -> None:
        self.values[key] = value


class Settings:
    def getint(self, name: str, default: int = 0) -> int:
        return default

    def getfloat(self, name: str, default: float = 0.0) -> float:
        return default


class Turns:
    """``call_later`` for a test without a reactor: each later turn is run by the test."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def __call__(self, delay: float, fn: Callable[[], None]) -> Turns:
        self.pending.append(fn)
        return self

    def cancel(self) -> None:
        self.pending.clear()

    def run_one(self) -> None:
        self.pending.pop(0)()


def intake(
    slice_size: int = 1000, later: Turns | None = None, **policy: object
) -> tuple[LinkIntake, MercatorFrontier, Stats, list[tuple[str, str]], list[str]]:
    frontier = MercatorFrontier(PolitenessPolicy(min_delay=0.0))
    acked: list[str] = []
    ack = frontier.ack
    frontier.ack = lambda token: (acked.append(token), ack(token))  # type: ignore[method-assign]
    origins: list[tuple[str, str]] = []
    admission = Admission(
        UrlPolicy(**{"domains": ("a.test",), **policy}),  # type: ignore[arg-type]
        Prioritizer("depth", 4),
        ScopeRegistry(),
        lambda origin, host: origins.append((origin, host)),
    )
    stats = Stats()
    link_intake = LinkIntake(
        admission, frontier, FrontierStats(stats),
        slice_size=slice_size, cache_size=1000, later=later,
    )
    return link_intake, frontier, stats, origins, acked


def test_links_are_admitted_once_and_each_origin_is_announced_before_its_first_link() -> None:
    link_intake, frontier, stats, origins, _ = intake()
    page = ["http://a.test/1", "http://a.test/2", "http://a.test/1", "https://a.test/3",
            "http://c.test/", "mailto:x@a.test"]
    link_intake.take(page, 1, None, None)
    link_intake.take(["http://a.test/2", "http://a.test/4"], 2, None, None)
    assert origins == [("http://a.test", "a.test"), ("https://a.test", "a.test")]
    assert len(frontier) == 4
    assert stats.values == {
        "frontier/enqueued": 4, "frontier/links_repeated": 2,
        "frontier/rejected/out_of_scope": 1, "frontier/rejected/scheme": 1,
    }


def test_a_too_deep_link_is_taken_when_it_comes_again_from_a_shallower_page() -> None:
    link_intake, frontier, stats, _, _ = intake(max_depth=1)
    link_intake.take(["http://a.test/deep"], 2, None, None)
    assert len(frontier) == 0 and stats.values["frontier/rejected/too_deep"] == 1
    link_intake.take(["http://a.test/deep"], 1, None, None)  # not remembered as refused
    assert len(frontier) == 1


def test_forgetting_the_cache_lets_links_of_a_host_brought_into_scope_in() -> None:
    link_intake, frontier, _, _, _ = intake()
    link_intake.take(["http://b.test/"], 1, None, None)
    link_intake.admission.widen({"b.test"})
    link_intake.take(["http://b.test/"], 1, None, None)
    assert len(frontier) == 0  # the raw-link cache still says "out of scope"
    link_intake.forget()
    link_intake.take(["http://b.test/"], 1, None, None)
    assert len(frontier) == 1


def test_a_big_page_goes_in_slices_and_its_ack_waits_for_its_last_link() -> None:
    turns = Turns()
    link_intake, frontier, stats, _, acked = intake(slice_size=4, later=turns)
    frontier.add(frontier_entry := link_intake.admission.entry("http://a.test/", "a.test", 0))
    lease = frontier.next()
    assert lease is not None and lease.entry is frontier_entry
    link_intake.take([f"http://a.test/{i}" for i in range(10)], 1, None, lease.token)
    link_intake.take(["http://a.test/other"], 1, None, None)  # after the big page's links
    assert stats.values["frontier/enqueued"] == 4 and link_intake.pending
    link_intake.ack(lease.token)  # the page is done, but 6 of its links still wait
    assert acked == []
    turns.run_one()
    assert acked == [] and stats.values["frontier/enqueued"] == 8
    turns.run_one()  # the page's last 2 links, then the other page's
    assert acked == [lease.token] and not link_intake.pending and not turns.pending
    assert stats.values["frontier/enqueued"] == 11


def test_flush_takes_everything_at_once() -> None:
    turns = Turns()
    link_intake, frontier, _, _, _ = intake(slice_size=3, later=turns)
    link_intake.take([f"http://a.test/{i}" for i in range(10)], 1, None, "page")
    assert len(frontier) == 3
    link_intake.flush()
    assert len(frontier) == 10 and not link_intake.pending and not turns.pending


def test_seed_hosts_join_the_scope_once() -> None:
    link_intake, _, _, _, _ = intake()
    admission = link_intake.admission
    assert admission.admit_seed_host("http://seed.test/")
    assert not admission.admit_seed_host("http://seed.test/other")
    assert admission.policy.check("http://seed.test/x")[0] == ""
