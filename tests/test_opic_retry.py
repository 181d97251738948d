"""OPIC cash when the frontier's worker runs a failed ``apply`` again
(``PartitionedFrontier.apply``): the guard of :class:`~crawler.frontier.buffered.BufferedFrontier`
runs the same call again, whole, until Redis answers. A page's cash must reach its links once:
the total cash of the crawl is conserved (the page's own leaves with its lease, its links
gain what it handed on), not grown by every run again. On a real Redis: the call fails before
its local part is done (a seen-test lost), before its fenced write reached Redis, or after
Redis applied it (the reply cut by a loopback proxy)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis

from crawler.backends.redis import fence
from crawler.backends.redis import partitioned as partitioned_module
from crawler.backends.redis.outage import is_transient
from crawler.backends.redis.partitioned import PartitionedFrontier
from crawler.frontier.api import Entry, Settlement
from crawler.frontier.buffered import BufferedFrontier
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.reply_cut import reply_cutter
from tests.test_frontier_partitioned import partitioned

PAGE, KNOWN, NEW = "http://page.test/", "http://known.test/", "http://new.test/"


def _fails_once(call: Callable[..., object]) -> Callable[..., object]:
    failed: list[bool] = []

    def once(*args: object) -> object:
        if not failed:
            failed.append(True)
            raise redis.ConnectionError("Redis away")
        return call(*args)

    once.failed = failed  # type: ignore[attr-defined]
    return once


@contextmanager
def _failing(
    how: str, server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[redis.Redis, Callable[[], None]]]:
    """A client, and what arms the failure of the next ``apply`` (once)."""
    if how == "reply":
        with reply_cutter(server.port) as proxy:
            yield proxy.client(), lambda: proxy.cut_after(b"EXEC")
        return
    with server.client() as client:
        if how == "seen-test":  # after the cash for URLs seen before went in, before the links
            target, name = partitioned_module, "prime_seen"
        else:  # "write": everything done here, the fenced call never reached Redis
            target, name = fence, "transact"
        yield client, lambda: monkeypatch.setattr(target, name, _fails_once(getattr(target, name)))


@pytest.mark.parametrize("how", ["seen-test", "write", "reply"])
def test_a_page_run_again_hands_its_cash_on_once(
    how: str,
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A page worth 1.0 links to a URL queued with 1.0 (cash for a URL seen before) and to a
    new one, half each; its ``apply`` fails once and runs again: the URL seen before holds
    1.5, the new one 0.5, and the crawl's cash is still the 2.0 seeded."""
    clock = FakeClock()
    with _failing(how, redis_server, monkeypatch) as (client, arm):
        f = partitioned(client, fresh_key(), clock, count=1, opic=True)
        ledger = f.parts[0].frontier.ledger
        assert ledger is not None
        f.add(Entry(PAGE, "page.test", cash=1.0))
        page = f.next()
        assert page is not None and page.entry.cash == pytest.approx(1.0)
        f.add(Entry(KNOWN, "known.test", cash=1.0))
        links = [Entry(NEW, "new.test", cash=0.5)]
        done = [Settlement("finish", page.token, 0.1)]
        credits = [(KNOWN, 0.5, "", "known.test")]
        arm()
        with pytest.raises(redis.ConnectionError):
            f.apply(links, done, credits)
        results, _ = f.apply(links, done, credits)  # the guard's run again of the same call
        assert [r.added for r in results] == [True]  # (not "seen": its own claim)
        assert ledger.cash(KNOWN) == pytest.approx(1.5)
        assert ledger.cash(NEW) == pytest.approx(0.5)
        assert ledger.total == pytest.approx(2.0)
        assert ledger.seeded + ledger.credited == pytest.approx(
            ledger.total + ledger.spent + ledger.to_fetched
        )
        clock.now += 10.0
        leased = {lease.entry.url: lease.entry.cash for lease in f.next_many(10)}
        assert leased == {KNOWN: pytest.approx(1.5), NEW: pytest.approx(0.5)}
        f.close()


def test_a_call_after_the_run_again_is_new(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once the call went through, the same links and cash given again are a new call (the
    same page fetched again, another page's alike): its cash counts."""
    clock = FakeClock()
    with redis_server.client() as client:
        f: PartitionedFrontier = partitioned(client, fresh_key(), clock, count=1, opic=True)
        ledger = f.parts[0].frontier.ledger
        assert ledger is not None
        f.add(Entry(KNOWN, "known.test", cash=1.0))
        links, credits = [Entry(NEW, "new.test", cash=0.5)], [(KNOWN, 0.5, "", "known.test")]
        monkeypatch.setattr(fence, "transact", _fails_once(fence.transact))
        with pytest.raises(redis.ConnectionError):
            f.apply(links, [], credits)
        f.apply(links, [], credits)  # the run again
        f.apply(links, [], credits)  # a new call: its link is seen now, its cash counts
        assert ledger.cash(KNOWN) == pytest.approx(2.0)
        assert ledger.cash(NEW) == pytest.approx(1.0)
        f.close()


def test_the_buffered_frontiers_guard_runs_a_page_again_and_its_cash_goes_once(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same through :class:`BufferedFrontier`: the page's cash, links and completion
    queued in one batch, whose ``apply`` fails once on the way to Redis; the worker's guard
    runs it again, and the cash is counted once."""
    clock = FakeClock()
    with redis_server.client() as client:
        f = partitioned(client, fresh_key(), clock, count=1, opic=True)
        ledger = f.parts[0].frontier.ledger
        assert ledger is not None
        f.add(Entry(PAGE, "page.test", cash=1.0))
        page = f.next()
        assert page is not None
        f.add(Entry(KNOWN, "known.test", cash=1.0))
        buffered = BufferedFrontier(f, transient=is_transient, lease_ttl=120.0)
        try:
            assert buffered.flush(timeout=60)
            monkeypatch.setattr(fence, "transact", failing := _fails_once(fence.transact))
            buffered.credit([(KNOWN, 0.5, "", "known.test")])
            buffered.add_many([Entry(NEW, "new.test", cash=0.5)])
            buffered.finish(page.token, 0.1)
            assert buffered.flush(timeout=60)
        finally:
            buffered.close()
        assert failing.failed  # type: ignore[attr-defined]
        assert ledger.cash(KNOWN) == pytest.approx(1.5)
        assert ledger.cash(NEW) == pytest.approx(0.5)
        assert ledger.total == pytest.approx(2.0)
